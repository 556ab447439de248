"""`aka compare`: per-arm metrics and paired comparisons of each arm against the first (the control).

Conventions, declared once (docs/comparing.md):
- The unit is the task. An arm's value on a task is the mean over its repeats; differences are
  treatment minus control on the tasks both arms have.
- log-speedup: log of the recorded speedup of a correct attempt; an attempt that is not correct
  (or has no timing) counts as `failed_speedup` (default 1.0: the user keeps the baseline).
- fast_p (KernelBench): the share of attempts that are correct with speedup > p, all tasks in the
  denominator (a task's repeats averaged first).
- A task is a tie when its log-speedup difference lies inside the timing intervals recorded for
  it (each arm's half-width of the mean of its repeats, combined in quadrature), or inside
  `tie_tolerance` when no interval was recorded.
- The primary endpoint is the paired t-test of the mean log-speedup difference (the verdict's speed
  claim and the power analysis are about it); Holm's correction runs over the four tests reported
  per pair (t and Wilcoxon on log-speedup, exact McNemar on correctness, t on score) for anyone
  reading more than the primary one, and decides the verdict's correctness claim.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path

import numpy as np
from pydantic import BaseModel, Field

from aka.compare import stats as ab_stats
from aka.compare.runs import ArmData, Attempt, CompareError
from aka.compare.stats import FloatArray
from aka.reports.writers import TaskStats, compute_stats

FAST_P_THRESHOLDS = (1.0, 1.2, 1.5, 2.0)
FEW_TASKS = 30
COMPARE_SCHEMA_VERSION = 1


class CompareOptions(BaseModel):
    alpha: float = Field(default=0.05, gt=0, lt=1)
    failed_speedup: float = Field(default=1.0, gt=0)
    tie_tolerance: float = Field(default=0.01, ge=0)
    target_ratio: float = Field(default=1.05, gt=1)
    power: float = Field(default=ab_stats.DEFAULT_POWER, gt=0, lt=1)
    bootstrap_resamples: int = Field(default=2000, ge=100)
    seed: int = 0


class ArmSummary(BaseModel):
    label: str
    run_dir: str
    tasks: int
    attempts: int
    repeats: float
    infra_errors: int
    correct_rate: float
    mean_log_speedup: float
    geomean_speedup: float
    fast_p: dict[str, float]
    mean_score: float
    seed_overall: TaskStats
    seed_by_family: dict[str, TaskStats]


class Estimate(BaseModel):
    """A difference (treatment - control) with its 95% t-interval and p-value."""

    mean: float
    se: float
    low: float
    high: float
    p_value: float


class TaskRow(BaseModel):
    task: str
    family: str
    control_speedup: float
    treatment_speedup: float
    control_correct: float
    treatment_correct: float
    log_diff: float
    tie_band: float
    outcome: str


class PowerAnalysis(BaseModel):
    sd_diff: float
    within_control: float | None
    within_treatment: float | None
    within_difference: float | None
    between_tasks: float | None
    mde_log: float | None
    mde_ratio: float | None
    target_ratio: float
    power_at_target: float
    repeats_needed: int | None


class PairComparison(BaseModel):
    control: str
    treatment: str
    tasks: int
    repeats_control: float
    repeats_treatment: float
    only_in_control: list[str]
    only_in_treatment: list[str]
    log_speedup: Estimate
    bootstrap_low: float
    bootstrap_high: float
    wilcoxon_p: float
    speedup_ratio: float
    speedup_ratio_low: float
    speedup_ratio_high: float
    correctness: Estimate
    correct_b_only: int
    correct_a_only: int
    mcnemar_p: float
    score: Estimate
    holm: dict[str, float]
    wins: int
    losses: int
    ties: int
    correlation: float | None
    power: PowerAnalysis
    verdict: str
    warnings: list[str]
    rows: list[TaskRow]


class Comparison(BaseModel):
    schema_version: int = COMPARE_SCHEMA_VERSION
    options: CompareOptions
    arms: list[ArmSummary]
    pairs: list[PairComparison]


AttemptValue = Callable[[Attempt], float]


def _matrix(arm: ArmData, tasks: list[str], value: AttemptValue) -> FloatArray:
    """A (tasks x repeats) array of one attempt value; NaN where a repeat is missing."""
    grouped = arm.by_task()
    width = max((len(grouped.get(t, [])) for t in tasks), default=1)
    out = np.full((len(tasks), max(width, 1)), np.nan)
    for i, task in enumerate(tasks):
        for j, attempt in enumerate(sorted(grouped.get(task, []), key=lambda a: a.repeat)):
            out[i, j] = value(attempt)
    return out


def _log_speedup(options: CompareOptions) -> AttemptValue:
    return lambda attempt: attempt.log_speedup(options.failed_speedup)


def _correct(attempt: Attempt) -> float:
    return float(attempt.correct)


def _score(attempt: Attempt) -> float:
    return attempt.score


def _halfwidth(attempt: Attempt) -> float:
    return attempt.log_halfwidth if attempt.log_halfwidth is not None else math.nan


def _faster_than(threshold: float) -> AttemptValue:
    return lambda a: float(a.correct and a.speedup is not None and a.speedup > threshold)


def summarize_arm(arm: ArmData, options: CompareOptions) -> ArmSummary:
    tasks = sorted(arm.tasks)
    if not tasks:
        raise CompareError(f"{arm.run_dir}: arm '{arm.label}' has no counted attempt (all skipped or infra errors)")

    def mean_of(value: AttemptValue) -> float:
        return float(np.mean(ab_stats.task_means(_matrix(arm, tasks, value))))

    results = [a.result for a in arm.attempts]
    families = sorted({a.family for a in arm.attempts})
    return ArmSummary(
        label=arm.label,
        run_dir=str(arm.run_dir),
        tasks=len(tasks),
        attempts=len(arm.attempts),
        repeats=len(arm.attempts) / len(tasks),
        infra_errors=arm.infra_errors,
        correct_rate=mean_of(_correct),
        mean_log_speedup=mean_of(_log_speedup(options)),
        geomean_speedup=math.exp(mean_of(_log_speedup(options))),
        fast_p={f"{p:g}": mean_of(_faster_than(p)) for p in FAST_P_THRESHOLDS},
        mean_score=mean_of(_score),
        seed_overall=compute_stats(results),
        seed_by_family={f: compute_stats([r for r in results if r.task_type == f]) for f in families},
    )


def _estimate(interval: ab_stats.Interval) -> Estimate:
    return Estimate(mean=interval.mean, se=interval.se, low=interval.low, high=interval.high, p_value=interval.p_value)


def _rows(
    tasks: list[str],
    families: dict[str, str],
    a: FloatArray,
    b: FloatArray,
    ca: FloatArray,
    cb: FloatArray,
    bands: FloatArray,
) -> list[TaskRow]:
    rows = []
    for i, task in enumerate(tasks):
        diff = float(b[i] - a[i])
        outcome = "tie" if abs(diff) <= bands[i] else ("win" if diff > 0 else "loss")
        rows.append(
            TaskRow(
                task=task,
                family=families[task],
                control_speedup=math.exp(a[i]),
                treatment_speedup=math.exp(b[i]),
                control_correct=float(ca[i]),
                treatment_correct=float(cb[i]),
                log_diff=diff,
                tie_band=float(bands[i]),
                outcome=outcome,
            )
        )
    return rows


def _tie_bands(control: ArmData, treatment: ArmData, tasks: list[str], options: CompareOptions) -> FloatArray:
    """Per task, the half-width (log space) within which the arms' difference is a tie.

    An arm's half-width on a task is that of the mean of its K timed attempts, sqrt(mean(h^2) / K);
    the two arms' combine in quadrature. A task with no recorded interval gets `tie_tolerance`."""

    def arm_halfwidth(arm: ArmData) -> FloatArray:
        halves = _matrix(arm, tasks, _halfwidth)
        counts = np.sum(~np.isnan(halves), axis=1)
        result: FloatArray = np.sqrt(ab_stats.task_means(halves**2) / np.maximum(counts, 1))
        return result

    half_a, half_b = arm_halfwidth(control), arm_halfwidth(treatment)
    combined = np.sqrt(np.nan_to_num(half_a) ** 2 + np.nan_to_num(half_b) ** 2)
    recorded = ~(np.isnan(half_a) & np.isnan(half_b))
    return np.where(recorded, combined, options.tie_tolerance)


def _power(parts: ab_stats.VarianceParts, n: int, options: CompareOptions) -> PowerAnalysis:
    sd = math.sqrt(parts.diff_variance)
    mde = ab_stats.minimum_detectable_effect(sd, n, options.alpha, options.power)
    target = math.log(options.target_ratio)
    return PowerAnalysis(
        sd_diff=sd,
        within_control=parts.within_a,
        within_treatment=parts.within_b,
        within_difference=parts.within_diff,
        between_tasks=parts.between,
        mde_log=mde,
        mde_ratio=math.exp(mde) if mde is not None else None,
        target_ratio=options.target_ratio,
        power_at_target=ab_stats.t_test_power(target, sd, n, options.alpha),
        repeats_needed=ab_stats.repeats_needed(parts, target, n, options.alpha, options.power),
    )


def _warnings(
    control: ArmData, treatment: ArmData, n: int, only_a: list[str], only_b: list[str], la: FloatArray, lb: FloatArray
) -> list[str]:
    found = []
    if n < FEW_TASKS:
        found.append(f"only {n} paired tasks (< {FEW_TASKS}): intervals are wide and the normal approximations rough")
    for arm, values in ((control, la), (treatment, lb)):
        if ab_stats.mean_repeats(values) < 2:
            found.append(
                f"arm '{arm.label}' has one repeat per task: run-to-run variance cannot be separated "
                "from task differences (use repeats: 2 or more)"
            )
    if only_a or only_b:
        found.append(
            f"the arms' task sets differ: {len(only_a)} tasks only in '{control.label}', {len(only_b)} only "
            f"in '{treatment.label}'; compared on the {n} common tasks"
        )
    for arm in (control, treatment):
        if arm.infra_errors:
            found.append(f"arm '{arm.label}': {arm.infra_errors} attempts were infrastructure errors, left out")
        if arm.skipped:
            found.append(
                f"arm '{arm.label}': {arm.skipped} attempts were skipped (cannot run on this machine), left out"
            )
    return found


def _verdict(pair: PairComparison, options: CompareOptions) -> str:
    """The primary endpoint decides the speed claim: the paired t-test of the mean log-speedup (the test
    the power analysis is about); the Holm-adjusted p over all four tests is quoted beside it."""
    ratio = f"{pair.speedup_ratio:.3f}x (95% CI {pair.speedup_ratio_low:.3f}-{pair.speedup_ratio_high:.3f})"
    p, holm = pair.log_speedup.p_value, pair.holm["log_speedup_t"]
    if p < options.alpha:
        direction = "faster" if pair.log_speedup.mean > 0 else "slower"
        text = (
            f"'{pair.treatment}' is {direction} than '{pair.control}': geomean speedup ratio {ratio}, "
            f"paired t p={p:.3g} (Holm-adjusted {holm:.3g})"
        )
    else:
        text = f"no significant speed difference: ratio {ratio}, paired t p={p:.3g}"
        power = pair.power
        if power.mde_ratio is not None:
            text += f"; the smallest ratio detectable with {options.power:.0%} power here is {power.mde_ratio:.3f}x"
        if power.repeats_needed is not None:
            more = power.repeats_needed - math.ceil(min(pair.repeats_control, pair.repeats_treatment))
            text += (
                f"; {power.repeats_needed} repeats per arm ({max(more, 0)} more than now) would detect "
                f"{power.target_ratio:g}x with {options.power:.0%} power"
            )
        elif power.between_tasks is not None:
            text += f"; no number of repeats detects {power.target_ratio:g}x on {pair.tasks} tasks: add tasks"
    if pair.holm["correctness_mcnemar"] < options.alpha:
        better = pair.treatment if pair.correctness.mean > 0 else pair.control
        text += (
            f". Correctness differs (Holm p={pair.holm['correctness_mcnemar']:.3g}): '{better}' is more often correct"
        )
    return text


def compare_pair(control: ArmData, treatment: ArmData, options: CompareOptions) -> PairComparison:
    """Paired statistics of `treatment` against `control` on their common tasks."""
    tasks = sorted(control.tasks & treatment.tasks)
    if not tasks:
        raise CompareError(
            f"arms '{control.label}' and '{treatment.label}' have no task in common "
            "(compare runs of the same task selection)"
        )
    n = len(tasks)
    la, lb = (_matrix(arm, tasks, _log_speedup(options)) for arm in (control, treatment))
    ca, cb = (ab_stats.task_means(_matrix(arm, tasks, _correct)) for arm in (control, treatment))
    sa, sb = (ab_stats.task_means(_matrix(arm, tasks, _score)) for arm in (control, treatment))
    a, b = ab_stats.task_means(la), ab_stats.task_means(lb)
    diffs = b - a
    log_t = ab_stats.paired_t(diffs, options.alpha)
    boot_low, boot_high = ab_stats.bootstrap_interval(
        diffs, np.random.default_rng(options.seed), options.alpha, options.bootstrap_resamples
    )
    b_only, a_only = ab_stats.discordant_counts(ca, cb)
    p_values = {
        "log_speedup_t": log_t.p_value,
        "log_speedup_wilcoxon": ab_stats.wilcoxon_p(diffs),
        "correctness_mcnemar": ab_stats.exact_mcnemar_p(b_only, a_only),
        "score_t": ab_stats.paired_t(sb - sa, options.alpha).p_value,
    }
    rows = _rows(
        tasks,
        {t.task: t.family for t in control.attempts + treatment.attempts},
        a,
        b,
        ca,
        cb,
        _tie_bands(control, treatment, tasks, options),
    )
    parts = ab_stats.variance_parts(la, lb)
    only_a, only_b = sorted(control.tasks - treatment.tasks), sorted(treatment.tasks - control.tasks)
    pair = PairComparison(
        control=control.label,
        treatment=treatment.label,
        tasks=n,
        repeats_control=ab_stats.mean_repeats(la),
        repeats_treatment=ab_stats.mean_repeats(lb),
        only_in_control=only_a,
        only_in_treatment=only_b,
        log_speedup=_estimate(log_t),
        bootstrap_low=boot_low,
        bootstrap_high=boot_high,
        wilcoxon_p=p_values["log_speedup_wilcoxon"],
        speedup_ratio=math.exp(log_t.mean),
        speedup_ratio_low=math.exp(log_t.low),
        speedup_ratio_high=math.exp(log_t.high),
        correctness=_estimate(ab_stats.paired_t(cb - ca, options.alpha)),
        correct_b_only=b_only,
        correct_a_only=a_only,
        mcnemar_p=p_values["correctness_mcnemar"],
        score=_estimate(ab_stats.paired_t(sb - sa, options.alpha)),
        holm=ab_stats.holm(p_values),
        wins=sum(r.outcome == "win" for r in rows),
        losses=sum(r.outcome == "loss" for r in rows),
        ties=sum(r.outcome == "tie" for r in rows),
        correlation=ab_stats.correlation(a, b),
        power=_power(parts, n, options),
        verdict="",
        warnings=_warnings(control, treatment, n, only_a, only_b, la, lb),
        rows=rows,
    )
    pair.verdict = _verdict(pair, options)
    return pair


def compare_arms(arms: list[ArmData], options: CompareOptions | None = None) -> Comparison:
    """Every arm summarized; every arm after the first compared with the first."""
    options = options or CompareOptions()
    return Comparison(
        options=options,
        arms=[summarize_arm(arm, options) for arm in arms],
        pairs=[compare_pair(arms[0], arm, options) for arm in arms[1:]],
    )


def default_output_dir(run_dirs: list[Path]) -> Path:
    """Where the comparison's files go unless told: `reports/compare/` of the first run."""
    return run_dirs[0].resolve() / "reports" / "compare"
