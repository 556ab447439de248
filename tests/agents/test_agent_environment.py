"""An agent's shell gets the evaluator's environment: a real task's own step command, run there by
hand, works (and says when it fails) with the platform's virtual environment not activated."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from aka.agents.agent_environment import agent_environment
from aka.config.tasks import select_tasks
from aka.device import detect_device
from aka.evaluation.wire import ENV_BASELINE_DIR, ENV_DEVICE, ENV_STEP
from aka.run.task_pipeline import copy_for_agent

REPO = Path(__file__).resolve().parents[2]


def test_a_real_tasks_correctness_command_runs_in_the_agents_shell(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    venv_bin = Path(sys.executable).parent.resolve()
    monkeypatch.setenv(
        "PATH", os.pathsep.join(d for d in os.environ["PATH"].split(os.pathsep) if d and Path(d).resolve() != venv_bin)
    )
    monkeypatch.delenv("VIRTUAL_ENV", raising=False)
    monkeypatch.setenv("AKA_STALE_SETTING", "x")
    monkeypatch.setenv("AKA_TEST_KEY", "k")
    task = select_tasks(REPO / "tasks", ["triton2triton/basic/gelu"])[0]
    work = tmp_path / "work"
    copy_for_agent(task, work)
    device = detect_device()
    env = agent_environment(task, device, work, keep=["AKA_TEST_KEY"])
    assert env["PATH"].split(os.pathsep)[0] == str(Path(sys.executable).parent)
    assert (env[ENV_DEVICE], env[ENV_BASELINE_DIR], env.get("TRITON_INTERPRET")) == (
        device.kind,
        str(work / ".aka_baseline"),
        None if device.is_gpu else "1",
    )
    assert ENV_STEP not in env and "AKA_STALE_SETTING" not in env and env["AKA_TEST_KEY"] == "k"

    def correctness() -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["/bin/bash", "-c", "python3 harness.py correctness"],
            cwd=work,
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )

    passed = correctness()
    assert passed.returncode == 0, passed.stderr[-3000:]
    assert passed.stderr.strip().splitlines()[-1].startswith("correctness: PASS"), passed.stderr[-1000:]
    kernel = work / "kernel.py"
    kernel.write_text(kernel.read_text().replace("y = 0.5 * x", "y = 0.6 * x"))
    failed = correctness()
    assert failed.returncode == 1, failed.stderr[-3000:]
    assert failed.stderr.strip().splitlines()[-1].startswith("correctness: FAIL (incorrect)")


def test_an_agent_gets_nothing_that_addresses_the_machines_cluster(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A red team's agent reached the run's Ray cluster and ran code outside its guard as root."""
    for name in ("RAY_ADDRESS", "RAY_AUTH_TOKEN", "SLURM_JOB_ID", "MUNGE_SOCKET"):
        monkeypatch.setenv(name, "x")
    monkeypatch.setenv("MY_MODEL_KEY", "k")
    task = select_tasks(REPO / "tasks", ["triton2triton/basic/gelu"])[0]
    env = agent_environment(task, detect_device(), tmp_path, keep=["MY_MODEL_KEY"])
    assert not [name for name in env if name.startswith(("RAY_", "SLURM_", "MUNGE_"))]
    assert env["MY_MODEL_KEY"] == "k"
