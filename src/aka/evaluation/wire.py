"""The one contract between the evaluator and a task's step process (docs/result-format.md).

Both sides import their names from here: the step report's format and fields, the failure kinds
a step may name, the timing methods, the exit codes, the environment a step gets and the
directory names in the evaluation directory. Standard library only: the step process (aka.harness)
imports nothing but it and torch, the evaluator validates with pydantic models that
tests/evaluation/test_wire.py holds to these names field for field.
"""

from __future__ import annotations

import os
import re
from enum import IntEnum
from typing import TypeVar, cast

STEP_REPORT_FORMAT = "aka-step-report/1"
READY_LINE = b"ready\n"  # a step sends it on its result pipe once loaded, before it reads its token
# On `$AKA_TURN_FD` a timed step asks for the device alone or shared; the evaluator answers GO once it holds it.
TURN_ALONE, TURN_SHARED, TURN_GO = b"alone\n", b"shared\n", b"go\n"
BASELINE_SOURCES_DIR = ".aka_baseline"  # the pristine sources inside the evaluation directory
HELDOUT_FILE = "heldout.py"  # a task's held-out cases: hidden from agents, and in held-out evaluations only

# The environment of a step command (aka.evaluation.steps.step_environment, aka.harness.task.StepContext).
ENV_STEP = "AKA_STEP"
ENV_DEVICE = "AKA_DEVICE"
ENV_TARGET = "AKA_TARGET"
ENV_CASE_PROFILE = "AKA_CASE_PROFILE"
ENV_TASK_FAMILY = "AKA_TASK_FAMILY"
ENV_TARGET_KERNELS = "AKA_TARGET_KERNELS"
ENV_BASELINE = "AKA_BASELINE"
ENV_BASELINE_DIR = "AKA_BASELINE_DIR"
ENV_CUDA_ARCH = "AKA_CUDA_ARCH"
ENV_RESULT_FD = "AKA_RESULT_FD"
ENV_TURN_FD = "AKA_TURN_FD"  # the timed step's phases: a socket to the evaluator (aka.harness.phases)
ENV_SHARED_CACHE = "AKA_SHARED_CACHE_DIR"
ENV_PLACEMENTS = "AKA_PLACEMENTS"  # placements per side and case (aka.harness.turns.Placements)


DEFAULT_PLACEMENTS = 4  # docs/benchmarks/2026-12-03_placements_h200.md
ENV_TIMING_BUDGET = "AKA_TIMING_BUDGET_S"  # seconds of pairs a performance step takes at most


DRAIN_S = 0.05  # before a turn is let go: what the step's stopped processes queued on the GPU finishes
ENV_PHASED_SET_UP = "AKA_PHASED_SET_UP"  # 1: each case set up while the device is shared (aka.harness.perf)


def phased_set_up() -> bool:
    """`AKA_PHASED_SET_UP=1`: in a phased turn each case's set-up and clean-up are made while the
    device is shared, and the device is taken alone once per case. Off until it is measured side
    by side on a GPU (throughput and the A/A band): each case then costs a drain and a wait."""
    return os.environ.get(ENV_PHASED_SET_UP, "").strip() == "1"


ENV_ONE_TURN = "AKA_ONE_TURN"  # 1: the performance step takes the device alone once (aka.harness.perf)


def one_turn() -> bool:
    """`AKA_ONE_TURN=1`: in a phased turn the performance step asks for the device alone once,
    for the pairs and then the baseline's calibration, after the candidate's worker has ended;
    otherwise twice (the calibration before the candidate's code loads, then the pairs). Each
    turn alone is a wait for the shared steps in flight (docs/benchmarks/2026-12-04_session40_h200.md).
    Off until it is measured side by side on a GPU (throughput, the A/A band, the exploit suite)."""
    return os.environ.get(ENV_ONE_TURN, "").strip() == "1"


def timing_budget_s() -> float | None:
    """`AKA_TIMING_BUDGET_S` where set: the seconds of pairs a performance step takes at most
    (`PairedConfig.step_budget_s`, 2.4 by default). Less gives a GPU more evaluations an hour and
    each case a wider interval; the floor of a case's pairs stays. For throughput experiments."""
    raw = os.environ.get(ENV_TIMING_BUDGET, "").strip()
    if not raw:
        return None
    try:
        seconds = float(raw)
    except ValueError:
        seconds = -1.0
    if not 0 < seconds <= 3600:
        raise ValueError(f"{ENV_TIMING_BUDGET}={raw!r}: expected seconds above 0 (e.g. 1.2); unset it for the default")
    return seconds


def wanted_placements() -> int:
    """How many buffer and code placements each side of a timed case cycles through
    (`AKA_PLACEMENTS` overrides the default, for experiments; 1 is one placement per side)."""
    raw = os.environ.get(ENV_PLACEMENTS, "").strip()
    return max(1, min(16, int(raw))) if raw.isdigit() else DEFAULT_PLACEMENTS


ENV_ALLOCATION_SHIFTS = "AKA_ALLOCATION_SHIFTS"  # allocation shifts per side and case (aka.harness.worker)
DEFAULT_ALLOCATION_SHIFTS = 1


def allocation_shifts() -> int:
    """How many allocation shifts a side's calls go through in turn (`AKA_ALLOCATION_SHIFTS`, e.g.
    8; 1, the default, is none). The placements rotate a call's inputs and outputs, not the
    temporaries it allocates itself, which a worker's allocator hands back at one address every
    call: an A/A evaluation of a task with a per-call histogram (moe_align_block_size) leaned 1-2%
    one way for its whole life. Off until it is measured side by side on a GPU (the A/A band of
    such tasks with and without it)."""
    raw = os.environ.get(ENV_ALLOCATION_SHIFTS, "").strip()
    return max(1, min(64, int(raw))) if raw.isdigit() else DEFAULT_ALLOCATION_SHIFTS


class StepExit(IntEnum):
    """How a step process ends. Under the evaluator only `REPORTED` carries a report; the
    candidate's own failures are in it (`status: failed`), never in the exit code. Run by hand
    (no channel), a failed step prints its report and exits `FAILED_BY_HAND`."""

    REPORTED = 0
    FAILED_BY_HAND = 1  # run by hand (no channel: never the evaluator's step) and the step failed
    TASK_FAULT = 2  # the task or the platform is at fault, never the candidate: an infra_error
    HARNESS_BUG = 3  # an unexpected exception in the judge: charged like a crash, so that a candidate
    # cannot turn its own failure into an infra_error that a trainer drops


# Failure kinds a step may name in its report (a subset of aka.results.task_result.FailureKind).
INCORRECT = "incorrect"
POLICY_VIOLATION = "policy_violation"
TAMPERING = "tampering"
IMPOSSIBLE_SPEEDUP = "impossible_speedup"
PERFORMANCE_ERROR = "performance_error"  # a case that could not be timed fairly
CRASH = "crash"
TIMEOUT = "timeout"
INFRA_ERROR = "infra_error"
STEP_FAILURE_KINDS = frozenset(
    {INCORRECT, POLICY_VIOLATION, TAMPERING, IMPOSSIBLE_SPEEDUP, PERFORMANCE_ERROR, CRASH, TIMEOUT, INFRA_ERROR}
)

# Timing methods (`timing_method`, and the result's *_benchmark_methods).
PAIRED_EVENTS = "paired_cuda_event_l2flush"
PAIRED_WALL_CLOCK = "paired_wall_clock"
EVENTS_MEDIAN = "cuda_event_l2flush_median"
WALL_CLOCK_MEDIAN = "wall_clock_median"
TIMING_METHODS = frozenset({PAIRED_EVENTS, PAIRED_WALL_CLOCK, EVENTS_MEDIAN, WALL_CLOCK_MEDIAN})

STEP_FIELDS = ("format", "step", "status", "message", "failure_kind", "eval_seed", "isolation", "cases")
CASE_FIELDS = (
    "id",
    "params",
    "correct",
    "time_ms",
    "timing_method",
    "max_abs_error",
    "message",
    "baseline_time_ms",
    "baseline_timing_method",
    "speedup",
    "speedup_ci_low",
    "speedup_ci_high",
    "samples",
    "late_pairs",
    "floor_ms",
    "unexplained_ms",
    "span_speedup",
)


_Data = TypeVar("_Data")


_CONTROL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")  # all but tab and line ends


def valid_text(value: _Data) -> _Data:
    """`value` (JSON data) with every lone surrogate and control character in its strings, keys
    included, replaced by U+FFFD. JSON carries them (`"\\udcff"`, `"\\u001b"`) and Python decodes
    them, but they are not text: a candidate's error message holding a surrogate made the reward
    API's cache fail to serialize its result, so the trainer got an exception instead of its
    penalty, and one holding terminal escapes redrew `aka run`'s FAIL line as a green PASS (red
    teams, session 50). Applied where data crosses into a trusted process (a worker's reply, a
    step's report, an agent's events) and to every line `aka run` prints."""
    if isinstance(value, str):
        if value.isascii() and _CONTROL.search(value) is None:  # nearly every string: no copy
            return value
        text = value.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
        return cast(_Data, _CONTROL.sub("\ufffd", text))
    if isinstance(value, dict):
        return cast(_Data, {valid_text(key): valid_text(item) for key, item in value.items()})
    if isinstance(value, list):
        return cast(_Data, [valid_text(item) for item in value])
    return value
