"""What happened to one candidate, in the words a person reads (the run's lines, the summary, the
reports and the dashboard), and whether a run's times can mean anything for a GPU.

`TaskStatus` says PASS for every correct candidate, the untouched baseline and one slower than
its baseline alike; the verdict tells them apart with the interval recorded for the speedup: a
correct candidate whose interval holds 1.0 is `correct-unchanged`, not faster or slower. A run
on the CPU times Triton's interpreter: its speedups are a smoke test of the pipeline, and every
place that shows one says so.
"""

from __future__ import annotations

import math
from enum import Enum

from aka.results.task_result import CHEATING_KINDS, FailureKind, TaskResult, TaskStatus

CPU_DEVICE = "cpu"  # aka.device.CPU_MODEL: the model and the device name of a run without a GPU
SMOKE_TEST_NOTE = "smoke test: a CPU (Triton interpreter) run; its times and speedups say nothing about a GPU"


class Verdict(str, Enum):
    FASTER = "correct-and-faster"
    SLOWER = "correct-but-slower"
    UNCHANGED = "correct-unchanged"
    UNTIMED = "correct-untimed"
    INCORRECT = "incorrect"
    COMPILE_FAILURE = "compile failure"
    NO_CANDIDATE = "no candidate"
    CHEATING = "cheating"
    INFRASTRUCTURE = "infrastructure"
    SKIPPED = "skipped"


VERDICT_BY_WORD = {v.value: v for v in Verdict}
CORRECT_VERDICTS = frozenset({Verdict.FASTER, Verdict.SLOWER, Verdict.UNCHANGED, Verdict.UNTIMED})
VERDICT_STYLE = {
    Verdict.FASTER: "green",
    Verdict.SLOWER: "yellow",
    Verdict.UNCHANGED: "green",
    Verdict.UNTIMED: "green",
    Verdict.INCORRECT: "red",
    Verdict.COMPILE_FAILURE: "red",
    Verdict.NO_CANDIDATE: "red",
    Verdict.CHEATING: "bold red",
    Verdict.INFRASTRUCTURE: "magenta",
    Verdict.SKIPPED: "cyan",
}  # console


def verdict(result: TaskResult) -> Verdict:
    """The verdict on `result`; the first that applies: skipped, infrastructure, cheating (caught
    even on a correct candidate), no candidate (the agent failed and changed nothing), compile
    failure, incorrect, then the speed of a correct candidate against its recorded interval."""
    if result.status is TaskStatus.SKIP:
        return Verdict.SKIPPED
    if result.status is TaskStatus.INFRA:
        return Verdict.INFRASTRUCTURE
    if result.failure_kind in CHEATING_KINDS:
        return Verdict.CHEATING
    if not result.pass_compilation:
        no_candidate = result.failure_kind in (FailureKind.AGENT_ERROR, FailureKind.AGENT_TIMEOUT)
        return (
            Verdict.NO_CANDIDATE
            if no_candidate and result.compilation_error_message is None
            else Verdict.COMPILE_FAILURE
        )
    if not result.pass_correctness:
        return Verdict.INCORRECT
    return _speed(result.speedup_ratio, result.speedup_ci_low, result.speedup_ci_high)


def _speed(speedup: float | None, low: float | None, high: float | None) -> Verdict:
    if speedup is None or not math.isfinite(speedup) or speedup <= 0:
        return Verdict.UNTIMED
    if low is not None and high is not None:
        if low <= 1.0 <= high:
            return Verdict.UNCHANGED
    elif speedup == 1.0:
        return Verdict.UNCHANGED
    return Verdict.FASTER if speedup > 1.0 else Verdict.SLOWER


def is_smoke_test(device: str) -> bool:
    """Whether a run on `device` (a result's `device`, a run's target model) timed the CPU."""
    words = device.lower().split()
    return bool(words) and words[0] == CPU_DEVICE
