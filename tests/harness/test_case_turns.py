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
from aka.harness.phases import ALONE, SHARED
from aka.harness.task import StepContext


class _Candidate:
    def __init__(self, autotunes: bool) -> None:
        self.autotunes = autotunes
        self.paused = False
        self.log: list[str]

    def pause(self) -> None:
        self.paused = True
        self.log.append("pause")


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


def _run(monkeypatch: pytest.MonkeyPatch, set_up_shared: bool, autotunes: bool, cases: int) -> list[str]:
    log: list[str] = []
    candidate = _Candidate(autotunes)
    candidate.log = log
    baseline = _Candidate(False)
    baseline.log = []
    phases = _Phases(candidate, log)
    monkeypatch.setenv(ENV_PHASED_SET_UP, "1" if set_up_shared else "0")
    monkeypatch.setattr(perf, "DRAIN_S", 0.0)

    def memory(side: Any, *_: Any, **__: Any) -> _Memory:
        log.append("set up")
        side.paused = False  # mapping an arena asks the worker
        return _Memory(side if side is candidate else None, log)

    def warm_up(memory: _Memory, *_: Any, candidate: bool) -> None:
        log.append("warm up")

    def time_paired(*_: Any) -> Any:
        assert phases.mode == ALONE, "timed while the device was shared"
        log.append("pairs")
        return mock.Mock(candidate_ms=1.0)

    monkeypatch.setattr(perf, "_memory", memory)
    monkeypatch.setattr(perf, "warm_up", warm_up)
    monkeypatch.setattr(perf, "time_paired", time_paired)
    monkeypatch.setattr(perf, "CaseResult", lambda *a, **k: None)
    ctx = StepContext.from_env("performance", {"AKA_DEVICE": "cpu", "AKA_TASK_FAMILY": "triton2triton"})
    for index in range(cases):
        perf._time_case(None, ctx, baseline, candidate, Case(f"c{index}"), None, perf.PairedConfig(), phases)  # type: ignore[arg-type]
    return log


def test_by_default_every_case_is_set_up_and_timed_in_one_turn_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    log = _run(monkeypatch, set_up_shared=False, autotunes=False, cases=2)
    assert log[:2] == ["pause", ALONE]  # stopped before it waits for the turn
    assert SHARED not in log and log.count("pairs") == 2


def test_with_phased_set_up_each_case_is_set_up_shared_and_timed_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    log = _run(monkeypatch, set_up_shared=True, autotunes=False, cases=2)
    case = ["set up", "set up", "warm up", "pause", ALONE, "pairs", SHARED, "free", "free"]
    assert log == case + case


def test_an_autotuning_candidate_keeps_its_cases_in_one_turn_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    log = _run(monkeypatch, set_up_shared=True, autotunes=True, cases=2)
    assert log[:3] == ["pause", ALONE, "set up"] and SHARED not in log
