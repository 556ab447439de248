"""The paired timer's estimate: order-balanced trimmed means and their interval (CPU; the GPU loop
is measured on the H200 by benchmarks/paired_precision.py and benchmarks/timer_offsets.py, and its
late-launch rule and its probe of a call's GPU time are tested here on a simulated GPU timeline)."""

from __future__ import annotations

import math
import random
import time
import types

import pytest
import torch

from aka.harness import paired
from aka.harness.paired import (
    LateLaunchError,
    PairedConfig,
    PairTimes,
    _baseline_first,
    _t975,
    _time_events,
    gpu_ms_per_call,
    order_balanced_speedup,
    time_paired,
    trimmed_mean_with_ci,
)


def _ratios(centre: float, count: int, noise: float, rng: random.Random) -> list[float]:
    return [centre * math.exp(rng.gauss(0.0, noise)) for _ in range(count)]


def test_a_first_position_effect_cancels() -> None:
    """Whichever side runs first is 1% slower: the baseline-first pairs read 1.01x the truth, the
    candidate-first ones 1/1.01x. With unequal counts a pooled estimate leans to the larger order."""
    rng = random.Random(0)
    truth, effect = 1.05, 1.01
    first = _ratios(truth * effect, 61, 0.001, rng)
    second = _ratios(truth / effect, 39, 0.001, rng)
    pooled, _, _ = order_balanced_speedup(first + second, [])
    balanced, low, high = order_balanced_speedup(first, second)
    assert abs(pooled / truth - 1) > 0.002
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


def test_one_order_only_is_its_own_trimmed_mean() -> None:
    values = [1.0, 1.1, 1.2, 1.3, 1.4]
    own = math.exp(trimmed_mean_with_ci([math.log(v) for v in values])[0])
    assert order_balanced_speedup(values, [])[0] == pytest.approx(own)
    assert order_balanced_speedup([], values) == order_balanced_speedup(values, [])


def test_trimmed_mean_ignores_a_fifth_of_outliers_on_each_side() -> None:
    rng = random.Random(3)
    values = [rng.gauss(0.0, 0.001) for _ in range(80)] + [0.5] * 10 + [-0.3] * 10
    centre, error, df = trimmed_mean_with_ci(values)
    assert abs(centre) < 0.0005 and error < 0.0005 and df == 59


def test_interval_covers_the_truth_about_95_percent_of_the_time() -> None:
    """Heavy-tailed per-pair noise (5% of pairs 10x noisier, as timing spikes are): the interval
    still covers the true speedup at about its nominal rate, at the evaluator's pair counts."""
    rng = random.Random(4)

    def noisy(count: int) -> list[float]:
        return [1.1 * math.exp(rng.gauss(0.0, 0.01 if rng.random() > 0.05 else 0.1)) for _ in range(count)]

    for count in (10, 40, 200):
        covered = sum(low <= 1.1 <= high for _, low, high in
                      (order_balanced_speedup(noisy(count), noisy(count)) for _ in range(400)))
        assert 0.92 <= covered / 400 <= 0.995, (count, covered)


def test_t_quantile() -> None:
    for df, value in ((1, 12.706), (2, 4.303), (3, 3.182), (5, 2.571), (10, 2.228), (30, 2.042), (1000, 1.962)):
        assert _t975(df) == pytest.approx(value, rel=0.008)


def test_each_side_starts_and_ends_as_many_batches() -> None:
    """Within a batch the order alternates; the first pair of a batch alternates between batches,
    so the pairs next to a batch's edges are not always run by the same side first."""
    batch = 10
    starts = [_baseline_first(pair, batch) for pair in range(0, 200, batch)]
    ends = [_baseline_first(pair, batch) for pair in range(batch - 1, 200, batch)]
    assert starts.count(True) == starts.count(False) == 10
    assert ends.count(True) == ends.count(False) == 10
    orders = [_baseline_first(pair, batch) for pair in range(200)]
    assert orders.count(True) == 100
    assert all(orders[i] != orders[i + 1] for i in range(200 - 1) if (i + 1) % batch)


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
    result = time_paired(source, torch.device("cpu"), PairedConfig(cpu_pairs=10))  # five per order: one
    assert result.pairs == 10 and source.checked == list(range(10))  # preempted call per order is trimmed
    assert 1.4 < result.speedup < 2.8 and result.ci_low <= result.speedup <= result.ci_high  # 2x, on a busy machine


class _SimulatedGpu:
    """A GPU timeline for the event loop on CPU: work runs in enqueue order and never starts before
    it was enqueued; an event reads the time the GPU reaches it (so idle time between a hold and a
    late launch lands inside the events, as on a real GPU)."""

    def __init__(self) -> None:
        self.free_at = 0.0

    def run(self, ms: float) -> None:
        self.free_at = max(self.free_at, time.perf_counter()) + ms / 1000.0

    def event(self) -> object:
        gpu = self

        class Event:
            at = 0.0

            def record(self) -> None:
                self.at = gpu.free_at = max(gpu.free_at, time.perf_counter())

            def elapsed_time(self, end: Event) -> float:
                return (end.at - self.at) * 1000.0

        return Event()

    def synchronize(self) -> None:
        while time.perf_counter() < self.free_at:
            pass


class _LateSource:
    """Both sides do about 0.3 ms of GPU work (1% noise); every `every`-th call of `late_side` first
    stalls the host for `stall_ms` (a garbage collection, or a thread holding the interpreter)."""

    def __init__(self, gpu: _SimulatedGpu, late_side: str, every: int, stall_ms: float) -> None:
        self.gpu, self.late_side, self.every, self.stall_ms = gpu, late_side, every, stall_ms
        self.calls = 0
        self.rng = random.Random(7)

    def _call(self, side: str) -> torch.Tensor:
        if side == self.late_side:
            self.calls += 1
            if self.calls % self.every == 0:
                time.sleep(self.stall_ms / 1000.0)
        self.gpu.run(0.3 * math.exp(self.rng.gauss(0.0, 0.01)))
        return torch.zeros(2)

    def prepare(self, index: int, checked: bool) -> None:
        pass

    def baseline(self, index: int) -> object:
        return self._call("baseline")

    def candidate(self, index: int) -> object:
        return self._call("candidate")

    def check(self, index: int, output: object) -> None:
        pass

    def release(self) -> None:
        pass


class _StallsTheBaseline(_LateSource):
    """The adversary: after each of its calls, candidate code (a thread holding the interpreter)
    stalls the next call if it is the baseline's, i.e. the baseline of every candidate-first pair."""

    def __init__(self, gpu: _SimulatedGpu, stall_ms: float) -> None:
        super().__init__(gpu, "nobody", 1, stall_ms)
        self.armed = False

    def baseline(self, index: int) -> object:
        if self.armed:
            time.sleep(self.stall_ms / 1000.0)
        self.armed = False
        return self._call("baseline")

    def candidate(self, index: int) -> object:
        self.armed = False
        output = self._call("candidate")
        self.armed = True
        return output


def _simulate(monkeypatch: pytest.MonkeyPatch, source: _LateSource, hold_ms: float, budget_s: float = 0.5,
              max_hold_ms: float = 25.0, max_pairs: int = 3000) -> paired.PairedResult:
    monkeypatch.setattr(paired, "_event", source.gpu.event)
    monkeypatch.setattr(paired, "_hold_gpu", source.gpu.run)
    monkeypatch.setattr(paired, "MAX_HOLD_MS", max_hold_ms)
    monkeypatch.setattr(torch.cuda, "synchronize", source.gpu.synchronize)
    config = PairedConfig(hold_ms=hold_ms, budget_s=budget_s, max_pairs=max_pairs, target_rel_halfwidth=1e-9)
    return _time_events(source, config, torch.zeros(4), first=0)


def test_late_launches_are_left_out_and_the_hold_lengthened(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every candidate call stalls 1.5 ms on the host behind a 0.5 ms hold. Counted as they are
    (the rule off: the hold already at its cap), idle GPU time inside its events reads as a slower
    candidate; with the rule, the late pairs are left out and the hold doubles (1, 2 ms) until the
    stall fits inside it, and A/A reads 1."""
    unruled = _simulate(monkeypatch, _LateSource(_SimulatedGpu(), "candidate", 1, 1.5), hold_ms=0.5, max_hold_ms=0.5)
    assert unruled.speedup < 0.97 and unruled.late_pairs == 0
    result = _simulate(monkeypatch, _LateSource(_SimulatedGpu(), "candidate", 1, 1.5), hold_ms=0.5)
    assert result.pairs > 30 and result.late_pairs >= 9  # the second batch (the first is all checked)
    assert result.ci_low <= 1.0 <= result.ci_high and result.speedup == pytest.approx(1.0, abs=0.005)


def test_late_baseline_launches_never_flatter_the_candidate(monkeypatch: pytest.MonkeyPatch) -> None:
    result = _simulate(monkeypatch, _LateSource(_SimulatedGpu(), "baseline", 1, 1.5), hold_ms=0.5)
    assert result.late_pairs > 0 and result.speedup == pytest.approx(1.0, abs=0.005)


@pytest.mark.parametrize(("stall_ms", "max_hold_ms"), [(5.0, 25.0), (5.0, 2.0)])
def test_a_candidate_that_stalls_the_baselines_launches_gains_nothing(
        monkeypatch: pytest.MonkeyPatch, stall_ms: float, max_hold_ms: float) -> None:
    """Stalling the host right after its own call delays the baseline of every candidate-first
    pair: counted as they came (the late check blinded), those pairs made the candidate read
    about 2.8x faster. With the rule they never count: the hold grows until the stall fits inside it, or
    (the stall longer than the longest hold) the baseline-first pairs alone are timed."""
    monkeypatch.setattr(paired, "time", types.SimpleNamespace(perf_counter=lambda: 0.0))  # nothing is ever late
    blind = _simulate(monkeypatch, _StallsTheBaseline(_SimulatedGpu(), stall_ms), hold_ms=0.5, max_pairs=200)
    assert blind.speedup > 1.5
    monkeypatch.setattr(paired, "time", time)
    result = _simulate(monkeypatch, _StallsTheBaseline(_SimulatedGpu(), stall_ms), hold_ms=0.5,
                       max_hold_ms=max_hold_ms)
    assert result.late_pairs > 0 and result.pairs >= 9
    assert result.speedup == pytest.approx(1.0, abs=0.01)


def test_at_the_longest_hold_the_late_candidate_pays_for_its_host_time(monkeypatch: pytest.MonkeyPatch) -> None:
    """Candidate calls stalling 8 ms, the hold capped at 2 ms: its pairs count from the cap on,
    with several ms of idle GPU inside each candidate call (0.3 ms of work): it reads slower."""
    result = _simulate(monkeypatch, _LateSource(_SimulatedGpu(), "candidate", 1, 8.0), hold_ms=1.0, max_hold_ms=2.0)
    assert result.pairs > 20 and result.speedup < 0.25


def test_a_baseline_always_late_is_never_timed_in_the_candidates_favour(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(LateLaunchError, match="baseline's host launches outlasted"):
        _simulate(monkeypatch, _LateSource(_SimulatedGpu(), "baseline", 1, 8.0), hold_ms=1.0, budget_s=0.3,
                  max_hold_ms=2.0)


class _SlowLaunch(_LateSource):
    """Each side's call takes `host_ms` on the host before its GPU work (`gpu_ms` per side): a
    short kernel behind a guarded Python launch path."""

    def __init__(self, gpu: _SimulatedGpu, host_ms: float, gpu_ms: tuple[float, float]) -> None:
        super().__init__(gpu, "nobody", 1, 0.0)
        self.host_ms, self.gpu_ms = host_ms, gpu_ms

    def baseline(self, index: int) -> object:
        return self._launch(0)

    def candidate(self, index: int) -> object:
        return self._launch(1)

    def _launch(self, which: int) -> object:
        time.sleep(self.host_ms / 1000.0)
        self.gpu.run(self.gpu_ms[which])
        return torch.zeros(2)


def test_the_probe_for_graph_timing_reads_gpu_time_not_launch_time(monkeypatch: pytest.MonkeyPatch) -> None:
    """A 0.01 ms kernel behind a 1 ms launch: without the hold the probe read the launch (and the
    kernel was event-timed as if it were long); behind the hold it reads the kernel. The shorter
    side decides."""
    gpu = _SimulatedGpu()
    monkeypatch.setattr(paired, "_event", gpu.event)
    monkeypatch.setattr(paired, "_hold_gpu", gpu.run)
    monkeypatch.setattr(torch.cuda, "synchronize", gpu.synchronize)
    source = _SlowLaunch(gpu, host_ms=1.0, gpu_ms=(0.3, 0.01))
    assert gpu_ms_per_call(source, PairedConfig(hold_ms=0.0), torch.zeros(4)) > 0.5
    probed = gpu_ms_per_call(source, PairedConfig(hold_ms=20.0), torch.zeros(4))
    assert probed == pytest.approx(0.01, abs=0.005) and probed < PairedConfig().graph_threshold_ms
