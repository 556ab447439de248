"""Reward presets: each published shape on the verdicts that matter, raw metrics always beside it."""

from __future__ import annotations

import math

import pytest

from aka.errors import AkaError
from aka.results.task_result import FailureKind, TaskResult, TaskStatus
from aka.rl.presets import PRESETS, floor, reward
from aka.rl.result import CandidateResult


def _result(
    compiled: bool, correct: bool, speedup: float | None, kind: FailureKind = FailureKind.NONE, score: float = 0.0
) -> CandidateResult:
    task = TaskResult(
        task_name="t",
        task_type="triton2triton",
        pass_compilation=compiled,
        pass_correctness=correct,
        speedup_ratio=speedup,
        failure_kind=kind,
        score=score,
        status=TaskStatus.PASS,
    )
    return CandidateResult.from_task_result("t", "sha", "key", task)


FAST = _result(True, True, 2.0, score=320.0)
SLOW = _result(True, True, 0.1, score=130.0)
HUGE = _result(True, True, 50.0, score=5120.0)
WRONG = _result(True, False, None, FailureKind.INCORRECT, 20.0)
BROKEN = _result(False, False, None, FailureKind.COMPILE_ERROR)
TORCH_OPS = _result(True, False, None, FailureKind.POLICY_VIOLATION)
DECOY = _result(False, False, None, FailureKind.MISSING_KERNEL)
INFRA = _result(False, False, None, FailureKind.INFRA_ERROR)


@pytest.mark.parametrize(
    ("preset", "result", "value"),
    [
        ("score", FAST, 320.0),
        ("score", WRONG, 20.0),
        ("score", BROKEN, 0.0),
        ("log_speedup", FAST, math.log(2.0)),
        ("log_speedup", SLOW, -2.0),
        ("log_speedup", HUGE, 2.0),
        ("log_speedup", WRONG, -2.0),
        ("kevin", FAST, 2.3),
        ("kevin", WRONG, 0.0),
        ("kevin", TORCH_OPS, 0.0),
        ("kernelgym", FAST, 1.5),
        ("kernelgym", HUGE, 2.0),
        ("kernelgym", DECOY, 0.0),
        ("kernelgym", TORCH_OPS, 0.0),
    ],
)
def test_preset_values(preset: str, result: CandidateResult, value: float) -> None:
    assert reward(result, preset).value == pytest.approx(value)


def test_every_preset_carries_the_raw_metrics_and_flags_infra() -> None:
    for preset in PRESETS:
        chosen = reward(FAST, preset)
        assert chosen.applicable and chosen.metrics["speedup"] == 2.0 and chosen.metrics["correct"] is True
        assert chosen.metrics["score"] == 320.0 and chosen.metrics["failure_kind"] == "none"
        infra = reward(INFRA, preset)
        assert not infra.applicable and infra.metrics["failure_kind"] == "infra_error"
        # a verdict that is not the candidate's is worth the preset's least, never more than a wrong answer
        assert infra.value == floor(preset) == reward(BROKEN, preset).value <= reward(WRONG, preset).value
    assert floor("log_speedup") == -2.0 and floor("score") == 0.0


def test_unknown_preset_is_a_one_line_error() -> None:
    with pytest.raises(AkaError, match="unknown reward preset 'best' \\(use one of score, log_speedup"):
        reward(FAST, "best")


@pytest.mark.parametrize("speedup", [float("nan"), float("inf"), -1.0, 0.0])
def test_a_speedup_that_is_not_a_finite_positive_number_earns_no_more_than_none(speedup: float) -> None:
    """A NaN speedup read +2 under log_speedup, the highest reward (red team G, session 54): no
    report carries one, but a reward must not rest on that."""
    result = _result(True, True, None)
    odd = result.model_copy(update={"speedup": speedup})
    for preset in ("log_speedup", "kevin", "kernelgym"):
        assert reward(odd, preset).value == reward(result, preset).value, preset
