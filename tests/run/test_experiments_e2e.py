"""End-to-end: a real experiment through the `aka` CLI on the real gelu task (CPU), then `aka compare`.

The suite's one GELU end-to-end run. Four arms over one frozen baseline, K = 2: noop (the task's
own kernel, about 1.0x), replay of the hand-written solution (known to be much faster), of a
wrong solution (PARTIAL, incorrect, score 20) and of one that does not compile (FAIL, score 0).
The comparison must find the solutions arm faster than noop.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from aka.results.task_result import FailureKind, TaskStatus, read_task_result

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow


def _aka(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(REPO / "src"), os.environ.get("PYTHONPATH", "")]),
        "COLUMNS": "200",
    }
    return subprocess.run(
        [sys.executable, "-m", "aka.cli", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )


def _replay(solution_set: str) -> dict[str, object]:
    return {"template": "replay", "solutions_dir": str(REPO / "solutions" / solution_set)}


def test_noop_against_replayed_solutions_with_two_repeats(tmp_path: Path) -> None:
    config = {
        "arms": [
            {"label": "noop", "agent": {"template": "noop"}},
            {"label": "solutions", "agent": _replay("examples")},
            {"label": "wrong", "agent": _replay("wrong")},
            {"label": "broken", "agent": _replay("broken")},
        ],
        "repeats": 2,
        "schedule_seed": 1,
        "tasks": ["triton2triton/basic/gelu"],
        "target_gpu_model": "auto",
        "log_directory": "logs",
        "workspace_directory_prefix": "workspace",
    }
    (tmp_path / "ab.yaml").write_text(yaml.safe_dump(config))
    ran = _aka("run", "ab.yaml", "--run-suffix", "gelu", cwd=tmp_path)
    assert ran.returncode == 0, ran.stderr
    (run_dir,) = tmp_path.glob("workspace_*_arms-noop-solutions-wrong-broken/run_*")
    assert run_dir.name.endswith("_gelu")
    results = [read_task_result(p) for p in run_dir.glob("*/task_result.yaml")]
    assert sorted((r.arm, r.repeat) for r in results) == sorted(
        (arm, k) for arm in ("noop", "solutions", "wrong", "broken") for k in (1, 2)
    )
    assert len(list(run_dir.glob("baselines/*.json"))) == 1, "one frozen baseline, shared by the arms"
    for result in results:
        expected = {
            "noop": (TaskStatus.PASS, FailureKind.NONE),
            "solutions": (TaskStatus.PASS, FailureKind.NONE),
            "wrong": (TaskStatus.PARTIAL, FailureKind.INCORRECT),
            "broken": (TaskStatus.FAIL, FailureKind.COMPILE_ERROR),
        }[result.arm or ""]
        assert (result.status, result.failure_kind) == expected, result
        if result.arm == "solutions":
            assert result.score >= 120, result
        elif result.arm in ("wrong", "broken"):
            assert result.score == (20.0 if result.arm == "wrong" else 0.0), result

    compared = _aka("compare", str(run_dir), "--arms", "noop,solutions", "--format", "json", "--no-plots", cwd=tmp_path)
    assert compared.returncode == 0, compared.stderr
    data = json.loads(compared.stdout)
    noop, solutions = data["arms"]
    assert (noop["label"], solutions["label"]) == ("noop", "solutions")
    assert noop["correct_rate"] == solutions["correct_rate"] == 1.0 and noop["repeats"] == 2.0
    pair = data["pairs"][0]
    assert pair["speedup_ratio"] > 1.5, pair["verdict"]
    assert any("only 1 paired tasks" in w for w in pair["warnings"])
    assert (run_dir / "reports" / "compare" / "comparison.json").is_file()
