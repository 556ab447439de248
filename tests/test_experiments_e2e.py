"""End-to-end: a real two-arm experiment through the `aka` CLI on a real starter task (CPU), then `aka compare`.

noop (the task's own kernel, about 1.0x) against replay of the hand-written gelu solution, K = 2:
the difference is known to be large, so the comparison must find the solutions arm faster.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.slow


def _aka(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "src"), os.environ.get("PYTHONPATH", "")]),
           "COLUMNS": "200"}
    return subprocess.run([sys.executable, "-m", "aka.cli", *args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=900, check=False)


def test_noop_against_replayed_solutions_with_two_repeats(tmp_path: Path) -> None:
    config = {
        "arms": [{"label": "noop", "agent": {"template": "noop"}},
                 {"label": "solutions", "agent": {"template": "replay",
                                                  "solutions_dir": str(REPO / "solutions" / "examples")}}],
        "repeats": 2, "schedule_seed": 1, "tasks": ["triton2triton/basic/gelu"], "target_gpu_model": "auto",
        "log_directory": "logs", "workspace_directory_prefix": "workspace",
    }
    (tmp_path / "ab.yaml").write_text(yaml.safe_dump(config))
    ran = _aka("run", "ab.yaml", cwd=tmp_path)
    assert ran.returncode == 0, ran.stderr
    (run_dir,) = tmp_path.glob("workspace_*_arms-noop-solutions/run_*")
    assert len(list(run_dir.glob("*/task_result.yaml"))) == 4

    compared = _aka("compare", str(run_dir), "--format", "json", "--no-plots", cwd=tmp_path)
    assert compared.returncode == 0, compared.stderr
    data = json.loads(compared.stdout)
    noop, solutions = data["arms"]
    assert (noop["label"], solutions["label"]) == ("noop", "solutions")
    assert noop["correct_rate"] == solutions["correct_rate"] == 1.0 and noop["repeats"] == 2.0
    pair = data["pairs"][0]
    assert pair["speedup_ratio"] > 1.5, pair["verdict"]
    assert any("only 1 paired tasks" in w for w in pair["warnings"])
    assert (run_dir / "reports" / "compare" / "comparison.json").is_file()
