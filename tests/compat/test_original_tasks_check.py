"""scripts/original_tasks_check.py on small task folders in the original's formats (CPU): a real
Triton kernel under the interpreter, a folder that does not load, one that only runs on AMD, one
that hangs past its time (in a run of its own); a shard, then the rest, rows as they come, the table."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from original_task_fixtures import triton_rocmbench_task, vllm_task

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "original_tasks_check.py"
pytestmark = pytest.mark.slow


def _check(root: Path, out: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    return subprocess.run(
        [
            sys.executable,
            str(SCRIPT),
            str(root),
            "--out",
            str(out),
            "--scratch",
            str(out / "scratch"),
            "--step-timeout",
            "240",
            *args,
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )


def _rows(out: Path) -> dict[str, dict[str, object]]:
    return {
        json.loads(line)["task"]: json.loads(line)
        for path in out.glob("rows-*.jsonl")
        for line in path.read_text().splitlines()
    }


def test_every_task_gets_a_row_and_the_table_says_why(tmp_path: Path) -> None:
    root = tmp_path / "tasks"
    triton_rocmbench_task(root)
    broken = vllm_task(root, "triton2triton/vllm/broken")
    (broken / "config.yaml").write_text("task_type: [unclosed")
    vllm_task(root, "triton2triton/vllm/amd_only", platform_support={"required_arch": "gfx942"})
    out = tmp_path / "out"
    first = _check(root, out, "--shard", "1/2", "--task-timeout", "200")
    assert first.returncode == 0, first.stderr
    rest = _check(root, out, "--task-timeout", "200")  # the whole list: shard 1's tasks already have rows
    assert rest.returncode == 0, rest.stderr
    firsts = {json.loads(line)["task"] for line in (out / "rows-1-of-2.jsonl").read_text().splitlines()}
    others = {json.loads(line)["task"] for line in (out / "rows-1-of-1.jsonl").read_text().splitlines()}
    assert len(firsts) == 2 and len(others) == 1 and not firsts & others  # each task once
    rows = _rows(out)
    triton = rows.pop("triton2triton/rocmbench/easy/test_triton_add")
    assert {name: row["verdict"] for name, row in rows.items()} == {
        "triton2triton/vllm/broken": "unloadable",
        "triton2triton/vllm/amd_only": "skipped",
    }
    assert triton["verdict"] in ("pass", "outside"), triton  # evaluated; CPU noise decides which
    assert triton["trust"] == "task-process-paired" and triton["format"] == "original-v1"
    # the device's seconds from the evaluator's notes: the baseline's three steps, the candidate's timing
    device_s = triton["device_s"]
    assert isinstance(device_s, dict)
    assert set(device_s["baseline"]) == {"compile", "correctness", "performance"}
    assert list(device_s["candidate"]) == ["performance"]
    assert all(len(v) == 2 and min(v) >= 0 for side in device_s.values() for v in side.values())
    assert "not valid YAML" in str(rows["triton2triton/vllm/broken"]["message"])
    assert "requires gfx942 (an AMD GPU architecture)" in str(rows["triton2triton/vllm/amd_only"]["message"])
    assert (out / "logs/triton2triton_rocmbench_easy_test_triton_add.log").is_file()
    table = (out / "table.md").read_text()
    assert "3 tasks; 1 evaluated;" in table and "| triton2triton/vllm | 2 |" in table and "(cpu)" in table

    (out / "table.md").unlink()
    assert _check(root, out, "--table-only").returncode == 0 and (out / "table.md").read_text() == table


def test_a_task_past_its_time_is_killed_and_the_rest_goes_on(tmp_path: Path) -> None:
    root = tmp_path / "tasks"
    vllm_task(root, "triton2triton/vllm/hangs", compile_command=["sleep 600"])
    vllm_task(root, "triton2triton/vllm/amd_only", platform_support={"required_arch": "gfx942"})
    out = tmp_path / "out"
    selectors = ["triton2triton/vllm/hangs", "triton2triton/vllm/amd_only"]
    done = _check(root, out, "--tasks", *selectors, "--task-timeout", "5")
    assert done.returncode == 0, done.stderr
    rows = _rows(out)
    assert rows["triton2triton/vllm/hangs"]["verdict"] == "timeout"
    assert "it was measuring the baseline (at " in str(rows["triton2triton/vllm/hangs"]["message"])  # where it was
    assert "its last command: sleep 600" in str(rows["triton2triton/vllm/hangs"]["message"])  # and in which command
    kept = (out / "logs" / "triton2triton_vllm_hangs.log").read_text()
    assert "when the task was killed) ---" in kept and "$ sleep 600" in kept  # its evaluation logs' ends are kept
    assert rows["triton2triton/vllm/hangs"]["suite"] == "vllm"  # grouped with its suite, though it never finished
    assert rows["triton2triton/vllm/amd_only"]["verdict"] == "skipped"
    written = [json.loads(line)["task"] for line in (out / "rows-1-of-1.jsonl").read_text().splitlines()]
    assert written == ["triton2triton/vllm/hangs", "triton2triton/vllm/amd_only"]  # the selectors' order
    again = _check(root, out, "--retry", "timeout", "--task-timeout", "5")  # only the timed-out task again
    assert again.returncode == 0, again.stderr
    written = [json.loads(line)["task"] for line in (out / "rows-1-of-1.jsonl").read_text().splitlines()]
    assert written[2:] == ["triton2triton/vllm/hangs"]
    assert "timeout: the task took over N s (--task-timeout)" in (out / "table.md").read_text()
    assert not [
        p for p in Path("/proc").glob("[0-9]*/cmdline") if str(root) in p.read_bytes().decode(errors="replace")
    ]  # nothing of it is left running
