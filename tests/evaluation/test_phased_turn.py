"""The timed step's turn in phases (aka.evaluation.phased_turn, aka.harness.phases): the device
held shared while the judge sets up and alone only while it times, against other holders in real
processes (the lock of a GPU, faked by its key), and end to end through a real performance step
on the CPU."""

from __future__ import annotations

import os
import shutil
import socket
import sys
import threading
import time
from pathlib import Path

import pytest
from exploits.catalog import HONEST
from exploits.gelu_task import copy_gelu_task
from test_device_lock import HOLDER, _holder, _intervals, _overlap, _wait_for

from aka.device import DeviceInfo
from aka.evaluation import device_lock
from aka.evaluation.device_lock import ENV_LOCK_DIR, device_key
from aka.evaluation.phased_turn import ENV_PHASED_TURN, PhasedTurn, phased_turn, phased_turns
from aka.evaluation.step_spec import Step
from aka.evaluation.steps import evaluate_candidate
from aka.evaluation.warm_parent import ENV_WARM_STEPS
from aka.evaluation.wire import ENV_ONE_TURN, ENV_PHASED_SET_UP
from aka.harness.phases import ALONE, SHARED, Phases
from aka.harness.task import HarnessError
from aka.results.task_result import FailureKind

H200 = DeviceInfo("cuda", "H200", "NVIDIA H200", "sm_90", 1, uuid="GPU-1234/abcd")
CPU = DeviceInfo("cpu", "cpu", "cpu", None, 0)


@pytest.fixture
def locks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv(ENV_LOCK_DIR, str(tmp_path))
    monkeypatch.delenv(device_lock.ENV_YIELD_AFTER, raising=False)
    monkeypatch.setattr(sys.modules["test_device_lock"], "HOLDER", HOLDER.replace('"dev"', f'"{device_key(H200)}"'))
    return tmp_path


def _pair() -> tuple[socket.socket, Phases]:
    ours, theirs = socket.socketpair()
    return ours, Phases(theirs)


def _stamp(tmp_path: Path, text: str) -> None:
    with (tmp_path / "log").open("a") as log:
        log.write(f"{text} {time.monotonic():.3f}\n")


def test_the_judge_shares_the_device_while_it_sets_up_and_has_it_alone_while_it_times(locks: Path) -> None:
    """Another evaluation's shared step runs beside the set-up; it waits while the judge times; a
    timed step of another evaluation runs between two phases, never inside the judge's alone one."""
    ours, phases = _pair()
    with phased_turn(H200, ours) as turn:
        beside = _holder(locks, "s", "s1", 0.5)  # another evaluation checks a candidate meanwhile
        _wait_for(locks, "s1 out")
        phases.want(ALONE)
        _stamp(locks, "alone in")
        blocked = _holder(locks, "s", "s2", 0.1)  # arrives while the judge times: waits for it
        time.sleep(0.8)
        _stamp(locks, "alone out")
        phases.want(SHARED)
        _wait_for(locks, "s2 out")
        other_timed = _holder(locks, "x", "x1", 0.3)
        time.sleep(0.2)
        phases.want(ALONE)  # waits for the other evaluation's timed step
        _stamp(locks, "alone2 in")
        time.sleep(0.1)
        _stamp(locks, "alone2 out")
        assert turn.phases == 4 and turn.alone() >= 0.8
        assert turn.paused_s() >= 0.05  # the waits between phases extend the step's limits
    after = _holder(locks, "x", "x2", 0.01)  # the turn ended alone: its lock is let go with it
    for process in (beside, blocked, other_timed, after):
        assert process.wait(timeout=20) == 0
    spans = _intervals(locks)
    for holder in ("s2", "x1"):
        assert not _overlap(spans[holder], spans["alone"]) and not _overlap(spans[holder], spans["alone2"])
    assert spans["s2"][0] >= spans["alone"][1] - 0.05 and spans["x1"][1] <= spans["alone2"][0] + 0.05
    assert turn.phase_waits_s >= 0.05
    # each turn alone on the wall clock (TIMELINE_NOTE): when it was asked for, the wait, the hold
    (asked, waited, held), (asked2, waited2, held2) = turn.turns_alone
    assert held >= 0.8 and 0.1 <= held2 < 0.5 and waited2 >= 0.05
    assert asked + waited + held <= asked2 + 0.01 and asked2 + waited2 + held2 <= time.time()
    assert turn.timeline() == " ".join(f"{a:.3f}+{w:.3f}+{h:.3f}" for a, w, h in turn.turns_alone)


def test_the_device_is_free_once_the_turn_ends_and_a_turn_ended_while_waiting_stops_waiting(locks: Path) -> None:
    ours, phases = _pair()
    other = _holder(locks, "s", "s1", 5.0)
    _wait_for(locks, "s1 in")
    turn = PhasedTurn(H200, ours)
    answers: list[str] = []

    def ask() -> None:
        try:
            phases.want(ALONE)
            answers.append("granted")
        except HarnessError as exc:
            answers.append(str(exc))

    asking = threading.Thread(target=ask, daemon=True)
    asking.start()
    time.sleep(0.3)
    started = time.monotonic()
    turn.close()  # its step was killed (a request's hard end): it must not wait out s1
    assert time.monotonic() - started < 2.0
    asking.join(timeout=5)
    assert answers and "did not give the device alone" in answers[0]
    other.wait(timeout=20)
    timed = _holder(locks, "x", "x1", 0.01)
    assert timed.wait(timeout=10) == 0


def test_anything_but_a_request_ends_the_phases(locks: Path) -> None:
    ours, theirs = socket.socketpair()
    with phased_turn(CPU, ours):
        theirs.sendall(b"everything, forever\n")
        with pytest.raises(HarnessError, match="did not give the device alone"):
            Phases(theirs).want(ALONE)


def test_on_the_cpu_every_request_is_granted_at_once(locks: Path) -> None:
    ours, phases = _pair()
    with phased_turn(CPU, ours) as turn:
        phases.want(ALONE)
        phases.want(SHARED)
        phases.want(ALONE)
        assert turn.phases == 4 and turn.paused_s() < 0.5
    assert not list(locks.glob("*.lock"))


def test_without_an_evaluator_the_judge_holds_what_it_was_given(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AKA_TURN_FD", raising=False)
    phases = Phases.claim()
    assert phases.sock is None
    phases.want(SHARED)
    phases.want(ALONE)  # nothing to ask: a step run by hand, or an evaluator without phases


def test_a_socket_the_judge_cannot_use_fails_the_step_before_anything_is_timed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The evaluator holds the device shared until asked: timing without asking would share it."""
    for bad in ("987", "soon"):  # a descriptor that is not open; not a number
        monkeypatch.setenv("AKA_TURN_FD", bad)
        phases = Phases.claim()
        assert "AKA_TURN_FD" not in os.environ and not phases.active
        with pytest.raises(HarnessError, match="turn socket cannot be used"):
            phases.want(ALONE)


@pytest.fixture(scope="module")
def gelu_task(tmp_path_factory: pytest.TempPathFactory):
    return copy_gelu_task(tmp_path_factory.mktemp("tasks"))


def _performance(task, tmp_path: Path, source: str, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv(ENV_PHASED_TURN, "1")
    candidate = tmp_path / "candidate"
    shutil.copytree(task.directory, candidate)
    (candidate / "kernel.py").write_text(source)
    outcomes = evaluate_candidate(task, candidate, tmp_path / "scratch", CPU)
    return outcomes[-1], (tmp_path / "scratch" / "evaluation.log").read_text()


@pytest.mark.slow
# the step forked from the warm parent (its descriptors passed over a socket), or exec'd; each
# case set up in the turn alone, or while the device is shared (AKA_PHASED_SET_UP=1)
@pytest.mark.parametrize(("warm", "set_up_shared"), [("1", False), ("0", False), ("1", True)])
def test_a_performance_step_in_phases_times_an_honest_candidate(
    gelu_task, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, warm: str, set_up_shared: bool
) -> None:
    monkeypatch.setenv(ENV_WARM_STEPS, warm)
    monkeypatch.setenv(ENV_PHASED_SET_UP, "1" if set_up_shared else "0")
    source = HONEST + "\n\ndef gelu(x):\n    return honest(x)\n"
    outcome, log = _performance(gelu_task, tmp_path, source, monkeypatch)
    assert outcome.failure is FailureKind.NONE and outcome.cases and all(c.speedup for c in outcome.cases), log[-3000:]
    assert "baseline's first calls made" in log and "candidate's first calls made" in log
    assert "performance held the device alone" in log
    if not set_up_shared:
        # shared for the baseline's first calls, alone to calibrate, shared for the candidate's, alone to time
        assert log.count("the device came alone") == 2 and log.count("the device came shared") == 1, log[-3000:]
        assert "in 4 phase(s)" in log
        return
    # then each case: set up shared, timed alone, its memory freed shared again
    cases = len(outcome.cases)
    assert log.count("the device came alone") == 1 + cases, log[-3000:]
    assert log.count("the device came shared") == 1 + cases, log[-3000:]
    assert f"in {3 + 2 * cases} phase(s)" in log, log[-3000:]
    lines = log.splitlines()
    for case in outcome.cases:  # set up before its turn alone, its pairs inside it
        set_up = next(i for i, line in enumerate(lines) if f"{case.id}: set up in" in line)
        timed = next(i for i, line in enumerate(lines) if f"{case.id}: " in line and " pairs)" in line)
        came = [i for i, line in enumerate(lines) if "the device came alone" in line]
        assert any(set_up < i < timed for i in came), log[-3000:]


@pytest.mark.slow
def test_one_turn_alone_times_first_then_ends_the_candidate_then_calibrates(
    gelu_task, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`AKA_ONE_TURN=1`: both sides set up while the device is shared, then one turn alone: the
    pairs, the candidate's worker ended, the baseline calibrated, the pairs judged."""
    monkeypatch.setenv(ENV_ONE_TURN, "1")
    source = HONEST + "\n\ndef gelu(x):\n    return honest(x)\n"
    outcome, log = _performance(gelu_task, tmp_path, source, monkeypatch)
    assert outcome.failure is FailureKind.NONE and outcome.cases and all(c.speedup for c in outcome.cases), log[-3000:]
    assert log.count("the device came alone") == 1 and "the device came shared" not in log, log[-3000:]
    assert "in 2 phase(s)" in log, log[-3000:]
    lines = log.splitlines()

    def first(text: str) -> int:
        return next(i for i, line in enumerate(lines) if text in line)

    last_pairs = max(i for i, line in enumerate(lines) if " pairs)" in line and "set up in" not in line)
    assert first("candidate's first calls made") < first("the device came alone") < first(" set up in")
    assert first(" set up in") < first("the candidate's worker ended before the calibration")
    assert first("the candidate's worker ended before the calibration") < first("baseline calibrated on")
    assert first("baseline calibrated on") < last_pairs  # the cases' verdicts come after it


@pytest.mark.slow
def test_a_candidate_wrong_only_when_timed_fails_with_phases(
    gelu_task, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its first calls in the shared phase are wrong too: they are not checked there, the checked
    warm-up in the turn alone finds them."""
    source = HONEST + (
        "\nTIMED = 'tmp-performance-' in os.getcwd()\n"
        "\n\ndef gelu(x):\n    out = honest(x)\n    return x if TIMED else out\n"
    )
    outcome, log = _performance(gelu_task, tmp_path, source, monkeypatch)
    assert outcome.step is Step.PERFORMANCE and outcome.failure is FailureKind.INCORRECT, (
        outcome.failure,
        outcome.message,
        log[-3000:],
    )
    assert "candidate's first calls made" in log  # made, unchecked, in the shared phase


@pytest.mark.parametrize(
    ("value", "on_gpu", "phased"),
    [("", True, True), ("0", True, False), ("1", True, True), ("", False, False), ("1", False, True)],
)
def test_phased_turns_are_the_default_on_a_gpu(monkeypatch, value: str, on_gpu: bool, phased: bool) -> None:
    """On by default where a lock is held (a GPU), switched off with 0; on the CPU only on request."""
    monkeypatch.setenv(ENV_PHASED_TURN, value)
    assert phased_turns(on_gpu) is phased


@pytest.mark.slow
@pytest.mark.parametrize("baseline_too", [False, True])
def test_an_autotuned_candidate_makes_its_first_calls_alone(
    gelu_task, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, baseline_too: bool
) -> None:
    """A Triton autotuner (here the task's target kernel, under heuristics) times its configs in
    its first call: beside other evaluations' kernels it would pick by their noise, so that
    candidate's first calls wait for the device alone."""
    source = HONEST + (
        "\n\n@triton.heuristics({'UNUSED': lambda args: 1})\n"
        "@triton.autotune(configs=[triton.Config({'BLOCK_SIZE': 1024})], key=['n_elements'])\n"
        "@triton.jit\n"
        "def gelu_kernel(x_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr, UNUSED: tl.constexpr):\n"
        "    offsets = tl.program_id(axis=0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)\n"
        "    mask = offsets < n_elements\n"
        "    x = tl.load(x_ptr + offsets, mask=mask, other=0.0).to(tl.float32)\n"
        "    y = 0.5 * x * (1.0 + tl.math.erf(x * 0.7071067811865476))\n"
        "    tl.store(out_ptr + offsets, y.to(out_ptr.dtype.element_ty), mask=mask)\n"
        "\n\ndef gelu(x):\n"
        "    out = torch.empty_like(x)\n"
        "    gelu_kernel[lambda meta: (triton.cdiv(x.numel(), meta['BLOCK_SIZE']),)](x, out, x.numel())\n"
        "    return out\n"
    )
    task = gelu_task
    if baseline_too:  # a task whose own kernel autotunes: the baseline's first calls wait too
        task = copy_gelu_task(tmp_path / "tasks")
        (task.directory / "kernel.py").write_text(source)
    monkeypatch.setenv(ENV_PHASED_SET_UP, "1")  # its cases' warm-up calls wait for the device alone too
    outcome, log = _performance(task, tmp_path, source, monkeypatch)
    assert outcome.failure is FailureKind.NONE and outcome.cases and all(c.speedup for c in outcome.cases), log[-3000:]
    assert "candidate autotunes: its first calls wait for the device alone" in log, log[-3000:]
    assert log.count("the device came alone") == 2, log[-3000:]  # calibration, then every case in one turn
    assert "candidate's first calls made" not in log
    assert ("baseline autotunes: its first calls wait for the device alone" in log) is baseline_too, log[-3000:]
    assert ("baseline's first calls made" in log) is not baseline_too
