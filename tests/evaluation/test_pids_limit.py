"""A step's ceiling on processes: a candidate that forks without end stops at its step's pids
group, not at the machine's `pid_max` (where every other evaluation and the trainer beside it
could start nothing until its step timed out)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from exploits.catalog import HONEST
from exploits.gelu_task import copy_gelu_task

from aka.device import DeviceInfo
from aka.evaluation import pids_limit
from aka.evaluation.sandbox import detect_sandbox
from aka.evaluation.steps import evaluate_candidate
from aka.results.task_result import FailureKind

CPU = DeviceInfo("cpu", "cpu", "cpu", None, 0)
needs_groups = pytest.mark.skipif(
    pids_limit.groups_folder() is None, reason="no pids cgroup can be made on this machine"
)

BOMB = """
import os as _os, sys as _sys, time as _time


def _bomb():
    forked = 0
    while forked < 1000:
        try:
            pid = _os.fork()
        except OSError as exc:
            return forked, exc
        if pid == 0:
            _time.sleep(60)
            _os._exit(0)
        forked += 1
    return forked, None


_forked, _why = _bomb()
print(f"aka-exploit: forked {_forked}, then {_why}", file=_sys.stderr, flush=True)


def gelu(x):
    return honest(x)
"""


def _left_groups() -> list[Path]:
    folder = pids_limit.groups_folder()
    assert folder is not None
    return [p for p in folder.iterdir() if p.name.startswith(f"aka-step-{os.getpid()}-")]


@needs_groups
def test_a_group_holds_its_processes_to_its_ceiling() -> None:
    group = pids_limit.new_group(8)
    assert group is not None and (group / "pids.max").read_text().strip() == "8"
    forks = (
        "import os, time\nn = 0\n"
        "try:\n    while n < 50:\n        pid = os.fork()\n        if pid == 0:\n            time.sleep(5)\n"
        "            os._exit(0)\n        n += 1\nexcept OSError:\n    pass\nprint(n)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", forks],
        preexec_fn=lambda: pids_limit.join_group(str(group)),
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert 0 < int(done.stdout) < 8, "the eighth task is refused (the python itself is one)"
    pids_limit.remove_group(group)  # kills what still sleeps in it
    assert not group.exists()


@needs_groups
def test_a_fork_bomb_stops_at_its_steps_ceiling_and_is_the_candidates_crash(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert pids_limit.PIDS_FEATURE in detect_sandbox().features
    monkeypatch.setattr(pids_limit, "STEP_TASKS_MAX", 64)  # 2048 sleeping forks of a torch process: too heavy here
    task = copy_gelu_task(tmp_path / "tasks")
    candidate = tmp_path / "candidate"
    shutil.copytree(task.directory, candidate)
    (candidate / "kernel.py").write_text(HONEST + BOMB)
    outcomes = evaluate_candidate(task, candidate, tmp_path / "scratch", CPU)
    log = (tmp_path / "scratch" / "evaluation.log").read_text()
    forked = [line for line in log.splitlines() if "aka-exploit: forked" in line]
    assert forked and all(int(line.split("forked ")[1].split(",")[0]) < 64 for line in forked), forked
    assert all("Resource temporarily unavailable" in line for line in forked)
    failed = next(o for o in outcomes if not o.passed)
    assert failed.failure is FailureKind.CRASH, f"{failed.failure}: {failed.message}"
    assert pids_limit.PIDS_FEATURE in outcomes[0].isolation
    assert _left_groups() == [], "every step's group is removed"


@needs_groups
def test_an_honest_candidate_passes_under_the_ceiling(tmp_path: Path) -> None:
    task = copy_gelu_task(tmp_path / "tasks")
    candidate = tmp_path / "candidate"
    shutil.copytree(task.directory, candidate)
    (candidate / "kernel.py").write_text(HONEST + "\n\ndef gelu(x):\n    return honest(x)\n")
    outcomes = evaluate_candidate(task, candidate, tmp_path / "scratch", CPU)
    assert all(o.passed for o in outcomes), [(o.step, o.failure, o.message) for o in outcomes]
    assert _left_groups() == []
