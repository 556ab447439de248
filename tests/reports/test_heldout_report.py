from __future__ import annotations

import pytest

from aka.reports.heldout import heldout_lines, heldout_summary
from aka.results.task_result import HeldoutOutcome, HeldoutResult, TaskResult


def _result(
    outcome: HeldoutOutcome | None, correct: bool = True, speedup: float | None = None, gap: float | None = None
) -> TaskResult:
    heldout = (
        None
        if outcome is None
        else HeldoutResult(
            outcome=outcome,
            baseline_correct=True,
            candidate_correct=correct,
            speedup_ratio=speedup,
            generalization_gap=gap,
        )
    )
    return TaskResult(task_name="t", task_type="triton2triton", heldout=heldout)


def test_summary_counts_retention_and_gap() -> None:
    summary = heldout_summary(
        [
            _result(HeldoutOutcome.BOTH_PASS, speedup=1.5, gap=0.5),
            _result(HeldoutOutcome.OPT_REGRESSION, correct=False),
            _result(HeldoutOutcome.BOTH_PASS, speedup=2.0, gap=-0.1),
            _result(None),
        ]
    )
    assert summary is not None
    assert summary["task_count"] == 3 and summary["correctness_retention"] == pytest.approx(0.6667)
    assert summary["outcomes"] == {"both_pass": 2, "opt_regression": 1, "both_fail": 0, "opt_improvement": 0}
    assert summary["mean_generalization_gap"] == pytest.approx(0.2) and summary["mean_heldout_speedup"] == 1.75
    assert "Correctness retention: 0.6667" in "\n".join(heldout_lines(summary))


def test_no_heldout_no_summary() -> None:
    assert heldout_summary([_result(None)]) is None and heldout_lines(None) == []
