"""Paired timing: baseline and candidate called in turn, each in its own worker, judged by the judge.

Why paired: compute-bound kernels drift 2-5% over time (clocks, power), which swamps a 2% real
gain; calling A and B alternately (ABBA order) makes each pair see the same conditions, and a
robust mean of per-pair ratios (20%-trimmed, of their logs) cancels slow drift. Every pair gets
freshly drawn inputs, written by the judge into the side's own buffers right before the call, and
the L2 is flushed by the judge after writing them, so neither a warm cache nor memoisation pays.
Pairs are taken in batches until the 95% interval of the speedup is narrow enough or the case's
time budget is spent.

What is trusted: on a GPU each call's time is the worker's own events around it (precise, but
measured in the worker's process), and the judge bounds it by its own clock: the span from before
it wrote the inputs to after the output was complete. On the CPU the span itself is the time: a
worker's wall clock is its own to set, and the span's copies and hand-over (a fraction of a
millisecond) are small next to an interpreted kernel and the same for both sides. The part of
the span a side's events do not explain (copies, the hold, the hand-overs) is the same for both
sides when both are honest; the baseline's is measured alone first (`calibrate`, before any
candidate code is loaded), so a candidate that keeps work out of its own events, or reports a
time shorter than it took, shows more unexplained time than the baseline did
(`UnexplainedTimeError`): in its typical call, and in the share of its calls that show too much
(one that lies in only some calls, enough to lift the trimmed mean, shows that share). A
candidate that slows the baseline down while it is timed makes the baseline's times drift from
its calibration (`InterferenceError`). Every candidate output is checked, in every timed call.

Two things would otherwise bias an A/A comparison (docs/benchmarks/2026-11-30_timer_bias_h200.md):
which side runs first (the speedup is the geometric mean of the baseline-first and the
candidate-first pairs, which cancels a first-position effect), and the edges of a batch (the side
that runs first in a batch's first pair alternates between batches).

A call whose worker finished enqueuing after the judge's hold ended may have left the GPU idle
inside its events (`late`): its pair is left out, and when more than a quarter of a batch is late
the hold doubles for the rest of the case (up to `max_hold_ms`, where candidate-late pairs count
against the candidate and baseline-late pairs never count).
"""

from __future__ import annotations

import dataclasses
import logging
import math
import statistics
import time
from dataclasses import dataclass, field
from typing import Protocol

from aka.evaluation.wire import PAIRED_EVENTS, PAIRED_WALL_CLOCK

EVENT_METHOD, CPU_METHOD = PAIRED_EVENTS, PAIRED_WALL_CLOCK
MAD_TO_SD = 1.4826
log = logging.getLogger(__name__)


class TimedCall(Protocol):
    """One side's call as the judge saw it (see `aka.harness.turns.Turn`): the worker's own time,
    the judge's span and the part of it the judge's hold took, whether the call came late."""

    @property
    def claimed_ms(self) -> float: ...

    @property
    def span_ms(self) -> float: ...

    @property
    def hold_ms(self) -> float: ...

    @property
    def late(self) -> bool: ...


class PairSource(Protocol):
    """What is timed. `prepare(i, hold)` draws pair i's inputs and expected output (calls it makes
    beside the pair's hold as long); `candidate(i, hold)`
    also checks its output (raising `aka.harness.verify.ProblemError`); `release()` drops what
    the prepared pairs hold."""

    def prepare(self, index: int, hold_ms: float) -> None: ...

    def baseline(self, index: int, hold_ms: float) -> TimedCall: ...

    def candidate(self, index: int, hold_ms: float) -> TimedCall: ...

    def release(self) -> None: ...


class LateLaunchError(Exception):
    """No pair could be timed fairly: the baseline's launches came later than the longest hold in
    every one (a baseline whose launch work outlasts the hold)."""


class UnexplainedTimeError(Exception):
    """The candidate's calls took more of the judge's span than its own events account for."""


class InterferenceError(Exception):
    """The baseline ran slower next to the candidate than alone."""


class ClaimError(Exception):
    """A worker reported a time that is not a positive finite number."""


@dataclass(frozen=True)
class PairedConfig:
    warmup: int = 2
    calibration: int = 16
    min_pairs: int = 20
    max_pairs: int = 3000
    batch: int = 10
    target_rel_halfwidth: float = 0.001
    # A step's pairs take at most `step_budget_s`, shared out over its cases (each between
    # `min_budget_s` and `budget_s`): the performance step is the only one that needs the GPU
    # alone (aka.evaluation.device_lock), so its length bounds the evaluations a GPU makes an hour.
    budget_s: float = 1.0
    step_budget_s: float = 2.4
    min_budget_s: float = 0.2
    hold_ms: float = 0.4
    max_hold_ms: float = 25.0
    cpu_pairs: int = 3
    cpu_max_pairs: int = 9  # more batches only while the least pair's unexplained excess is over its allowance
    loads: int = 3  # separate loads of each side's code, called in turn (the performance step)
    # GPU: an honest candidate's calls showed 0-16 us more than the baseline's in the same pairs
    # (H200, docs/benchmarks/2026-12-02_trust_h200.md; cause not yet found): a tighter allowance
    # judged honest A/A candidates tampering. Docs/evaluation.md, Known gaps, says what it costs.
    unexplained_floor_ms: float = 0.010
    unexplained_share: float = 0.03
    unexplained_call_sds: float = 6.0  # a single call's allowance above the typical one, in its spread
    unexplained_calls_share: float = 0.1  # more of the candidate's calls than the baseline's over it
    unexplained_calls_alpha: float = 1e-3  # ... and that many more by chance this rarely (exact McNemar)
    late_share: float = 0.05  # pairs late for the candidate alone beyond the baseline's late ones: they count
    interference_share: float = 0.05
    interference_unexplained_ms: float = 0.05
    cpu_unexplained_floor_ms: float = 3.0  # the CPU's wall clocks, on a busy two-core machine
    cpu_unexplained_share: float = 0.25  # of the judge's span: no honest call hides a quarter of it

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
    late_pairs: int = 0  # dropped: a side's enqueue outlasted the hold
    unexplained_ms: float = 0.0  # candidate's median unexplained time minus the baseline's (alone)
    span_speedup: float | None = None  # the same speedup from the judge's spans alone


@dataclass
class Calibration:
    """The baseline timed alone, before any candidate code is loaded: its own times and the part
    of the judge's span they leave unexplained, the reference the candidate is held to."""

    claimed: list[float] = field(default_factory=list)
    unexplained: list[float] = field(default_factory=list)
    hold_ms: float = 0.4
    late: int = 0

    def add(self, call: TimedCall, gpu: bool) -> None:
        self.claimed.append(credited_ms(call, gpu))
        self.unexplained.append(_unexplained(call))

    @property
    def claimed_ms(self) -> float:
        return statistics.median(self.claimed)

    @property
    def unexplained_ms(self) -> float:
        return statistics.median(self.unexplained)


def _unexplained(call: TimedCall) -> float:
    return call.span_ms - call.hold_ms - call.claimed_ms


def credited_ms(call: TimedCall, gpu: bool) -> float:
    """The time a call counts for: its worker's events on a GPU (held to the span by the checks
    below), the judge's own span on the CPU (see the module docstring)."""
    return call.claimed_ms if gpu else call.span_ms - call.hold_ms


def median_error(values: list[float]) -> float:
    """Standard error of a median, from the median absolute deviation (normal-consistent)."""
    if len(values) < 2:
        return float("inf")
    centre = statistics.median(values)
    spread = MAD_TO_SD * statistics.median(abs(v - centre) for v in values)
    return 1.2533 * spread / math.sqrt(len(values))


def _positive(call: TimedCall, side: str) -> None:
    for name, value in (("time", call.claimed_ms), ("span", call.span_ms - call.hold_ms)):
        if not (math.isfinite(value) and value > 0):
            raise ClaimError(f"the {side} reported a {name} of {value!r} ms (not a positive finite number)")


def calibrate(source: PairSource, config: PairedConfig, gpu: bool, first: int = 0) -> Calibration:
    """The baseline alone (`config.calibration` calls on a GPU, `cpu_pairs` on the CPU); late
    calls are left out and lengthen the hold (up to `max_hold_ms`), as in `time_paired`."""
    calibration = Calibration(hold_ms=config.hold_ms)
    count = config.calibration if gpu else max(config.cpu_pairs, 2)
    index = first
    while len(calibration.claimed) < count and index < first + 20 * count:
        source.prepare(index, calibration.hold_ms)
        call = source.baseline(index, calibration.hold_ms)
        _positive(call, "baseline")
        if call.late:  # never counted: idle GPU time inside its events would flatter the candidate
            calibration.late += 1
            calibration.hold_ms = min(config.max_hold_ms, 2 * calibration.hold_ms)
        else:
            calibration.add(call, gpu)
        index += 1
        source.release()
    if not calibration.claimed:
        raise LateLaunchError(
            f"the baseline's enqueue outlasted the GPU hold (up to {config.max_hold_ms:.0f} ms) "
            "in every calibration call"
        )
    return calibration


TRIM = 0.2


def _t975(df: int) -> float:
    """Student's t 97.5% quantile: exact below 3 degrees of freedom, else Cornish-Fisher in 1/df
    (within 0.3% from 4 up)."""
    if df < 3:
        return (12.706, 4.303)[max(df, 1) - 1]
    z = 1.959964
    return (
        z
        + (z**3 + z) / (4 * df)
        + (5 * z**5 + 16 * z**3 + 3 * z) / (96 * df**2)
        + (3 * z**7 + 19 * z**5 + 17 * z**3 - 15 * z) / (384 * df**3)
    )


def trimmed_mean_with_ci(values: list[float], trim: float = TRIM) -> tuple[float, float, int]:
    """The `trim`-trimmed mean, its standard error (Tukey-McLaughlin: the winsorized spread) and
    degrees of freedom. Why not the median: on the H200's per-pair ratios the 20%-trimmed mean
    needs about a third fewer pairs for the same precision, and still ignores a fifth of outliers
    on each side (docs/benchmarks/2026-11-30_timer_bias_h200.md)."""
    ordered = sorted(values)
    n = len(ordered)
    cut = int(n * trim)
    kept = ordered[cut : n - cut]
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
        return PairedResult(
            statistics.median(self.base),
            statistics.median(self.cand),
            speedup,
            low,
            high,
            len(self.base),
            method,
            late_pairs,
        )


def _baseline_first(pair: int, batch: int) -> bool:
    """Which side runs first: alternating within a batch, and the batch's first pair alternating
    too, so neither side is always the one next to a batch's edges."""
    return (pair + pair // batch) % 2 == 0


@dataclass
class _Spans:
    """Per counted pair: each side's unexplained time (less the hold: the interference check
    compares it with the calibration, whose hold may differ), its time outside its events with the
    hold (what the tampering checks compare between the two sides of a pair, which share one hold
    length), the spans (for the span-only estimate) and the measured holds."""

    base_unexplained: list[float] = field(default_factory=list)
    cand_unexplained: list[float] = field(default_factory=list)
    base_outside: list[float] = field(default_factory=list)
    cand_outside: list[float] = field(default_factory=list)
    base_span: list[float] = field(default_factory=list)
    cand_span: list[float] = field(default_factory=list)
    cand_claimed: list[float] = field(default_factory=list)
    base_hold: list[float] = field(default_factory=list)
    cand_hold: list[float] = field(default_factory=list)

    def add(self, base: TimedCall, cand: TimedCall) -> None:
        self.base_unexplained.append(_unexplained(base))
        self.cand_unexplained.append(_unexplained(cand))
        self.base_outside.append(base.span_ms - base.claimed_ms)
        self.cand_outside.append(cand.span_ms - cand.claimed_ms)
        self.base_span.append(base.span_ms)
        self.cand_span.append(cand.span_ms)
        self.cand_claimed.append(cand.claimed_ms)
        self.base_hold.append(base.hold_ms)
        self.cand_hold.append(cand.hold_ms)


@dataclass
class TakenPairs:
    """A case's counted pairs, not yet judged (`judge_pairs`): the calibration they are held to may
    come after them (`aka.harness.perf`, one turn alone)."""

    times: PairTimes
    spans: _Spans
    late_pairs: int


def time_paired(source: PairSource, calibration: Calibration, config: PairedConfig, gpu: bool) -> PairedResult:
    """Time `source.baseline` against `source.candidate` in pairs (every candidate output checked
    by the source), then hold the candidate's times to the judge's spans and the baseline's to its
    calibration."""
    return judge_pairs(take_pairs(source, config, gpu, calibration.hold_ms), calibration, config, gpu)


def pairs_per_batch(config: PairedConfig, gpu: bool) -> int:
    """The pairs `take_pairs` takes before it looks at the interval again."""
    return config.batch if gpu else max(config.cpu_pairs, config.loads, 1)


def take_pairs(source: PairSource, config: PairedConfig, gpu: bool, hold_ms: float) -> TakenPairs:
    """The pairs, in batches, until the interval is narrow or the case's budget is spent; every
    candidate output checked by the source. The hold starts at `hold_ms` and doubles while calls
    come late."""
    times, spans = PairTimes(), _Spans()
    late_pairs, index, baseline_late = 0, 0, 0
    own_late: list[tuple[int, TimedCall, TimedCall]] = []  # pairs left out only for the candidate's lateness
    started = time.perf_counter()
    # where the turn's seconds go (logged): what to shorten for throughput, read from step logs
    parts = {"prepare": 0.0, "baseline": 0.0, "candidate": 0.0, "release": 0.0}
    batch = pairs_per_batch(config, gpu)
    while len(times.base) < config.max_pairs:
        late: tuple[set[int], set[int]] = (set(), set())  # pairs whose baseline / candidate came late
        counted: list[tuple[int, TimedCall, TimedCall]] = []
        for _ in range(batch):
            at = time.perf_counter()
            source.prepare(index, hold_ms)
            parts["prepare"] += time.perf_counter() - at
            calls: dict[int, TimedCall] = {}
            for which in (0, 1) if _baseline_first(index, config.batch) else (1, 0):
                at = time.perf_counter()
                calls[which] = source.candidate(index, hold_ms) if which else source.baseline(index, hold_ms)
                parts["candidate" if which else "baseline"] += time.perf_counter() - at
                _positive(calls[which], "candidate" if which else "baseline")
                if calls[which].late:
                    late[which].add(index)
            counted.append((index, calls[0], calls[1]))
            index += 1
            at = time.perf_counter()
            source.release()  # one live pair: a case's inputs may fill much of the GPU
            parts["release"] += time.perf_counter() - at
        below_cap = hold_ms < config.max_hold_ms
        baseline_late += len(late[0])
        for pair, base, cand in counted:
            if pair in late[0] or (pair in late[1] and below_cap):
                late_pairs += 1
                if pair not in late[0]:
                    own_late.append((pair, base, cand))
                continue
            times.add(credited_ms(base, gpu), credited_ms(cand, gpu), _baseline_first(pair, config.batch))
            spans.add(base, cand)
        if below_cap and 4 * len(late[0] | late[1]) > config.batch:
            hold_ms = min(config.max_hold_ms, 2 * hold_ms)
        spent = time.perf_counter() - started > config.budget_s
        if not gpu and (len(times.base) >= config.cpu_max_pairs or not _unexplained_over(spans, config, gpu)):
            break  # on a busy CPU a burst can delay one side in every pair of a batch: more pairs, then judge
        if gpu and times.base and (times.narrow(config) or spent):
            break
        if spent and not times.base:
            raise LateLaunchError(
                f"the baseline's enqueue outlasted the GPU hold (up to {config.max_hold_ms:.0f} ms) "
                "in every timed pair, so no pair could be timed fairly"
            )
    if not times.base:
        raise LateLaunchError("no pair could be timed fairly")
    # Late far more often than the baseline: leaving those pairs out would let a candidate pick
    # which of its calls count (late exactly when slow); its launch path is its own cost.
    own_counted = len(own_late) - baseline_late > max(2.0, config.late_share * index)
    log.info(
        "late pairs: %d of the baseline's, %d of the candidate's alone (%s)",
        baseline_late,
        len(own_late),
        "counted" if own_counted else "left out",
    )
    log.info(
        "%d pairs in %.3f s: %s",
        index,
        time.perf_counter() - started,
        ", ".join(f"{name} {seconds:.3f}" for name, seconds in parts.items()),
    )
    if own_counted:
        for pair, base, cand in own_late:
            times.add(credited_ms(base, gpu), credited_ms(cand, gpu), _baseline_first(pair, config.batch))
            spans.add(base, cand)
        late_pairs -= len(own_late)
    return TakenPairs(times, spans, late_pairs)


def judge_pairs(pairs: TakenPairs, calibration: Calibration, config: PairedConfig, gpu: bool) -> PairedResult:
    """Hold the candidate's times to the judge's spans and the baseline's to its calibration, then
    estimate the speedup (raises `UnexplainedTimeError`, `InterferenceError`)."""
    times, spans = pairs.times, pairs.spans
    _log_spans(spans, calibration, pairs.late_pairs, statistics.median(times.base))
    unexplained = _check_unexplained(spans, times, calibration, config, gpu)
    if gpu:  # on the CPU the candidate's processes are stopped while the baseline runs
        _check_interference(spans, times, calibration, config)
    speedup, low, high = times.estimate()
    return PairedResult(
        statistics.median(times.base),
        statistics.median(times.cand),
        speedup,
        low,
        high,
        len(times.base),
        EVENT_METHOD if gpu else CPU_METHOD,
        pairs.late_pairs,
        unexplained,
        _span_speedup(spans),
    )


def _log_spans(spans: _Spans, calibration: Calibration, late_pairs: int, paired_base_ms: float) -> None:
    """Each case's unexplained times in the step log: what the tampering checks below compared."""

    def us(values: list[float]) -> str:
        centre = statistics.median(values)
        spread = MAD_TO_SD * statistics.median(abs(v - centre) for v in values)
        return f"{centre * 1000:.1f} (sd {spread * 1000:.1f})"

    log.info(
        "unexplained us: baseline alone %s, in pairs %s; candidate %s; %d pairs, %d late; hold us: "
        "baseline %s, candidate %s; baseline ms: alone %.5f, in pairs %.5f",
        us(calibration.unexplained),
        us(spans.base_unexplained),
        us(spans.cand_unexplained),
        len(spans.cand_unexplained),
        late_pairs,
        us(spans.base_hold),
        us(spans.cand_hold),
        calibration.claimed_ms,
        paired_base_ms,
    )


def _tolerance(claimed_ms: float, span_ms: float, error: float, config: PairedConfig, gpu: bool) -> float:
    """How much more unexplained time than the baseline's an honest call may show: on a GPU a few
    us or a few percent of its own time, plus five standard errors; on the CPU, whose wall clocks
    jitter by milliseconds under load, a quarter of the judge's span (never under 3 ms)."""
    if not gpu:
        return max(config.cpu_unexplained_floor_ms, config.cpu_unexplained_share * span_ms)
    return max(config.unexplained_floor_ms, config.unexplained_share * claimed_ms) + 5.0 * (
        error if math.isfinite(error) else 0.0
    )


def _unexplained_over(spans: _Spans, config: PairedConfig, gpu: bool) -> bool:
    """Would `_check_unexplained` judge these pairs tampering?"""
    if not spans.cand_unexplained:
        return False
    excess, allowed, _ = _unexplained_excess(spans, config, gpu)
    return excess > allowed


def _check_unexplained(
    spans: _Spans, times: PairTimes, calibration: Calibration, config: PairedConfig, gpu: bool
) -> float:
    """The candidate may leave no more of the judge's span unexplained than the baseline did:
    anything more is work its own events did not see, or time it did not report. On a GPU the
    baseline's calls in the same pairs are the reference (the hand-overs cost more with two workers
    active), and the hold counts: work the candidate's context does while the judge's hold waits
    (queued on a stream the go flag does not gate, run in the GPU's time slices) lengthens that
    hold, which the baseline's holds in the same pairs do not show."""
    excess, allowed, claimed = _unexplained_excess(spans, config, gpu)
    if excess > allowed:
        raise UnexplainedTimeError(
            f"{excess * 1000:.1f} us of each candidate call happened outside its own timing (allowed "
            f"{allowed * 1000:.1f} us; the calls read {claimed * 1000:.1f} us, the judge's "
            f"span {statistics.median(spans.cand_span) * 1000:.1f} us)"
        )
    if gpu:
        _check_unexplained_calls(spans, statistics.median(spans.base_outside), allowed, config)
    return excess


def _unexplained_excess(spans: _Spans, config: PairedConfig, gpu: bool) -> tuple[float, float, float]:
    """The candidate's unexplained time over the baseline's, what it may be, and its calls' time."""
    if gpu:
        reference = statistics.median(spans.base_outside)
        excess = statistics.median(spans.cand_outside) - reference
        error = math.hypot(median_error(spans.cand_outside), median_error(spans.base_outside))
    else:  # a busy CPU only ever adds delay, and a cheat hides time in every call: the least excess
        # over the baseline's call of the same pair (the calibration ran earlier, under another
        # load; a burst of load that lasts a pair delays both of its calls, where comparing each
        # side's least call judged an honest kernel tampering under a full test run)
        pairs = zip(spans.cand_unexplained, spans.base_unexplained, strict=True)
        excess = min(cand - base for cand, base in pairs)
        error = math.hypot(median_error(spans.cand_unexplained), median_error(spans.base_unexplained))
    claimed = statistics.median(spans.cand_claimed)
    return excess, _tolerance(claimed, statistics.median(spans.cand_span), error, config, gpu), claimed


def _check_unexplained_calls(spans: _Spans, reference: float, allowed: float, config: PairedConfig) -> None:
    """A candidate honest in its typical call may still under-report some calls: enough of them
    lift the trimmed mean (which drops a fifth on each side). A single call may exceed the typical
    allowance by `unexplained_call_sds` of the baseline's spread; the candidate's calls may do so
    only about as often as the baseline's calls in the same pairs, which see the same conditions:
    more often by over max(3, `unexplained_calls_share`) of the calls, and by more than chance
    explains (an honest gelu on a host busy compiling read 7 such calls of 59 against the
    baseline's 1, docs/benchmarks/2026-12-03_warm_parent_h200.md)."""
    spread = MAD_TO_SD * statistics.median(abs(u - reference) for u in spans.base_outside)
    limit = reference + allowed + config.unexplained_call_sds * spread
    cand_over = [u > limit for u in spans.cand_outside]
    base_over = [u > limit for u in spans.base_outside]
    over_candidate, over_baseline, count = sum(cand_over), sum(base_over), len(cand_over)
    only_candidate = sum(c and not b for c, b in zip(cand_over, base_over, strict=True))
    only_baseline = sum(b and not c for c, b in zip(cand_over, base_over, strict=True))
    if over_candidate - over_baseline > max(3, config.unexplained_calls_share * count) and (
        sign_test_p(only_candidate, only_baseline) < config.unexplained_calls_alpha
    ):
        raise UnexplainedTimeError(
            f"{over_candidate} of {count} candidate calls left more than {(limit - reference) * 1000:.1f} us of the "
            f"judge's span unexplained by their own timing (the baseline's calls in the same pairs: "
            f"{over_baseline}): it did not report the time of those calls"
        )


def sign_test_p(more: int, fewer: int) -> float:
    """One-sided exact sign test (McNemar's on the discordant pairs): the chance that of
    `more + fewer` pairs where one side alone stood out, `more` or more were the same side, were
    both sides alike. Exact from the binomial coefficients: the judge imports no scipy."""
    n = more + fewer
    return sum(math.comb(n, k) for k in range(more, n + 1)) / 2**n if n else 1.0


def _check_interference(spans: _Spans, times: PairTimes, calibration: Calibration, config: PairedConfig) -> None:
    """Next to the candidate the baseline must run as it did alone, on its events and on the span."""
    alone = calibration.claimed_ms
    paired = statistics.median(times.base)
    error = math.hypot(median_error(times.base), median_error(calibration.claimed))
    slower = paired - alone
    if slower > config.interference_share * alone + 5.0 * (error if math.isfinite(error) else 0.0):
        raise InterferenceError(
            f"the baseline read {paired:.4f} ms next to the candidate and {alone:.4f} ms "
            "alone: the candidate slowed it down"
        )
    # Its span outside its events moves by 5-20 us between one active worker and two (H200,
    # docs/benchmarks/2026-12-02_trust_h200.md), so only a stall beyond that counts here; the
    # candidate's own unexplained time is held to the baseline's in the same pairs.
    extra = statistics.median(spans.base_unexplained) - calibration.unexplained_ms
    error = math.hypot(median_error(spans.base_unexplained), median_error(calibration.unexplained))
    allowed = max(config.interference_unexplained_ms, config.interference_share * alone) + 5.0 * (
        error if math.isfinite(error) else 0.0
    )
    if extra > allowed:
        raise InterferenceError(
            f"the baseline's calls took {extra * 1000:.1f} us more of the judge's span next to "
            f"the candidate than alone (allowed {allowed * 1000:.1f} us)"
        )


def _span_speedup(spans: _Spans) -> float | None:
    """The speedup from the judge's spans alone (each less the baseline's time outside its events
    in the same pairs, hold included): less precise than the events, and reached by nothing the
    candidate controls."""
    overhead = statistics.median(spans.base_outside)
    ratios = [
        (b - overhead) / (c - overhead)
        for b, c in zip(spans.base_span, spans.cand_span, strict=True)
        if b > overhead and c > overhead
    ]
    if len(ratios) < 3:
        return None
    return math.exp(trimmed_mean_with_ci([math.log(r) for r in ratios])[0])
