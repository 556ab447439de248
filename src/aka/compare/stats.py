"""Paired statistics for two arms over one task set, with repeats clustered on their task.

Everything works on per-task values: with K repeats per task and arm, each task's repeats are
averaged first, so the unit of replication is the task and K repeats never count as K
independent observations (docs/comparing.md; /work/shared/AB_STATS.md). The distribution
functions come from scipy; this module only arranges them.

Power follows the variance decomposition Var(d_i) = omega^2 + sigma_d^2/K, where omega^2 is the
between-task variance of the true differences and sigma_d^2 the run-to-run variance of one
round's difference within a task (sigma_A^2 + sigma_B^2 when the arms' noise is independent;
estimated from the repeats, so only when K >= 2). The power of the paired t-test is computed
exactly from the noncentral t distribution.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray
from scipy import optimize, stats

FloatArray = NDArray[np.float64]
DEFAULT_POWER = 0.8
MAX_REPEATS_SEARCHED = 1000


@dataclass(frozen=True)
class Interval:
    """A mean difference with its standard error, two-sided interval and p-value (H0: zero)."""

    mean: float
    se: float
    low: float
    high: float
    p_value: float


@dataclass(frozen=True)
class VarianceParts:
    """The pieces of Var(d_i): the total observed; each arm's within-task variance and that of the
    round-paired differences (None at K = 1); the between-task rest; the repeats behind them."""

    diff_variance: float
    within_a: float | None
    within_b: float | None
    within_diff: float | None
    between: float | None
    repeats: float


def task_means(values: FloatArray) -> FloatArray:
    """Per-task mean over repeats of a (tasks x repeats) array; NaN marks a missing repeat."""
    counts = np.sum(~np.isnan(values), axis=1)
    sums = np.nansum(values, axis=1)
    return np.where(counts > 0, sums / np.maximum(counts, 1), np.nan)


def within_task_variance(values: FloatArray) -> float | None:
    """Mean over tasks of the sample variance of the repeats (tasks with at least two repeats)."""
    counts = np.sum(~np.isnan(values), axis=1)
    rows = values[counts >= 2]
    if rows.shape[0] == 0:
        return None
    return float(np.mean(np.nanvar(rows, axis=1, ddof=1)))


def mean_repeats(values: FloatArray) -> float:
    return float(np.mean(np.sum(~np.isnan(values), axis=1)))


def paired_t(diffs: FloatArray, alpha: float = 0.05) -> Interval:
    """Mean of per-task differences with its t-interval and the one-sample t-test's p-value.

    One task gives no interval (NaN bounds, p = 1); identical differences on every task give a
    zero-width interval (p = 0 unless they are all zero)."""
    n = diffs.size
    mean = float(np.mean(diffs))
    if n < 2:
        return Interval(mean, math.nan, math.nan, math.nan, 1.0)
    se = float(np.std(diffs, ddof=1)) / math.sqrt(n)
    if se == 0.0:
        return Interval(mean, 0.0, mean, mean, 1.0 if mean == 0.0 else 0.0)
    test = stats.ttest_1samp(diffs, 0.0)
    ci = test.confidence_interval(confidence_level=1.0 - alpha)
    return Interval(mean, se, float(ci.low), float(ci.high), float(test.pvalue))


def bootstrap_interval(
    diffs: FloatArray, rng: np.random.Generator, alpha: float = 0.05, resamples: int = 2000
) -> tuple[float, float]:
    """Studentized (bootstrap-t) interval of the mean difference, resampling whole tasks.

    A task is resampled with its repeats (they are already averaged into its difference), so
    repeats are never treated as independent. The studentized form keeps its coverage at 30 tasks,
    where scipy's percentile and BCa intervals of a mean cover 91-93% (docs/benchmarks). Fewer than
    three tasks give no interval (NaN)."""
    n = diffs.size
    mean = float(np.mean(diffs))
    if n < 3:
        return math.nan, math.nan
    if float(np.ptp(diffs)) == 0.0:
        return mean, mean
    se = float(np.std(diffs, ddof=1)) / math.sqrt(n)
    samples = diffs[rng.integers(0, n, size=(resamples, n))]
    ses = np.std(samples, axis=1, ddof=1) / math.sqrt(n)
    usable = ses > 0
    studentized = (np.mean(samples, axis=1)[usable] - mean) / ses[usable]
    low_q, high_q = np.quantile(studentized, [alpha / 2.0, 1.0 - alpha / 2.0])
    return mean - float(high_q) * se, mean - float(low_q) * se


def wilcoxon_p(diffs: FloatArray) -> float:
    """Wilcoxon signed-rank test of the per-task differences (zero differences dropped)."""
    if not np.any(diffs != 0.0):
        return 1.0
    return float(stats.wilcoxon(diffs, zero_method="wilcox").pvalue)


def discordant_counts(rate_a: FloatArray, rate_b: FloatArray) -> tuple[int, int]:
    """Tasks where B's correctness rate is above A's, and where it is below."""
    return int(np.sum(rate_b > rate_a)), int(np.sum(rate_b < rate_a))


def exact_mcnemar_p(b_better: int, a_better: int) -> float:
    """Exact McNemar test: the discordant tasks split 50/50 under H0 (a binomial test).

    With K = 1 a task is discordant when exactly one arm was correct; with repeats, when the arms'
    correctness rates differ (the sign test on the task's rates, which is McNemar at K = 1)."""
    discordant = b_better + a_better
    if discordant == 0:
        return 1.0
    return float(stats.binomtest(b_better, discordant, 0.5).pvalue)


def holm(p_values: dict[str, float]) -> dict[str, float]:
    """Holm's step-down adjusted p-values (family-wise error control across the metrics)."""
    names = sorted(p_values, key=lambda name: p_values[name])
    m, running, adjusted = len(names), 0.0, {}
    for rank, name in enumerate(names):
        running = max(running, min(1.0, (m - rank) * p_values[name]))
        adjusted[name] = running
    return {name: adjusted[name] for name in p_values}


def correlation(a: FloatArray, b: FloatArray) -> float | None:
    """Pearson correlation of the arms' per-task values; None when either arm is constant."""
    if a.size < 3 or float(np.std(a)) == 0.0 or float(np.std(b)) == 0.0:
        return None
    return float(np.corrcoef(a, b)[0, 1])


def variance_parts(a: FloatArray, b: FloatArray) -> VarianceParts:
    """Split Var(d_i) of two (tasks x repeats) arrays into a within-task and a between-task part.

    The within-task part is estimated from the differences of the arms' repeats paired by their
    index (the same round of an interleaved run), so noise the arms share in a round (drift, a
    busy machine) cancels as it does in d_i; for independent runs the pairing is arbitrary and the
    estimate is sigma_A^2 + sigma_B^2 as the textbook formula has it."""
    diffs = task_means(b) - task_means(a)
    total = float(np.var(diffs, ddof=1)) if diffs.size > 1 else 0.0
    width = min(a.shape[1], b.shape[1])
    paired = b[:, :width] - a[:, :width]
    within = within_task_variance(paired)
    repeats = mean_repeats(paired)
    between = None if within is None else max(0.0, total - within / repeats)
    return VarianceParts(total, within_task_variance(a), within_task_variance(b), within, between, repeats)


def t_test_power(effect: float, sd_diff: float, n: int, alpha: float = 0.05) -> float:
    """Power of the two-sided paired t-test for a true mean difference `effect` (noncentral t)."""
    if n < 2:
        return 0.0
    if sd_diff <= 0.0:
        return 1.0 if effect != 0.0 else alpha
    df = n - 1
    noncentrality = effect / (sd_diff / math.sqrt(n))
    critical = float(stats.t.ppf(1.0 - alpha / 2.0, df))
    power = float(stats.nct.sf(critical, df, noncentrality) + stats.nct.cdf(-critical, df, noncentrality))
    if not math.isfinite(power):  # scipy's nct loses precision far in the tail: power is then ~1
        power = float(stats.norm.sf(critical - abs(noncentrality)))
    return min(1.0, max(alpha, power)) if effect != 0.0 else alpha


def minimum_detectable_effect(
    sd_diff: float, n: int, alpha: float = 0.05, power: float = DEFAULT_POWER
) -> float | None:
    """The smallest true difference the paired t-test detects with probability `power`."""
    if n < 2 or sd_diff <= 0.0:
        return None
    upper = sd_diff * (float(stats.t.ppf(1.0 - alpha / 2.0, n - 1)) + 10.0) / math.sqrt(n)
    return float(optimize.brentq(lambda e: t_test_power(e, sd_diff, n, alpha) - power, 0.0, upper))


def diff_sd_at(parts: VarianceParts, repeats: float) -> float | None:
    """The sd of d_i if both arms ran `repeats` repeats per task (None without a within-task estimate)."""
    if parts.between is None or parts.within_diff is None:
        return None
    return math.sqrt(parts.between + parts.within_diff / repeats)


def repeats_needed(
    parts: VarianceParts, effect: float, n: int, alpha: float = 0.05, power: float = DEFAULT_POWER
) -> int | None:
    """The fewest repeats per arm at which the test detects `effect` with `power` over the same n tasks.

    None when it cannot be known (K = 1: no within-task estimate) or no number of repeats is
    enough (the between-task variance alone hides the effect: more tasks are needed)."""
    if diff_sd_at(parts, 1.0) is None or t_test_power(effect, math.sqrt(parts.between or 0.0), n, alpha) < power:
        return None
    for k in range(1, MAX_REPEATS_SEARCHED + 1):
        sd = diff_sd_at(parts, k)
        if sd is not None and t_test_power(effect, sd, n, alpha) >= power:
            return k
    return None
