"""Paired timing: baseline and candidate in one process, interleaved, with a confidence interval.

Why paired: compute-bound kernels drift 2-5% between processes (clocks, power), which swamps a 2%
real gain; timing A and B alternately (ABBA order) in one process makes each pair see the same
conditions, and a robust mean of per-pair ratios (20%-trimmed, of their logs) cancels slow
drift. Every pair gets freshly drawn inputs (new values at new addresses), and the L2 is flushed
(a buffer of at least twice its size is zeroed) before every timed call, so neither a warm cache
nor memoisation by pointer or by value pays. Pairs are taken in batches until the 95% interval
of the speedup is narrow enough or the case's time budget is spent.

Three things would otherwise bias an A/A comparison, measured on the H200
(docs/benchmarks/2026-11-29_timer_precision_h200.md, 2026-11-30_timer_bias_h200.md):
- where a call's output lands: both calls of a pair start from the same allocator state (the
  first call's output is filled with NaN and freed before the second runs), so both write to the
  same addresses. The pairs whose candidate output is kept for a check are timed and checked but
  left out of the statistics, since a kept output moves the other side's;
- which side runs first: the speedup is the geometric mean of the pairs run baseline-first and
  of those run candidate-first, which cancels a first-position effect exactly (a pooled estimate
  lands anywhere between the two orders' modes);
- the edges of a batch (the first call after the GPU idled, the last before a synchronize): an
  untimed call stands at both edges, and the side that runs first alternates between batches.

Before each timed call the GPU is also held busy for a moment (a sleep kernel, longer than the
host takes to enqueue either side's call), so the host's launch work is never inside the events:
only GPU time is compared. A pair in which a launch still came later than its hold is left out.

Kernels under about 20 us cannot be timed per call by events (the events' own resolution and
launch latency dominate), so they are timed by replaying a CUDA graph of many calls; before the
check of a graph's outputs they are poisoned, so work the graph does not contain is caught.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import random
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

import torch

from aka.harness.guard import fill_sentinel
from aka.harness.timing import flush_buffer

EVENT_METHOD = "paired_cuda_event_l2flush"
GRAPH_METHOD = "paired_cuda_graph_replay"
CPU_METHOD = "paired_wall_clock"



class PairSource(Protocol):
    """What is timed. `prepare(i, checked)` draws pair i's inputs (and, when `checked`, keeps
    what `check` needs); `release()` drops every prepared pair not needed any more."""

    def prepare(self, index: int, checked: bool) -> None: ...

    def baseline(self, index: int) -> object: ...

    def candidate(self, index: int) -> object: ...

    def check(self, index: int, output: object) -> None: ...

    def release(self) -> None: ...


class HiddenWorkError(Exception):
    """The candidate's work does not finish on the timed stream (e.g. a side stream)."""


class LateLaunchError(Exception):
    """No pair could be timed fairly: the baseline's launches came later than the longest hold in
    every one (candidate code stalling the host during the baseline's calls, or a baseline whose
    launch work outlasts the hold)."""


@dataclass(frozen=True)
class PairedConfig:
    warmup: int = 2
    min_pairs: int = 20
    max_pairs: int = 3000
    batch: int = 10
    target_rel_halfwidth: float = 0.001
    budget_s: float = 1.0
    step_budget_s: float = 4.0
    min_budget_s: float = 0.3
    hold_ms: float = 0.05
    graph_threshold_ms: float = 0.020
    graph_replay_ms: float = 0.5
    cpu_pairs: int = 3
    loads: int = 3  # separate loads of each side's code, called in turn (the performance step)

    def for_cases(self, count: int) -> PairedConfig:
        """Per-case budget when a step times `count` cases: the step's budget shared out, so that
        a task with many cases still evaluates in seconds (never under `min_budget_s` a case)."""
        share = self.step_budget_s / max(count, 1)
        return dataclasses.replace(self, budget_s=min(self.budget_s, max(self.min_budget_s, share)))


@dataclass(frozen=True)
class PairedResult:
    baseline_ms: float
    candidate_ms: float
    speedup: float
    ci_low: float
    ci_high: float
    pairs: int
    method: str
    late_pairs: int = 0  # dropped: a side's host launch outlasted the hold (see `_time_events`)


TRIM = 0.2


def _t975(df: int) -> float:
    """Student's t 97.5% quantile: exact below 3 degrees of freedom, else Cornish-Fisher in 1/df
    (within 0.3% from 4 up)."""
    if df < 3:
        return (12.706, 4.303)[max(df, 1) - 1]
    z = 1.959964
    return z + (z**3 + z) / (4 * df) + (5 * z**5 + 16 * z**3 + 3 * z) / (96 * df**2) + (
        3 * z**7 + 19 * z**5 + 17 * z**3 - 15 * z) / (384 * df**3)


def trimmed_mean_with_ci(values: list[float], trim: float = TRIM) -> tuple[float, float, int]:
    """The `trim`-trimmed mean, its standard error (Tukey-McLaughlin: the winsorized spread) and
    degrees of freedom. Why not the median: on the H200's per-pair ratios the 20%-trimmed mean
    needs about a third fewer pairs for the same precision, and still ignores a fifth of outliers
    on each side (docs/benchmarks/2026-11-30_timer_bias_h200.md)."""
    ordered = sorted(values)
    n = len(ordered)
    cut = int(n * trim)
    kept = ordered[cut:n - cut]
    centre = statistics.fmean(kept)
    if n < 3:
        return centre, (ordered[-1] - ordered[0]) / 2, 1
    winsorized = [min(max(v, kept[0]), kept[-1]) for v in ordered]
    error = statistics.stdev(winsorized) / ((1 - 2 * cut / n) * math.sqrt(n))
    return centre, error, max(len(kept) - 1, 1)


def order_balanced_speedup(baseline_first: list[float], candidate_first: list[float]) -> tuple[float, float, float]:
    """Speedup and 95% interval from the per-pair ratios of each order: the trimmed means of the
    log ratios of the two orders, averaged, so that an effect of running first cancels exactly
    (a pooled estimate lands anywhere between the two orders' modes). One order only: its own."""
    centre = variance = 0.0
    degrees: list[int] = []
    orders = [ratios for ratios in (baseline_first, candidate_first) if ratios]
    for ratios in orders:
        mean, error, df = trimmed_mean_with_ci([math.log(r) for r in ratios])
        centre += mean / len(orders)
        variance += (error / len(orders)) ** 2
        degrees.append(df)
    half = _t975(min(degrees)) * math.sqrt(variance)
    return math.exp(centre), math.exp(centre - half), math.exp(centre + half)


@dataclass
class PairTimes:
    """Per-pair times of each side, and which side ran first."""

    base: list[float] = field(default_factory=list)
    cand: list[float] = field(default_factory=list)
    baseline_first: list[bool] = field(default_factory=list)

    def add(self, base_ms: float, cand_ms: float, baseline_first: bool) -> None:
        if base_ms > 0 and cand_ms > 0:
            self.base.append(base_ms)
            self.cand.append(cand_ms)
            self.baseline_first.append(baseline_first)

    def estimate(self) -> tuple[float, float, float]:
        ratios: dict[bool, list[float]] = {True: [], False: []}
        for base, cand, first in zip(self.base, self.cand, self.baseline_first, strict=True):
            ratios[first].append(base / cand)
        return order_balanced_speedup(ratios[True], ratios[False])

    def narrow(self, config: PairedConfig) -> bool:
        if len(self.base) < config.min_pairs:
            return False
        speedup, low, high = self.estimate()
        return (high - low) / 2 <= config.target_rel_halfwidth * speedup

    def result(self, method: str, late_pairs: int = 0) -> PairedResult:
        speedup, low, high = self.estimate()
        return PairedResult(statistics.median(self.base), statistics.median(self.cand), speedup, low, high,
                            len(self.base), method, late_pairs)


@functools.cache
def _cycles_per_ms() -> int:
    rate_khz = getattr(torch.cuda.get_device_properties(torch.cuda.current_device()), "clock_rate", 0) or 1_500_000
    return int(rate_khz)


def _hold_gpu(milliseconds: float) -> None:
    """Keep the GPU busy while the host enqueues the timed call: otherwise the events also count
    the host's launch work (Python, guards, the launcher), which differs between the two sides."""
    if milliseconds > 0:
        torch.cuda._sleep(int(milliseconds * _cycles_per_ms()))  # type: ignore[no-untyped-call]


MAX_HOLD_MS = 25.0


def _hold_for(source: PairSource, minimum_ms: float) -> float:
    """A hold longer than either side's host enqueue time (1.5x + 50 us), so the events see only
    GPU work: a torch-heavy workload (an e2e block) can take longer to launch than to run."""
    source.prepare(1, False)
    host: list[float] = []
    for rep in range(3):
        for side in (source.baseline, source.candidate) if rep % 2 == 0 else (source.candidate, source.baseline):
            start = time.perf_counter()
            side(1)
            host.append((time.perf_counter() - start) * 1000.0)
            torch.cuda.synchronize()
    source.release()
    return min(MAX_HOLD_MS, max(minimum_ms, 1.5 * statistics.median(sorted(host)[-3:]) + 0.05))


def gpu_ms_per_call(source: PairSource, config: PairedConfig, flush: torch.Tensor, reps: int = 3) -> float:
    """GPU time of one call of the shorter side (median of `reps`), each call behind a hold as
    the timed calls are. Why the hold: without it the events also count the host's launch work,
    and on the H200 the guards' launch path alone made 7-19 us kernels read over the 20 us line,
    so they were timed per call by events (a case read 0.96-1.02 across A/A evaluations) instead
    of by graph replays. Why the shorter side: the speedup is only as precise as its faster call."""
    source.prepare(0, False)
    marks: dict[int, list[tuple[torch.cuda.Event, torch.cuda.Event]]] = {0: [], 1: []}
    for rep in range(reps):
        for which in ((0, 1) if rep % 2 == 0 else (1, 0)):
            flush.zero_()
            _hold_gpu(config.hold_ms)
            start, end = _event(), _event()
            start.record()
            _ = source.candidate(0) if which else source.baseline(0)
            end.record()
            marks[which].append((start, end))
    torch.cuda.synchronize()
    source.release()
    return min(float(statistics.median(start.elapsed_time(end) for start, end in side)) for side in marks.values())


def _event() -> torch.cuda.Event:
    return torch.cuda.Event(enable_timing=True)  # type: ignore[no-untyped-call]


def _baseline_first(pair: int, batch: int) -> bool:
    """Which side runs first: alternating within a batch, and the batch's first pair alternating
    too, so neither side is always the one next to a batch's edges."""
    return (pair + pair // batch) % 2 == 0


def _untimed(flush: torch.Tensor, config: PairedConfig, call: Callable[[], object]) -> None:
    """A call in the timed calls' conditions, not timed: it stands at both edges of a batch. On
    the H200 the first timed call after the GPU idled (a batch starts after a synchronize and the
    host's checks) read 0.15-0.19% slower than its pair partner, and the last one before the
    synchronize 0.03-0.05%; since the same side always stood there, that was a bias of +0.03%
    in A/A (docs/benchmarks/2026-11-30_timer_bias_h200.md)."""
    flush.zero_()
    _hold_gpu(config.hold_ms)
    _poison(call())


def _time_events(source: PairSource, config: PairedConfig, flush: torch.Tensor, first: int) -> PairedResult:
    """Batches of event-timed pairs.

    A call whose host launch took longer than the hold before it (a garbage collection, a slow
    launch path, another thread holding the interpreter) may have left the GPU idle inside its
    events, so its pair is left out (`late_pairs`); when more than a quarter of a batch is late,
    the hold is doubled for the next batches. At `MAX_HOLD_MS`, pairs where only the candidate
    was late are kept (its host time counts against it); pairs where the baseline was late never
    count, since they would flatter the candidate (no pair left: `LateLaunchError`).
    """
    times = PairTimes()
    started, index, late_pairs = time.perf_counter(), first, 0
    while len(times.base) < config.max_pairs:
        checked = set(range(index, index + config.batch)) if index == first else {
            index + random.randrange(config.batch)}
        records: list[tuple[int, tuple[torch.cuda.Event, ...]]] = []
        outputs: list[tuple[int, object]] = []
        late: tuple[set[int], set[int]] = (set(), set())  # pairs whose baseline / candidate launched late
        for step in range(config.batch):
            source.prepare(index, index in checked)
            if step == 0:
                _untimed(flush, config, functools.partial(source.baseline, index))
            marks = [_event() for _ in range(4)]
            for which in ((0, 1) if _baseline_first(index - first, config.batch) else (1, 0)):
                flush.zero_()
                enqueued = time.perf_counter()
                _hold_gpu(config.hold_ms)
                marks[2 * which].record()
                out = source.candidate(index) if which else source.baseline(index)
                marks[2 * which + 1].record()
                if (time.perf_counter() - enqueued) * 1000.0 > config.hold_ms:
                    late[which].add(index)
                if which == 1 and index in checked:
                    outputs.append((index, out))
                else:  # scrubbed and freed before the other side runs: its output lands here, but
                    _poison(out)  # finds NaN, not this side's answer for the same inputs
                del out
            records.append((index, tuple(marks)))
            index += 1
        _untimed(flush, config, functools.partial(source.baseline, index - 1))
        torch.cuda.synchronize()
        below_cap = config.hold_ms < MAX_HOLD_MS
        for pair, marks_ in records:
            if pair in checked:
                continue
            if pair in late[0] or (pair in late[1] and below_cap):
                late_pairs += 1
                continue
            times.add(marks_[0].elapsed_time(marks_[1]), marks_[2].elapsed_time(marks_[3]),
                      _baseline_first(pair - first, config.batch))
        for pair, out in outputs:
            source.check(pair, out)
        outputs.clear()
        source.release()
        if below_cap and 4 * len(late[0] | late[1]) > config.batch:
            config = dataclasses.replace(config, hold_ms=min(MAX_HOLD_MS, 2 * config.hold_ms))
        spent = time.perf_counter() - started > config.budget_s
        if times.base and (times.narrow(config) or spent):
            break
        if spent and late_pairs and not times.base:
            raise LateLaunchError(f"the baseline's host launches outlasted the GPU hold (up to {MAX_HOLD_MS:.0f} ms) "
                                  "in every timed pair, so no pair could be timed fairly")
    return times.result(EVENT_METHOD, late_pairs)


def _check_hidden_work(source: PairSource, flush: torch.Tensor, first: int, reps: int = 7) -> None:
    """Host time to a full device synchronize versus event time, candidate against baseline:
    work launched off the timed stream shows up as host time the events never saw."""
    gaps: dict[int, list[float]] = {0: [], 1: []}
    events: dict[int, list[float]] = {0: [], 1: []}
    for rep in range(reps):
        source.prepare(first + rep, False)
        for which in ((0, 1) if rep % 2 == 0 else (1, 0)):
            flush.zero_()
            torch.cuda.synchronize()
            start, end = _event(), _event()
            host_start = time.perf_counter()
            start.record()
            _ = source.candidate(first + rep) if which else source.baseline(first + rep)
            end.record()
            torch.cuda.synchronize()
            host_ms = (time.perf_counter() - host_start) * 1000.0
            events[which].append(start.elapsed_time(end))
            gaps[which].append(host_ms - events[which][-1])
        source.release()
    hidden = statistics.median(gaps[1]) - max(statistics.median(gaps[0]), 0.0)
    allowed = max(0.75 * statistics.median(events[0]), 0.05)
    if hidden > allowed:
        raise HiddenWorkError(
            f"{hidden:.3f} ms of the candidate's work finished outside the timed stream "
            f"(its events read {statistics.median(events[1]):.3f} ms)")


def _capture(run: Callable[[int], object], sets: int, calls: int,
             kept: int = 0) -> tuple[torch.cuda.CUDAGraph, list[tuple[int, object]]]:
    """A graph of `calls` calls over `sets` input sets, and the outputs of the last
    `max(sets, kept)` calls (for the check)."""
    side = torch.cuda.Stream()  # type: ignore[no-untyped-call]
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for index in range(sets):
            run(index)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    outputs: list[tuple[int, object]] = []
    with torch.cuda.graph(graph):
        for call in range(calls):
            outputs.append((call % sets, run(call % sets)))
    return graph, outputs[-max(sets, kept):]


def _poison(output: object) -> None:
    for tensor in (output if isinstance(output, tuple | list) else [output]):
        if isinstance(tensor, torch.Tensor):
            fill_sentinel(tensor)


def graph_calls(config: PairedConfig, per_call_ms: float, sets: int = 2) -> int:
    """Calls per captured graph: enough for one replay to last `graph_replay_ms` (at most 500)."""
    return max(sets, min(500, math.ceil(config.graph_replay_ms / max(per_call_ms, 1e-4))))


def replay_batch(graphs: tuple[torch.cuda.CUDAGraph, torch.cuda.CUDAGraph], config: PairedConfig,
                 flush: torch.Tensor, first_round: int, calls: int, times: PairTimes) -> None:
    """One batch of timed replays of (baseline, candidate) graphs, untimed replays at its edges;
    each round's per-call times are added to `times`."""
    records = []
    _untimed(flush, config, graphs[0].replay)
    for round_ in range(first_round, first_round + config.batch):
        marks = [_event() for _ in range(4)]
        for which in ((0, 1) if _baseline_first(round_, config.batch) else (1, 0)):
            flush.zero_()
            _hold_gpu(config.hold_ms)
            marks[2 * which].record()
            graphs[which].replay()
            marks[2 * which + 1].record()
        records.append((round_, marks))
    _untimed(flush, config, graphs[0].replay)
    torch.cuda.synchronize()
    for round_, marks in records:
        times.add(marks[0].elapsed_time(marks[1]) / calls, marks[2].elapsed_time(marks[3]) / calls,
                  _baseline_first(round_, config.batch))


def _time_graphs(source: PairSource, config: PairedConfig, flush: torch.Tensor, per_call_ms: float,
                 sets: int = 2) -> PairedResult:
    """Graphs replay fixed input sets: host code (where a memo would live) does not run at replay."""
    calls = max(graph_calls(config, per_call_ms, sets), config.loads)
    for index in range(sets):
        source.prepare(index, True)
    base_graph, _ = _capture(source.baseline, sets, calls)
    cand_graph, cand_outputs = _capture(source.candidate, sets, calls, kept=config.loads)  # every load checked
    times = PairTimes()
    started, rounds = time.perf_counter(), 0
    while len(times.base) < config.max_pairs:
        replay_batch((base_graph, cand_graph), config, flush, rounds, calls, times)
        rounds += config.batch
        if times.narrow(config) or time.perf_counter() - started > config.budget_s:
            break
    for _, out in cand_outputs:
        _poison(out)
    cand_graph.replay()
    torch.cuda.synchronize()
    for index, out in cand_outputs:
        source.check(index, out)
    source.release()
    return times.result(GRAPH_METHOD)


def _time_cpu(source: PairSource, config: PairedConfig) -> PairedResult:
    times = PairTimes()
    for pair in range(max(config.cpu_pairs, config.loads, 1)):  # every load's output checked
        source.prepare(pair, True)
        spent = [0.0, 0.0]
        for which in ((0, 1) if pair % 2 == 0 else (1, 0)):
            start = time.perf_counter()
            out = source.candidate(pair) if which else source.baseline(pair)
            spent[which] = max((time.perf_counter() - start) * 1000.0, 1e-6)
            if which == 1:
                source.check(pair, out)
        times.add(spent[0], spent[1], pair % 2 == 0)
        source.release()
    return times.result(CPU_METHOD)


def time_paired(source: PairSource, device: torch.device, config: PairedConfig | None = None) -> PairedResult:
    """Time `source.baseline` against `source.candidate`, every timed output of the first batch
    (and one per later batch) checked by `source.check`."""
    settings = config or PairedConfig()
    if device.type != "cuda":
        return _time_cpu(source, settings)
    flush = flush_buffer(device)
    for index in range(settings.warmup):
        source.prepare(index, True)
        source.baseline(index)
        source.check(index, source.candidate(index))
        source.release()
    torch.cuda.synchronize()
    settings = dataclasses.replace(settings, hold_ms=_hold_for(source, settings.hold_ms))
    per_call_ms = gpu_ms_per_call(source, settings, flush)
    if per_call_ms < settings.graph_threshold_ms:
        try:
            return _time_graphs(source, settings, flush, per_call_ms)
        except RuntimeError as exc:
            if "captur" not in str(exc).lower() and "graph" not in str(exc).lower():
                raise
            torch.cuda.synchronize()
            source.release()
    _check_hidden_work(source, flush, first=1000)
    return _time_events(source, settings, flush, first=2000)
