"""Candidates that break their own process, judged by the real evaluator on the real GELU task:
each ends in a named failure kind within its step's limits, and no process of the evaluation
outlives it (the process table is checked)."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import pytest
from conftest import processes_under
from exploits.catalog import HONEST
from exploits.gelu_task import copy_gelu_task

from aka.device import DeviceInfo
from aka.evaluation.steps import evaluate_candidate
from aka.results.task_result import FailureKind

CPU = DeviceInfo("cpu", "cpu", "cpu", None, 0)
pytestmark = pytest.mark.slow

FAULTS = {
    # the worker dies of SIGSEGV in the middle of a call
    "segfaults": (
        """
import ctypes


def gelu(x):
    ctypes.string_at(0)
""",
        {FailureKind.CRASH},
        "signal 11",
    ),
    # more memory than the step may have (its address-space limit): the allocation fails in the call
    "allocates_30_gb": (
        """
def gelu(x):
    hoard = torch.ones(30 * 2**30, dtype=torch.uint8)
    return honest(x) + hoard[0]
""",
        {FailureKind.INCORRECT, FailureKind.CRASH},
        None,
    ),
    # leaves the worker at import: its judge sees the link close
    "exits_at_import": (
        """
os._exit(0)


def gelu(x):
    return honest(x)
""",
        {FailureKind.CRASH, FailureKind.COMPILE_ERROR},
        None,
    ),
    # prints 2 GB in its call: its worker may write 256 MiB to a file (its output too: Python then
    # raises in the call, which fails the case), its step 64 MiB
    "floods_its_output": (
        """
import sys


def gelu(x):
    line = "x" * 2**20 + "\\n"
    for _ in range(2048):
        sys.stdout.write(line)
    return honest(x)
""",
        {FailureKind.INCORRECT, FailureKind.CRASH},
        "File too large",
    ),
    # an error message that is not text (a lone surrogate, written as an escape): the judge takes
    # it as U+FFFD; kept, it made the reward API fail to serialize the verdict (red team, session 50)
    "raises_a_lone_surrogate": (
        """
def gelu(x):
    raise RuntimeError("not text: \\udcff")
""",
        {FailureKind.INCORRECT},
        "not text: \ufffd",
    ),
    # a thousand threads that never end: the verdict is its kernel's, and nothing is left behind
    "starts_1000_threads": (
        """
import threading
for _ in range(1000):
    threading.Thread(target=time.sleep, args=(3600,), daemon=True).start()


def gelu(x):
    return honest(x)
""",
        {FailureKind.NONE},
        None,
    ),
}


@pytest.fixture(scope="module")
def gelu_task(tmp_path_factory: pytest.TempPathFactory):
    return copy_gelu_task(tmp_path_factory.mktemp("tasks"))


@pytest.mark.parametrize("name", sorted(FAULTS))
def test_a_candidate_that_breaks_its_own_process_gets_a_named_kind_and_leaves_nothing(
    gelu_task, tmp_path: Path, name: str
) -> None:
    body, kinds, says = FAULTS[name]
    candidate = tmp_path / "candidate"
    shutil.copytree(gelu_task.directory, candidate)
    (candidate / "kernel.py").write_text(HONEST + body)
    outcomes = evaluate_candidate(gelu_task, candidate, tmp_path / "scratch", CPU, through=2)
    failed = next((o for o in outcomes if not o.passed), None)
    kind = failed.failure if failed else FailureKind.NONE
    assert kind in kinds, f"{name}: {kind.value}: {failed.message if failed else ''}"
    if says is not None and failed is not None:
        assert says in (failed.message or "") + (tmp_path / "scratch" / "evaluation.log").read_text(), failed.message
    logs = sum(p.stat().st_size for p in (tmp_path / "scratch").rglob("*.log"))
    assert logs < 600 * 2**20, f"{logs / 2**20:.0f} MiB of logs: a step's output is capped"
    deadline = time.monotonic() + 10
    while processes_under(tmp_path) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert processes_under(tmp_path) == [], "a process of the evaluation outlived it"


def test_a_held_out_result_keeps_no_text_of_the_candidates(gelu_task, tmp_path: Path) -> None:
    """A candidate that raised on every shape it did not know, naming the shape and its first
    values, had its message kept in the held-out result, where a policy reads it (red team,
    session 50): the result says which step failed and how, the evaluation's log the rest."""
    from aka.run.task_pipeline import evaluate_heldout

    candidate = tmp_path / "candidate"
    shutil.copytree(gelu_task.directory, candidate)
    leak = 'def gelu(x):\n    raise RuntimeError(f"HELDOUT-LEAK n={x.numel()} first={x.flatten()[:3].tolist()}")\n'
    (candidate / "kernel.py").write_text(HONEST + leak)
    held = evaluate_heldout(gelu_task, candidate, tmp_path / "scratch", CPU, speedup=None)
    assert not held.candidate_correct and held.message == "correctness: incorrect on the held-out cases", held
    assert "HELDOUT-LEAK" in "".join(p.read_text() for p in (tmp_path / "scratch").rglob("*.log"))
