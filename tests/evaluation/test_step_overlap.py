"""The compile and correctness steps of an aka.harness task run side by side (one shared turn on
the device), on the real GELU task: shown without any clock, by candidates whose module waits at
import for the other step's worker to arrive. The verdicts stay the ordered ones."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import pytest
from conftest import processes_under
from exploits.catalog import HONEST
from exploits.gelu_task import copy_gelu_task

from aka.device import DeviceInfo
from aka.evaluation.sandbox import detect_sandbox
from aka.evaluation.step_spec import Step, Target
from aka.evaluation.steps import _together, evaluate_candidate
from aka.results.task_result import FailureKind

CPU = DeviceInfo("cpu", "cpu", "cpu", None, 0)
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not detect_sandbox().prefix, reason="steps start early only in the PID-namespace sandbox"),
]

# Every candidate worker of an evaluation may write the evaluation's shared build cache (its
# TRITON_CACHE_DIR): each import leaves its arrival time there and waits (at most 20 s) for a
# second arrival; they met when two arrived within 10 s of each other. Run one after the other,
# the compile step's worker waits out the 20 s alone, and the correctness step's arrives later.
RENDEZVOUS = """
_aka_here = os.environ["TRITON_CACHE_DIR"]
open(os.path.join(_aka_here, f"arrived-{time.time_ns()}"), "w").close()


def _aka_arrivals():
    return sorted(int(n.split("-")[1]) for n in os.listdir(_aka_here) if n.startswith("arrived-"))


_aka_until = time.monotonic() + 20
while len(_aka_arrivals()) < 2 and time.monotonic() < _aka_until:
    time.sleep(0.05)
MET = len(_aka_arrivals()) >= 2 and _aka_arrivals()[1] - _aka_arrivals()[0] < 10 * 10**9
"""


@pytest.fixture(scope="module")
def gelu_task(tmp_path_factory: pytest.TempPathFactory):
    return copy_gelu_task(tmp_path_factory.mktemp("tasks"))


def _evaluate(task, tmp_path: Path, source: str):
    candidate = tmp_path / "candidate"
    shutil.copytree(task.directory, candidate)
    (candidate / "kernel.py").write_text(source)
    return evaluate_candidate(task, candidate, tmp_path / "scratch", CPU, through=2)


def test_compile_and_correctness_workers_are_loaded_at_the_same_time(gelu_task, tmp_path: Path) -> None:
    """Run one after the other, the compile step's worker would wait alone and return garbage."""
    source = HONEST + RENDEZVOUS + "\n\ndef gelu(x):\n    return honest(x) if MET else x * 0\n"
    outcomes = _evaluate(gelu_task, tmp_path, source)
    assert [(o.step, o.failure) for o in outcomes] == [
        (Step.COMPILE, FailureKind.NONE),
        (Step.CORRECTNESS, FailureKind.NONE),
    ], [o.message for o in outcomes]


def test_a_compile_failure_is_the_verdict_and_stops_the_correctness_step(gelu_task, tmp_path: Path) -> None:
    """A candidate that fails to load in the compile step (its worker's folder lies under the
    step's temporary folder) and hangs in the correctness step: only the compile step's outcome
    counts, and the correctness step, started beside it, is stopped at once instead of running out
    its 60 s limit."""
    source = HONEST + (
        "\nif 'tmp-compile-' in os.getcwd():\n    raise RuntimeError('broken on purpose')\ntime.sleep(3600)\n"
        "\n\ndef gelu(x):\n    return honest(x)\n"
    )
    started = time.monotonic()
    outcomes = _evaluate(gelu_task, tmp_path, source)
    assert [(o.step, o.failure) for o in outcomes] == [(Step.COMPILE, FailureKind.COMPILE_ERROR)], [
        o.message for o in outcomes
    ]
    assert "broken on purpose" in (outcomes[0].message or "")
    assert time.monotonic() - started < 30, "the evaluation waited for the correctness step it did not need"
    assert processes_under(tmp_path) == []
    log = (tmp_path / "scratch" / "evaluation.log").read_text()
    assert "harness.py compile" in log and "harness.py correctness" in log


def test_which_steps_run_side_by_side() -> None:
    """Only a compile step followed by the same target's correctness step, one prestarted command
    each, and never on held-out cases (read from the folder by the correctness step)."""
    from types import SimpleNamespace
    from typing import Any, cast

    one = {Step.COMPILE: [object()], Step.CORRECTNESS: [object()], Step.PERFORMANCE: [object()]}
    prestarted: Any = SimpleNamespace(processes=one)
    own: Any = SimpleNamespace(extra_env={})
    held_out: Any = SimpleNamespace(extra_env={"AKA_CASE_PROFILE": "heldout_ci"})
    steps = [
        (Step.COMPILE, Target.CANDIDATE),
        (Step.CORRECTNESS, Target.CANDIDATE),
        (Step.PERFORMANCE, Target.CANDIDATE),
    ]
    assert _together(own, steps, 0, prestarted)
    assert not _together(own, steps, 1, prestarted)  # correctness then performance: in order
    assert not _together(held_out, steps, 0, prestarted)
    assert not _together(own, steps, 0, None)  # not started early: each in its own turn
    assert not _together(own, [(Step.COMPILE, Target.CANDIDATE), (Step.CORRECTNESS, Target.BASELINE)], 0, prestarted)
    two = cast(Any, SimpleNamespace(processes={**one, Step.CORRECTNESS: [object(), object()]}))
    assert not _together(own, steps, 0, two)


def test_an_infrastructure_error_side_by_side_is_judged_again_in_order(
    gelu_task, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Memory the other step's candidate took while a judge measured what was free would read as
    the machine's shortfall (`infra_error`): side by side, such a verdict is not kept; both steps
    run again one after the other and their verdicts count. Here the first correctness verdict
    is made an infra_error on purpose."""
    import aka.evaluation.steps as steps_module

    real_record = steps_module._record
    made: list[Step] = []

    def record(setup, outcome, target, index, process, finished, left) -> bool:
        kept = real_record(setup, outcome, target, index, process, finished, left)
        made.append(outcome.step)
        if outcome.step is Step.CORRECTNESS and made.count(Step.CORRECTNESS) == 1:
            outcome.failure, outcome.message = FailureKind.INFRA_ERROR, "made an infra_error by the test"
            return False
        return kept

    monkeypatch.setattr(steps_module, "_record", record)
    outcomes = _evaluate(gelu_task, tmp_path, HONEST + "\n\ndef gelu(x):\n    return honest(x)\n")
    assert [(o.step, o.failure) for o in outcomes] == [
        (Step.COMPILE, FailureKind.NONE),
        (Step.CORRECTNESS, FailureKind.NONE),
    ], [o.message for o in outcomes]
    assert made == [Step.COMPILE, Step.CORRECTNESS, Step.COMPILE, Step.CORRECTNESS]
    log = (tmp_path / "scratch" / "evaluation.log").read_text()
    assert "judged again in order" in log and log.count("harness.py correctness") == 2
    assert processes_under(tmp_path) == []
