from __future__ import annotations

import pytest

from aka.config.task_config import BaselineSource
from aka.evaluation.baseline import BaselineRecord
from aka.evaluation.speedup import apply_timings, slowed_baselines
from aka.evaluation.step_report import CaseReport
from aka.results.task_result import TaskResult


def _baseline(*times: float) -> BaselineRecord:
    return BaselineRecord(
        task_name="t",
        task_identity="x",
        device="d",
        source=BaselineSource.SOURCE,
        cases=[CaseReport(id=f"c{i}", time_ms=t, timing_method="solo") for i, t in enumerate(times)],
    )


def test_unpaired_cases_fall_back_to_the_frozen_baseline() -> None:
    result = TaskResult(task_name="t", task_type="triton2triton")
    apply_timings(
        result,
        _baseline(4.0, 8.0),
        [
            CaseReport(id="c0", time_ms=2.0, timing_method="solo"),
            CaseReport(id="c1", time_ms=2.0, timing_method="solo"),
        ],
    )
    assert result.speedup_ratio == pytest.approx(3.0)
    assert not any(c.paired for c in result.cases) and result.benchmark_method_consistent
    assert result.speedup_ci_low is None


def test_paired_cases_win_and_carry_intervals() -> None:
    result = TaskResult(task_name="t", task_type="triton2triton")
    paired = [
        CaseReport(
            id="c0",
            time_ms=2.0,
            timing_method="paired",
            baseline_time_ms=3.0,
            baseline_timing_method="paired",
            speedup=1.5,
            speedup_ci_low=1.4,
            speedup_ci_high=1.6,
        )
    ]
    apply_timings(result, _baseline(4.0), paired)
    assert result.speedup_ratio == pytest.approx(1.5) and result.cases[0].paired
    assert (result.speedup_ci_low, result.speedup_ci_high) == (pytest.approx(1.4), pytest.approx(1.6))


def test_mixed_methods_are_flagged_and_slow_baselines_found() -> None:
    result = TaskResult(task_name="t", task_type="triton2triton")
    apply_timings(
        result,
        _baseline(4.0, 4.0),
        [
            CaseReport(
                id="c0",
                time_ms=2.0,
                timing_method="paired",
                baseline_time_ms=6.0,
                baseline_timing_method="paired",
                speedup=3.0,
            ),
            CaseReport(id="c1", time_ms=2.0, timing_method="other"),
        ],
    )
    assert not result.benchmark_method_consistent
    assert "different methods" in (result.speedup_calculation_error_message or "")
    assert slowed_baselines(_baseline(4.0, 4.0), [CaseReport(id="c0", baseline_time_ms=6.0, time_ms=1.0)]) == ["c0"]


def test_no_timed_case_explains_itself() -> None:
    result = TaskResult(task_name="t", task_type="triton2triton")
    apply_timings(result, _baseline(4.0), [])
    assert result.speedup_ratio is None and "no test case" in (result.speedup_calculation_error_message or "")
