"""From step reports to the result's timing fields: per-case speedups, their mean and interval.

A paired case (baseline and candidate timed interleaved in the candidate's own process) carries
its own baseline time, speedup and 95% interval; it is always preferred. Otherwise the case falls
back to the run's frozen baseline, measured alone in another process. The task's speedup is the
mean over cases of the per-case speedup (each case weighted equally, as the seed does); its
interval is the mean of the per-case interval bounds, which is wider than the exact interval of
the mean, never narrower.
"""

from __future__ import annotations

import statistics

from aka.evaluation.baseline import BaselineRecord
from aka.evaluation.step_report import CaseReport
from aka.results.task_result import CaseTiming, TaskResult

BASELINE_SLOWDOWN_LIMIT = 1.3


def _case(case_id: str, base: CaseReport | None, opt: CaseReport | None) -> CaseTiming:
    if opt is not None and opt.speedup and opt.baseline_time_ms and opt.time_ms:
        return CaseTiming(
            id=case_id,
            params=opt.params,
            base_ms=opt.baseline_time_ms,
            optimized_ms=opt.time_ms,
            speedup=opt.speedup,
            speedup_ci_low=opt.speedup_ci_low,
            speedup_ci_high=opt.speedup_ci_high,
            paired=True,
            samples=opt.samples,
            base_method=opt.baseline_timing_method,
            optimized_method=opt.timing_method,
        )
    speedup = base.time_ms / opt.time_ms if base and opt and base.time_ms and opt.time_ms else None
    shown = opt or base
    assert shown is not None
    return CaseTiming(
        id=case_id,
        params=shown.params,
        base_ms=base.time_ms if base else None,
        optimized_ms=opt.time_ms if opt else None,
        speedup=speedup,
        base_method=base.timing_method if base else None,
        optimized_method=opt.timing_method if opt else None,
    )


def apply_timings(result: TaskResult, baseline: BaselineRecord, performance: list[CaseReport]) -> None:
    """Fill the seed's timing fields and the per-case table of `result`."""
    base = {c.id: c for c in baseline.cases if c.time_ms}
    optimized = {c.id: c for c in performance if c.time_ms}
    result.valid_baseline_cases = len(base) or sum(1 for c in optimized.values() if c.baseline_time_ms)
    result.valid_optimized_cases = len(optimized)
    result.cases = [_case(i, base.get(i), optimized.get(i)) for i in [*base, *(i for i in optimized if i not in base)]]
    matched = [c for c in result.cases if c.speedup is not None]
    result.baseline_benchmark_methods = sorted({c.base_method for c in matched if c.base_method})
    result.optimized_benchmark_methods = sorted({c.optimized_method for c in matched if c.optimized_method})
    result.benchmark_method_consistent = bool(matched) and all(c.base_method == c.optimized_method for c in matched)
    if not matched:
        result.speedup_calculation_error_message = (
            baseline.message if not baseline.usable else "no test case was timed in both baseline and candidate"
        )
        return
    result.speedup_ratio = round(statistics.fmean(c.speedup for c in matched if c.speedup), 6)
    result.base_execution_time = round(statistics.fmean(c.base_ms for c in matched if c.base_ms), 6)
    result.best_optimized_execution_time = round(statistics.fmean(c.optimized_ms for c in matched if c.optimized_ms), 6)
    if all(c.speedup_ci_low and c.speedup_ci_high for c in matched):
        result.speedup_ci_low = round(statistics.fmean(c.speedup_ci_low or 0.0 for c in matched), 6)
        result.speedup_ci_high = round(statistics.fmean(c.speedup_ci_high or 0.0 for c in matched), 6)
    if not result.benchmark_method_consistent:
        result.speedup_calculation_error_message = (
            "baseline and candidate were timed with different methods: the speedup compares unlike numbers; "
            "it is still scored, so compare such results with care"
        )


def slowed_baselines(baseline: BaselineRecord, performance: list[CaseReport]) -> list[str]:
    """Cases whose baseline ran much slower next to the candidate than alone: interference."""
    alone = {c.id: c.time_ms for c in baseline.cases if c.time_ms}
    return [
        c.id
        for c in performance
        if c.baseline_time_ms and alone.get(c.id) and c.baseline_time_ms > BASELINE_SLOWDOWN_LIMIT * alone[c.id]
    ]
