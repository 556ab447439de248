"""Which turn each part of a timed case runs in, and that the candidate's worker is stopped
before the judge asks for the device alone (it waits for its turn holding nothing, so anything
of the candidate still running would run inside another evaluation's turn alone)."""

from __future__ import annotations

from typing import Any
from unittest import mock

import pytest

from aka.evaluation.wire import ENV_PHASED_SET_UP
from aka.harness import perf
from aka.harness.cases import Case
from aka.harness.link import WorkerFailure
from aka.harness.phases import ALONE, SHARED
from aka.harness.task import StepContext


class _Candidate:
    def __init__(self, autotunes: bool, log: list[str]) -> None:
        self.autotunes = autotunes
        self.paused = True  # nothing of it runs until its code loads
        self.log = log
        self.ended = False

    def alive(self) -> bool:
        return not self.ended

    def pause(self) -> None:
        self.paused = True
        self.log.append("pause")

    def kill(self) -> None:
        self.paused, self.ended = True, True
        self.log.append("kill")


class _Memory:
    def __init__(self, side: _Candidate | None, log: list[str]) -> None:
        self.side, self.log, self.placements = side, log, None
        self.snapshots: list[Any] = []

    def close(self) -> None:
        self.log.append("free")
        if self.side is not None:
            self.side.paused = False  # unmapping asks the worker: it runs again


class _Phases:
    """The judge's side of a phased turn, recording each switch and the candidate's state then."""

    def __init__(self, candidate: _Candidate, log: list[str]) -> None:
        self.candidate, self.log, self.mode, self.active = candidate, log, SHARED, True

    def want(self, mode: str) -> None:
        if mode == self.mode:
            return
        if mode == ALONE:
            assert self.candidate.paused, "asked for the device alone with the candidate's worker running"
        self.mode = mode
        self.log.append(mode)


def _run(
    monkeypatch: pytest.MonkeyPatch,
    set_up_shared: bool,
    autotunes: bool,
    cases: int,
    one_turn: bool = False,
    results: list[Any] | None = None,
    first_pairs_end_it: bool = False,
) -> list[str]:
    """The timed step's cases (`perf._timed_cases`, or `perf._one_turn`) with every part that
    touches a worker replaced by a note in the returned log."""
    log: list[str] = []
    candidate = _Candidate(autotunes, log)
    baseline = _Candidate(False, [])
    phases = _Phases(candidate, log)
    monkeypatch.setenv(ENV_PHASED_SET_UP, "1" if set_up_shared else "0")
    monkeypatch.setattr(perf, "DRAIN_S", 0.0)

    def memory(side: Any, *_: Any, **__: Any) -> _Memory:
        log.append("set up")
        side.paused = False  # mapping an arena asks the worker
        return _Memory(side if side is candidate else None, log)

    def warm_up(memory: _Memory, *_: Any, candidate: bool) -> None:
        log.append("warm up")

    def take_pairs(*_: Any) -> Any:
        assert phases.mode == ALONE, "timed while the device was shared"
        log.append("pairs")
        if first_pairs_end_it:  # as `RemoteSide.stayed_paused` does: the worker killed, then the failure
            candidate.kill()
            raise WorkerFailure("tampering", "the candidate's process 7 ran for 80 us while it was paused")
        return mock.Mock()

    def calibrate(side: Any, task: Any, ctx: Any, timed: list[Case], config: Any) -> dict[str, Any]:
        assert phases.mode == ALONE and candidate.paused, "calibrated beside the candidate or shared"
        log.append("calibrate")
        return {case.id: mock.Mock(hold_ms=0.4) for case in timed}

    def load_candidate(side: _Candidate, *_: Any) -> None:
        assert phases.mode == SHARED, "the candidate's code loaded while the device was alone"
        log.append("load")
        side.paused = False

    monkeypatch.setattr(perf, "_memory", memory)
    monkeypatch.setattr(perf, "warm_up", warm_up)
    monkeypatch.setattr(perf, "take_pairs", take_pairs)
    monkeypatch.setattr(perf, "_calibrate", calibrate)
    monkeypatch.setattr(perf, "_load_candidate", load_candidate)
    monkeypatch.setattr(perf, "_judge_case", lambda *a: mock.Mock(case=a[0].case, message="judged", samples=1))
    ctx = StepContext.from_env("performance", {"AKA_DEVICE": "cpu", "AKA_TASK_FAMILY": "triton2triton"})
    order = perf._one_turn if one_turn else perf._timed_cases
    judged = order(None, ctx, baseline, candidate, [Case(f"c{i}") for i in range(cases)], perf.PairedConfig(), phases)  # type: ignore[arg-type]
    if results is not None:
        results.extend(judged)
    return log


def test_by_default_the_baseline_is_calibrated_before_the_candidate_loads_and_its_cases_timed_in_one_turn(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    log = _run(monkeypatch, set_up_shared=False, autotunes=False, cases=2)
    assert log[:5] == [ALONE, "calibrate", SHARED, "load", "pause"]  # stopped before it waits for the turn
    assert log[5] == ALONE and SHARED not in log[5:] and log.count("pairs") == 2


def test_with_phased_set_up_each_case_is_set_up_shared_and_timed_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    log = _run(monkeypatch, set_up_shared=True, autotunes=False, cases=2)
    case = ["set up", "set up", "warm up", "pause", ALONE, "pairs", SHARED, "free", "free"]
    assert log == [ALONE, "calibrate", SHARED, "load", *case, *case]


def test_an_autotuning_candidate_keeps_its_cases_in_one_turn_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    log = _run(monkeypatch, set_up_shared=True, autotunes=True, cases=2)
    assert log[3:7] == ["load", "pause", ALONE, "set up"] and SHARED not in log[4:]


@pytest.mark.parametrize("set_up_shared", [False, True])
def test_in_one_turn_the_pairs_come_first_then_the_candidate_ends_then_the_calibration(
    monkeypatch: pytest.MonkeyPatch, set_up_shared: bool
) -> None:
    """`AKA_ONE_TURN=1`: loaded while shared, then the device alone once (`AKA_PHASED_SET_UP`
    does not split it): every case's pairs, the candidate's worker killed, the calibration."""
    log = _run(monkeypatch, set_up_shared=set_up_shared, autotunes=False, cases=2, one_turn=True)
    assert log[:3] == ["load", "pause", ALONE] and SHARED not in log
    assert log.count(ALONE) == 1 and log.count("pairs") == 2
    assert log[-2:] == ["kill", "calibrate"] and log.index("kill") > max(i for i, e in enumerate(log) if e == "pairs")


@pytest.mark.parametrize("one_turn", [False, True])
def test_a_case_that_ends_the_candidates_worker_is_the_last_one_timed(
    monkeypatch: pytest.MonkeyPatch, one_turn: bool
) -> None:
    """Its failure is the step's verdict (here `tampering`), not a `crash` in setting up the next
    case on a worker that is gone."""
    results: list[Any] = []
    log = _run(monkeypatch, False, False, cases=3, one_turn=one_turn, results=results, first_pairs_end_it=True)
    assert log.count("pairs") == 1 and log.count("set up") == 2, log  # the first case's two sides only
    assert [r.kind for r in results] == ["tampering"] and "while it was paused" in results[0].message
