"""Synthetic A/B experiments with a known true effect, to check that `aka compare` is honest.

The model (per experiment, tasks drawn afresh from the population):
- a task's control log-speedup when correct: mu_i ~ N(base_log_speedup, task_sd); the treatment's
  is mu_i + effect + u_i, u_i ~ N(0, interaction_sd) (the arms disagree more on some tasks);
- a task's chance of a correct attempt: sigmoid(a_i), a_i ~ N(logit(correct_rate), correct_sd), the
  treatment's sigmoid(a_i + correct_shift); correctness is independent of speed;
- each attempt adds run-to-run noise N(0, run_sd) and timing noise N(0, timing_sd), and records the
  timing interval +-1.96 timing_sd around its measured speedup, as a real result would; noise
  N(0, round_sd) is shared by both arms' attempts of one round (drift of the machine that the
  interleaved order makes common to the arms);
- an incorrect attempt counts as speedup 1.0 (log 0), the comparison's default convention.

Every attempt becomes a real `TaskResult`, so the whole path (attempts, repeats clustered on their
task, the paired tests, Holm, power) is exercised exactly as on a run directory.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from scipy import integrate, special, stats

from aka.compare.comparison import CompareOptions, PairComparison, compare_pair
from aka.compare.runs import ArmData, Attempt
from aka.compare.stats import t_test_power
from aka.results.task_result import TaskResult, TaskStatus

Z95 = 1.959963984540054


@dataclass(frozen=True)
class Scenario:
    name: str
    tasks: int = 30
    repeats: int = 2
    effect: float = 0.0
    correct_shift: float = 0.0
    base_log_speedup: float = 0.2
    task_sd: float = 0.3
    interaction_sd: float = 0.05
    run_sd: float = 0.08
    round_sd: float = 0.0
    timing_sd: float = 0.02
    correct_rate: float = 0.85
    correct_sd: float = 1.0


def mean_correct_rate(logit_mean: float, logit_sd: float) -> float:
    """E[sigmoid(a)] for a ~ N(logit_mean, logit_sd): the population correctness rate."""
    value, _ = integrate.quad(lambda z: special.expit(logit_mean + logit_sd * z) * stats.norm.pdf(z), -12, 12)
    return float(value)


def true_log_effect(s: Scenario) -> float:
    """The population mean of the per-task log-speedup difference, failures counted as log 1 = 0."""
    logit = math.log(s.correct_rate / (1.0 - s.correct_rate))
    p_a = mean_correct_rate(logit, s.correct_sd)
    p_b = mean_correct_rate(logit + s.correct_shift, s.correct_sd)
    return p_b * (s.base_log_speedup + s.effect) - p_a * s.base_log_speedup


def _draw(s: Scenario, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Measured log-speedups and correctness, each (arms=2, tasks, repeats)."""
    mu = rng.normal(s.base_log_speedup, s.task_sd, s.tasks)
    means = np.stack([mu, mu + s.effect + rng.normal(0.0, s.interaction_sd, s.tasks)])
    logit = rng.normal(math.log(s.correct_rate / (1.0 - s.correct_rate)), s.correct_sd, s.tasks)
    p = special.expit(np.stack([logit, logit + s.correct_shift]))
    shape = (2, s.tasks, s.repeats)
    shared = rng.normal(0.0, s.round_sd, (1, s.tasks, s.repeats))
    measured = means[:, :, None] + shared + rng.normal(0.0, s.run_sd, shape) + rng.normal(0.0, s.timing_sd, shape)
    correct = rng.random(shape) < p[:, :, None]
    return measured, correct, means, p


def _attempt(task: int, repeat: int, log_speedup: float, correct: bool, timing_sd: float) -> Attempt:
    speedup = math.exp(log_speedup)
    result = TaskResult(
        task_name=f"sim/t{task:03d}",
        task_type="sim",
        pass_compilation=True,
        pass_correctness=correct,
        speedup_ratio=speedup if correct else None,
        speedup_ci_low=speedup * math.exp(-Z95 * timing_sd) if correct else None,
        speedup_ci_high=speedup * math.exp(Z95 * timing_sd) if correct else None,
        score=120.0 + 100.0 * speedup if correct else 20.0,
        status=TaskStatus.PASS if correct else TaskStatus.PARTIAL,
        repeat=repeat,
    )
    return Attempt(
        task=result.task_name,
        family="sim",
        repeat=repeat,
        correct=correct,
        speedup=speedup if correct else None,
        score=result.score,
        log_halfwidth=Z95 * timing_sd if correct else None,
        result=result,
    )


def simulated_arms(s: Scenario, rng: np.random.Generator) -> tuple[ArmData, ArmData]:
    measured, correct, _, _ = _draw(s, rng)
    arms = []
    for arm, label in enumerate(("A", "B")):
        data = ArmData(label=label, run_dir=Path("simulated"))
        data.attempts = [
            _attempt(t, k + 1, float(measured[arm, t, k]), bool(correct[arm, t, k]), s.timing_sd)
            for t in range(s.tasks)
            for k in range(s.repeats)
        ]
        arms.append(data)
    return arms[0], arms[1]


def true_diff_sd(s: Scenario, rng: np.random.Generator, tasks: int = 200_000) -> float:
    """The sd of a task's repeat-averaged log-speedup difference, from a large draw of the model."""
    big = Scenario(**{**s.__dict__, "tasks": tasks})
    measured, correct, _, _ = _draw(big, rng)
    values = np.where(correct, measured, 0.0).mean(axis=2)
    return float(np.std(values[1] - values[0], ddof=1))


@dataclass(frozen=True)
class Calibration:
    """How one scenario's comparisons behaved over many simulated experiments."""

    scenario: Scenario
    experiments: int
    true_effect: float
    t_coverage: float
    bootstrap_coverage: float
    rejections: dict[str, float]
    holm_any: float
    predicted_power_true_sd: float
    predicted_power_estimated: float
    t_detection: float


def calibrate(s: Scenario, experiments: int, seed: int = 0, bootstrap_resamples: int = 1000) -> Calibration:
    """Run `experiments` simulated comparisons of one scenario and tally coverage and rejections."""
    rng = np.random.default_rng(seed)
    options = CompareOptions(bootstrap_resamples=bootstrap_resamples, seed=seed)
    effect = true_log_effect(s)
    sd_true = true_diff_sd(s, np.random.default_rng(seed + 1))
    t_cover = boot_cover = 0
    reject: dict[str, int] = {}
    holm_any = 0
    estimated_power = 0.0
    for _ in range(experiments):
        pair: PairComparison = compare_pair(*simulated_arms(s, rng), options)
        t_cover += pair.log_speedup.low <= effect <= pair.log_speedup.high
        boot_cover += pair.bootstrap_low <= effect <= pair.bootstrap_high
        for name, p in (
            {
                "log_speedup_t": pair.log_speedup.p_value,
                "log_speedup_wilcoxon": pair.wilcoxon_p,
                "correctness_mcnemar": pair.mcnemar_p,
                "score_t": pair.score.p_value,
            }
        ).items():
            reject[name] = reject.get(name, 0) + (p < options.alpha)
        holm_any += min(pair.holm.values()) < options.alpha
        estimated_power += t_test_power(effect, pair.power.sd_diff, s.tasks, options.alpha)
    return Calibration(
        scenario=s,
        experiments=experiments,
        true_effect=effect,
        t_coverage=t_cover / experiments,
        bootstrap_coverage=boot_cover / experiments,
        rejections={k: v / experiments for k, v in reject.items()},
        holm_any=holm_any / experiments,
        predicted_power_true_sd=t_test_power(effect, sd_true, s.tasks, options.alpha),
        predicted_power_estimated=estimated_power / experiments,
        t_detection=reject["log_speedup_t"] / experiments,
    )


def planned_repeats(s: Scenario, experiments: int, seed: int = 0) -> list[int | None]:
    """The repeats per arm each simulated experiment recommends for detecting the true effect."""
    rng = np.random.default_rng(seed)
    options = CompareOptions(bootstrap_resamples=100, target_ratio=math.exp(true_log_effect(s)), seed=seed)
    return [compare_pair(*simulated_arms(s, rng), options).power.repeats_needed for _ in range(experiments)]
