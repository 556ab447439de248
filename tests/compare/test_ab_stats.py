"""The paired statistics against known values, and their calibration on a few hundred simulated experiments."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from aka.compare import stats as ab_stats
from aka.compare.comparison import CompareOptions, compare_pair
from aka.compare.simulation import Scenario, calibrate, simulated_arms, true_log_effect


def test_holm_step_down_matches_the_textbook_example() -> None:
    adjusted = ab_stats.holm({"a": 0.01, "b": 0.04, "c": 0.03, "d": 0.005})
    assert adjusted == pytest.approx({"a": 0.03, "b": 0.06, "c": 0.06, "d": 0.02})


def test_exact_mcnemar_is_the_binomial_test_on_discordant_tasks() -> None:
    assert ab_stats.exact_mcnemar_p(8, 1) == pytest.approx(2 * 10 / 512)
    assert ab_stats.exact_mcnemar_p(0, 0) == 1.0
    assert ab_stats.discordant_counts(np.array([1.0, 0.0, 0.5, 1.0]), np.array([1.0, 1.0, 0.0, 0.5])) == (1, 2)


def test_paired_t_agrees_with_scipy_and_degenerate_input_is_handled() -> None:
    diffs = np.array([0.1, 0.3, -0.05, 0.2, 0.15, 0.02])
    interval = ab_stats.paired_t(diffs)
    reference = stats.ttest_rel(diffs, np.zeros_like(diffs))
    assert interval.p_value == pytest.approx(reference.pvalue)
    half = stats.t.ppf(0.975, 5) * np.std(diffs, ddof=1) / math.sqrt(6)
    assert (interval.low, interval.high) == pytest.approx((diffs.mean() - half, diffs.mean() + half))
    same = ab_stats.paired_t(np.zeros(5))
    assert (same.mean, same.low, same.high, same.p_value) == (0.0, 0.0, 0.0, 1.0)


def test_power_matches_the_noncentral_t_reference_and_inverts() -> None:
    # G*Power, paired t, two-tailed, d = 0.5, n = 30, alpha = 0.05: power 0.7540
    assert ab_stats.t_test_power(0.5, 1.0, 30) == pytest.approx(0.7540, abs=5e-4)
    mde = ab_stats.minimum_detectable_effect(1.0, 30)
    assert mde is not None and ab_stats.t_test_power(mde, 1.0, 30) == pytest.approx(0.8, abs=1e-6)
    assert ab_stats.t_test_power(0.0, 1.0, 30) == pytest.approx(0.05)
    assert ab_stats.t_test_power(5.0, 0.1, 60) == 1.0


def test_repeats_needed_is_the_first_sufficient_k_or_none() -> None:
    parts = ab_stats.VarianceParts(
        diff_variance=0.03, within_a=0.02, within_b=0.02, within_diff=0.04, between=0.001, repeats=2
    )
    k = ab_stats.repeats_needed(parts, 0.05, 30)
    assert k is not None and k > 1
    sd_k, sd_before = ab_stats.diff_sd_at(parts, k), ab_stats.diff_sd_at(parts, k - 1)
    assert sd_k is not None and sd_before is not None
    assert ab_stats.t_test_power(0.05, sd_k, 30) >= 0.8 > ab_stats.t_test_power(0.05, sd_before, 30)
    unknown = ab_stats.VarianceParts(0.03, None, None, None, None, 1)
    assert ab_stats.repeats_needed(unknown, 0.05, 30) is None
    hopeless = ab_stats.VarianceParts(0.5, 0.01, 0.01, 0.02, 0.5, 2)
    assert ab_stats.repeats_needed(hopeless, 0.05, 30) is None


def test_variance_parts_recover_within_and_between_task_variance() -> None:
    rng = np.random.default_rng(3)
    truth = rng.normal(0, 0.3, 4000)
    a = truth[:, None] + rng.normal(0, 0.1, (4000, 3))
    b = truth[:, None] + rng.normal(0, 0.2, 4000)[:, None] + rng.normal(0, 0.1, (4000, 3))
    parts = ab_stats.variance_parts(a, b)
    assert parts.within_a == pytest.approx(0.01, rel=0.05) and parts.within_b == pytest.approx(0.01, rel=0.05)
    assert parts.within_diff == pytest.approx(0.02, rel=0.05) and parts.between == pytest.approx(0.04, rel=0.1)
    with_gap = a.copy()
    with_gap[0, 1] = np.nan
    assert ab_stats.task_means(with_gap)[0] == pytest.approx(np.mean(a[0, [0, 2]]))


def test_noise_the_arms_share_in_a_round_cancels_in_the_plan() -> None:
    """Drift common to both arms of a round is not run-to-run noise of the difference."""
    rng = np.random.default_rng(4)
    shared = rng.normal(0, 0.3, (200, 2))
    a = shared + rng.normal(0, 0.01, (200, 2))
    b = shared + 0.02 + rng.normal(0, 0.01, (200, 2))
    parts = ab_stats.variance_parts(a, b)
    assert parts.within_a is not None and parts.within_a > 0.05
    assert parts.within_diff == pytest.approx(2 * 0.01**2, rel=0.25)
    sd_now = ab_stats.diff_sd_at(parts, 2)
    assert sd_now is not None and sd_now == pytest.approx(math.sqrt(parts.diff_variance), rel=0.1)
    assert ab_stats.repeats_needed(parts, 0.02, 200) == 1


def test_repeats_are_clustered_on_their_task() -> None:
    """Duplicating every repeat must not narrow the interval: the task, not the attempt, is the unit."""
    scenario = Scenario("x", tasks=20, repeats=2, effect=0.05)
    control, treatment = simulated_arms(scenario, np.random.default_rng(1))
    options = CompareOptions(bootstrap_resamples=200)
    once = compare_pair(control, treatment, options)
    for arm in (control, treatment):
        arm.attempts = arm.attempts + [a.__class__(**{**a.__dict__, "repeat": a.repeat + 2}) for a in arm.attempts]
    twice = compare_pair(control, treatment, options)
    assert (twice.log_speedup.low, twice.log_speedup.high) == pytest.approx(
        (once.log_speedup.low, once.log_speedup.high)
    )


@pytest.mark.parametrize(
    "scenario", [Scenario("A/A", tasks=30, repeats=2), Scenario("A/B", tasks=30, repeats=2, effect=0.08)]
)
def test_intervals_cover_and_tests_hold_their_level_in_simulation(scenario: Scenario) -> None:
    """300 simulated experiments: a binomial SE of about 1.3 points on coverage, 1.3 on the A/A level."""
    calibration = calibrate(scenario, 300, seed=11, bootstrap_resamples=400)
    assert calibration.true_effect == pytest.approx(true_log_effect(scenario))
    assert 0.92 <= calibration.t_coverage <= 0.98
    assert 0.91 <= calibration.bootstrap_coverage <= 0.98
    if scenario.effect == 0.0:
        assert all(rate <= 0.085 for rate in calibration.rejections.values()), calibration.rejections
        assert calibration.holm_any <= 0.085
    else:
        assert calibration.t_detection > 0.3
        assert abs(calibration.predicted_power_estimated - calibration.t_detection) < 0.08
