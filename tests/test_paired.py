"""The paired timer's estimate: order-balanced medians and their interval (CPU; the GPU loop is
measured on the H200 by benchmarks/paired_precision.py)."""

from __future__ import annotations

import math
import random

import pytest
import torch

from aka.harness.paired import PairedConfig, PairTimes, median_with_ci, order_balanced_speedup, time_paired


def _ratios(centre: float, count: int, noise: float, rng: random.Random) -> list[float]:
    return [centre * math.exp(rng.gauss(0.0, noise)) for _ in range(count)]


def test_a_first_position_effect_cancels() -> None:
    """Whichever side runs first is 1% slower: the baseline-first pairs read 1.01x the truth, the
    candidate-first ones 1/1.01x. With unequal counts a pooled median sits on one mode."""
    rng = random.Random(0)
    truth, effect = 1.05, 1.01
    first = _ratios(truth * effect, 61, 0.001, rng)
    second = _ratios(truth / effect, 39, 0.001, rng)
    pooled, _, _ = median_with_ci(first + second)
    balanced, low, high = order_balanced_speedup(first, second)
    assert abs(pooled / truth - 1) > 0.008
    assert balanced == pytest.approx(truth, rel=5e-4)
    assert low < truth < high


def test_interval_covers_the_truth_and_narrows_with_pairs() -> None:
    rng = random.Random(1)
    widths = []
    for count in (40, 400, 4000):
        speedup, low, high = order_balanced_speedup(_ratios(1.2, count, 0.01, rng), _ratios(1.2, count, 0.01, rng))
        assert low <= 1.2 <= high and low < speedup < high
        widths.append(high - low)
    assert widths[0] > 2.5 * widths[1] > 2.5 * 2.5 * widths[2]


def test_one_order_only_is_its_median() -> None:
    values = [1.0, 1.1, 1.2, 1.3, 1.4]
    assert order_balanced_speedup(values, []) == median_with_ci(values)
    assert order_balanced_speedup([], values) == median_with_ci(values)


def test_pair_times_split_orders_and_stop_on_width() -> None:
    times = PairTimes()
    rng = random.Random(2)
    for index in range(200):
        base = 2.0 * math.exp(rng.gauss(0, 0.002))
        times.add(base * (1.01 if index % 2 == 0 else 1 / 1.01), 1.0, index % 2 == 0)
    times.add(0.0, 1.0, True)  # an unusable pair is dropped
    result = times.result("m")
    assert result.pairs == 200 and result.speedup == pytest.approx(2.0, rel=1e-3)
    assert times.narrow(PairedConfig(target_rel_halfwidth=0.002, min_pairs=20))
    assert not times.narrow(PairedConfig(target_rel_halfwidth=0.002, min_pairs=500))


class _CpuSource:
    """Baseline sleeps twice as long as the candidate; every candidate output is checked."""

    def __init__(self) -> None:
        self.checked: list[int] = []

    def prepare(self, index: int, checked: bool) -> None:
        pass

    def baseline(self, index: int) -> object:
        _spin(0.004)
        return torch.zeros(1)

    def candidate(self, index: int) -> object:
        _spin(0.002)
        return torch.zeros(1)

    def check(self, index: int, output: object) -> None:
        self.checked.append(index)

    def release(self) -> None:
        pass


def _spin(seconds: float) -> None:
    import time

    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def test_cpu_pairs_alternate_and_check_every_candidate_output() -> None:
    source = _CpuSource()
    result = time_paired(source, torch.device("cpu"), PairedConfig(cpu_pairs=4))
    assert result.pairs == 4 and source.checked == [0, 1, 2, 3]
    assert 1.6 < result.speedup < 2.4 and result.ci_low <= result.speedup <= result.ci_high
