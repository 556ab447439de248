"""`aka run` (the real CLI) pointed at a folder of tasks in the original's formats, as a user of the
original would: every task evaluated or skipped with its reason, a broken folder only failing
itself, the original's report files on request, and `aka report` making them again."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from original_task_fixtures import geak_task, instruction_task, rocmbench_task, vllm_task

from aka.results.task_result import FailureKind, TaskStatus, read_task_result

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow


def _aka(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO / "src"), "COLUMNS": "200"}
    return subprocess.run(
        [sys.executable, "-m", "aka.cli", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


def test_a_folder_of_original_tasks_runs_unchanged(tmp_path: Path) -> None:
    root = tmp_path / "tasks"
    geak_task(root)
    instruction_task(root)
    broken = vllm_task(root, "triton2triton/vllm/broken")
    (broken / "source/toy_scale.py").unlink()  # its config names a file that is not there
    vllm_task(root, "triton2triton/vllm/amd_only", platform_support={"required_arch": ["gfx942", "gfx950"]})
    rocmbench_task(
        root, "triton2triton/rocmbench/easy/test_blocks", target_kernel_functions=["add_kernel"], triton_versions="<1.0"
    )
    config = {
        "agent": {"template": "noop"},
        "tasks": ["all"],
        "target_gpu_model": "auto",
        "tasks_root": str(root),
        "log_directory": "logs",
        "workspace_directory_prefix": "workspace",
        "report_format": "original",
    }
    (tmp_path / "run.yaml").write_text(yaml.safe_dump(config))

    done = _aka("run", "run.yaml", cwd=tmp_path)
    assert done.returncode == 3, done.stderr  # one task could not be judged: the broken one
    assert "1 of 3 task(s) ended in an infrastructure failure" in done.stderr
    run_dir = next(tmp_path.glob("workspace_cpu_noop/run_*"))
    results = {r.task_name: r for r in (read_task_result(p) for p in run_dir.glob("*/task_result.yaml"))}
    assert results["triton2triton/geak_eval/L1/toy_copy"].status is TaskStatus.PASS
    assert results["triton2triton/geak_eval/L1/toy_copy"].trust == "task-stdout-line"
    assert results["instruction2triton/rocmbench/test_toy_add"].trust == "task-process-paired"
    infra = results["triton2triton/vllm/broken"]
    assert infra.status is TaskStatus.INFRA and infra.failure_kind is FailureKind.INFRA_ERROR
    assert "the task cannot be loaded" in str(infra.failure_message) and "does not exist" in str(infra.failure_message)
    manifest = json.loads((run_dir / "run_manifest.json").read_text())
    assert manifest["dropped_tasks"]["triton2triton/vllm/amd_only"].startswith(
        "requires gfx942 or gfx950 (an AMD GPU architecture)"
    )
    assert manifest["dropped_tasks"]["triton2triton/rocmbench/easy/test_blocks"].startswith("needs Triton <1.0")
    work = next(run_dir.glob("instruction2triton_rocmbench_test_toy_add_*/work"))
    assert "aka.compat.pytest_bench" in (work / "performance_utils_pytest.py").read_text()  # the agent's runs work
    prompt = (work.parent / "prompt.md").read_text()
    assert "only `add_kernel`, `sub_kernel` (and new helper functions) may change" in prompt

    reports = run_dir / "reports"
    breakdown = json.loads((reports / "task_type_breakdown.json").read_text())
    assert breakdown["agent"] == "noop" and breakdown["target_gpu"] == "cpu"
    assert breakdown["overall"]["total_tasks"] == 3 and breakdown["overall"]["correctness_pass_rate"] == pytest.approx(
        200 / 3
    )
    text = (reports / "overall_report.txt").read_text()
    assert text.startswith("=" * 80 + "\nAgentKernelArena Task Results Report\n")
    assert "         Error: infra_error: the task cannot be loaded" in text
    before = {p.name: p.read_text() for p in reports.iterdir() if p.is_file()}
    again = _aka("report", str(run_dir), cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    assert {p.name: p.read_text() for p in reports.iterdir() if p.is_file()} == before

    listed = _aka("tasks", "list", "--json", "--tasks-root", str(root), cwd=tmp_path)
    rows = {row["name"]: row for row in json.loads(listed.stdout)}
    assert rows["instruction2triton/rocmbench/test_toy_add"]["format"] == "original-v1"
    assert "does not exist" in rows["triton2triton/vllm/broken"]["problem"]
