"""The run-level held-out summary: how many accepted candidates stay correct on shapes they never
saw (correctness retention), and how much of their speedup survives (the generalization gap)."""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Sequence

from aka.results.task_result import HeldoutOutcome, HeldoutResult, TaskResult

_DECIMALS = 4


def heldout_summary(results: Sequence[TaskResult]) -> dict[str, object] | None:
    """None when no task of the run was evaluated on held-out cases."""
    return summarize_heldout([r.heldout for r in results if r.heldout is not None])


def summarize_heldout(evaluated: Sequence[HeldoutResult]) -> dict[str, object] | None:
    """Outcome counts, correctness retention (the share of candidates still correct),
    P(candidate correct | baseline correct) and the mean gap; None when nothing was evaluated."""
    if not evaluated:
        return None
    outcomes = Counter(h.outcome.value for h in evaluated)
    retained = sum(h.candidate_correct for h in evaluated)
    baseline_ok = [h for h in evaluated if h.baseline_correct]
    gaps = [h.generalization_gap for h in evaluated if h.generalization_gap is not None]
    speedups = [h.speedup_ratio for h in evaluated if h.speedup_ratio is not None]
    return {
        "task_count": len(evaluated),
        "outcomes": {outcome.value: outcomes.get(outcome.value, 0) for outcome in HeldoutOutcome},
        "correctness_retention": round(retained / len(evaluated), _DECIMALS),
        "p_candidate_correct_given_baseline_correct": round(
            sum(h.candidate_correct for h in baseline_ok) / len(baseline_ok), _DECIMALS
        )
        if baseline_ok
        else None,
        "mean_generalization_gap": round(statistics.fmean(gaps), _DECIMALS) if gaps else None,
        "mean_heldout_speedup": round(statistics.fmean(speedups), _DECIMALS) if speedups else None,
    }


def heldout_lines(summary: dict[str, object] | None) -> list[str]:
    if summary is None:
        return []
    outcomes = summary["outcomes"]
    assert isinstance(outcomes, dict)
    counts = "  ".join(f"{name}={count}" for name, count in outcomes.items())
    return [
        "",
        "Held-out cases (accepted candidates on shapes they never saw; not scored)",
        f"  Tasks: {summary['task_count']}  {counts}",
        f"  Correctness retention: {summary['correctness_retention']}  "
        f"mean generalization gap (speedup lost): {summary['mean_generalization_gap']}  "
        f"mean held-out speedup: {summary['mean_heldout_speedup']}",
    ]
