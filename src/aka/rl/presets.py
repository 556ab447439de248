"""Reward presets: one number per candidate for a trainer, always with the raw metrics beside it.

- `score`: the seed's score (0 / 20 / 120 + 100 x speedup), exactly what `aka run` writes.
- `log_speedup`: a correct candidate gets ln(speedup) clipped to [-clip, clip]; anything else
  the floor, -clip (so a slow correct kernel is never worth less than a wrong one).
- `kevin` (Kevin-32B): 0.3 x correct + speedup x correct; caught cheating (a PyTorch-operator
  policy violation among it) gets 0.
- `kernelgym` (KernelGYM): 0.5 x correct + 0.5 x min(speedup, 3); decoys (no target kernel, or a
  policy violation: the generated kernel did not do the work) and other cheating get 0.

A correct candidate that was not timed counts speedup 0 (as the seed's score does).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from aka.errors import AkaError
from aka.results.task_result import CHEATING_KINDS, FailureKind
from aka.rl.result import CandidateResult

LOG_SPEEDUP_CLIP = 2.0
KERNELGYM_SPEEDUP_CAP = 3.0
DECOY_KINDS = frozenset({FailureKind.MISSING_KERNEL, *CHEATING_KINDS})

Metric = float | bool | str | None


@dataclass(frozen=True)
class Reward:
    """A preset's value and the raw metrics it came from (for the trainer's logs)."""

    value: float
    preset: str
    applicable: bool
    metrics: dict[str, Metric]


def raw_metrics(result: CandidateResult) -> dict[str, Metric]:
    return {
        "compiled": result.compiled,
        "correct": result.correct,
        "speedup": result.speedup,
        "speedup_ci_low": result.speedup_ci_low,
        "speedup_ci_high": result.speedup_ci_high,
        "score": result.score,
        "failure_kind": result.failure_kind.value,
        "base_ms": result.base_ms,
        "optimized_ms": result.optimized_ms,
        "evaluation_seconds": result.evaluation_seconds,
        "cached": result.cached,
    }


def _speedup(result: CandidateResult) -> float:
    """The speedup, 0 where there is none or it is not a finite positive number (a NaN read
    +2 under `log_speedup`, the highest reward: red team G, session 54; a report never carries
    one, but a reward must not rest on that)."""
    speedup = result.speedup
    return speedup if speedup is not None and math.isfinite(speedup) and speedup > 0 else 0.0


def _accepted(result: CandidateResult) -> bool:
    return result.correct and result.failure_kind not in CHEATING_KINDS


def score_reward(result: CandidateResult) -> float:
    return result.score


def log_speedup_reward(result: CandidateResult, clip: float = LOG_SPEEDUP_CLIP) -> float:
    if not _accepted(result) or _speedup(result) <= 0:
        return -clip
    return max(-clip, min(clip, math.log(_speedup(result))))


def kevin_reward(result: CandidateResult) -> float:
    return 0.3 + _speedup(result) if _accepted(result) else 0.0


def kernelgym_reward(result: CandidateResult) -> float:
    if result.failure_kind in DECOY_KINDS or not result.correct:
        return 0.0
    return 0.5 + 0.5 * min(_speedup(result), KERNELGYM_SPEEDUP_CAP)


PRESETS: dict[str, Callable[[CandidateResult], float]] = {
    "score": score_reward,
    "log_speedup": log_speedup_reward,
    "kevin": kevin_reward,
    "kernelgym": kernelgym_reward,
}


# Each preset's least value: what a candidate that does not compile gets.
FLOORS: dict[str, float] = {"score": 0.0, "log_speedup": -LOG_SPEEDUP_CLIP, "kevin": 0.0, "kernelgym": 0.0}


def check_preset(preset: str) -> None:
    """A one-line `AkaError` naming the presets there are, for a name that is none of them."""
    if preset not in PRESETS:
        raise AkaError(f"unknown reward preset '{preset}' (use one of {', '.join(PRESETS)})")


def floor(preset: str) -> float:
    """The value of a verdict that is not the candidate's, for trainers that need a number: the
    preset's least, so it never beats a wrong answer. It was 0.0 for every preset, which under
    `log_speedup` is a correct kernel at 1.0x, above a wrong answer's -2: whatever a candidate could
    do to end as an infrastructure error would have paid (red team C, session 53)."""
    check_preset(preset)
    return FLOORS[preset]


def reward(result: CandidateResult, preset: str = "score") -> Reward:
    """The preset's value for `result`; not applicable (infra error, skipped) is the preset's
    `floor` with `applicable=False`, which the adapters turn into None where the trainer accepts it."""
    check_preset(preset)
    value = float(PRESETS[preset](result)) if result.applicable else floor(preset)
    return Reward(value=value, preset=preset, applicable=result.applicable, metrics=raw_metrics(result))
