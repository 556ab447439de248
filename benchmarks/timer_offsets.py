"""Where the paired timer's per-measurement offsets come from (GPU): raw pair times per variant.

    PYTHONPATH=src python3 benchmarks/timer_offsets.py [--tasks all] [--repeats 4] [--pairs 200] [--max-cases 3]
        [--shard K/N] --json F          # measure: every pair's times, per case, variant, repeat
    PYTHONPATH=src python3 benchmarks/timer_offsets.py --merge F... [--scheme parity] [--out FILE]

Repeated A/A evaluations of a task differ by more than each one's interval says: something is
fixed for one measurement (or one process) and random between them. Each variant changes one
suspect, every variant takes the same number of pairs (no early stop), interleaved per repeat
(findings: docs/benchmarks/2026-11-30_timer_bias_h200.md):
- `copies`: as the evaluator times (the kernel loaded twice, baseline and candidate copies);
- `same`: one loaded copy on both sides (no code placement difference at all);
- `spaced`: as `copies`, with a spacer of random size allocated before each pair's inputs, so
  inputs and outputs land at new addresses every pair (not a cycle the allocator repeats);
- `swapped`: as `copies` with the sides exchanged: the copy loaded second is the baseline (the
  evaluator always loads the baseline first; an offset that follows the load order flips sign);
- `recaptured` (graph-timed cases only): the graphs captured anew for every batch, with fresh
  inputs, the capture order alternating.
The analysis (`--merge`) then scores estimators of each measurement's speedup on the same raw
pairs (the order-balanced median, the mean, the 10%- and the 20%-trimmed mean of log ratios: the
evaluator's since 6239901), per variant: the spread between repeats against the spread each
measurement predicts; then each variant's bias and the first-side penalty by position in a batch.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import random
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO / "src"), str(REPO / "benchmarks")]

from paired_precision import SelfPairs  # noqa: E402
from suite_copy import add_suite_arguments, kernel_pair, suite_rows, write_report  # noqa: E402


class SpacedPairs(SelfPairs):
    """Each pair's inputs after a spacer of random size: new addresses for every pair."""

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.spacers: list[Any] = []
        self.rng = random.Random(self.salt)

    def prepare(self, index: int, checked: bool) -> None:
        import torch

        self.spacers.append(torch.empty(self.rng.randrange(1, 48) << 20, dtype=torch.uint8, device=self.device))
        super().prepare(index, checked)

    def release(self) -> None:
        super().release()
        self.spacers.clear()


def _recaptured_graphs(source: Any, config: Any, flush: Any, per_call_ms: float, times: Any) -> None:
    """The evaluator's graph timing, with both graphs captured anew (fresh inputs) every batch."""
    from aka.harness.paired import _capture, graph_calls, replay_batch

    calls = graph_calls(config, per_call_ms)
    batch = 0
    while len(times.base) < config.max_pairs:
        first = 2 * batch
        for index in range(2):
            source.prepare(first + index, False)
        captured: dict[int, Any] = {}
        for which in ((0, 1) if batch % 2 == 0 else (1, 0)):
            side = source.candidate if which else source.baseline
            captured[which], _ = _capture(lambda i, side=side, first=first: side(first + i), 2, calls)
        replay_batch((captured[0], captured[1]), config, flush, batch * config.batch, calls, times)
        del captured
        source.release()
        batch += 1


def measure(source: Any, device: Any, config: Any, per_call_ms: float | None = None) -> dict[str, Any]:
    """One measurement by `time_paired` (or, given `per_call_ms`, by the recapturing graph timer),
    with every pair's times kept."""
    import torch

    from aka.harness import paired
    from aka.harness.timing import flush_buffer

    kept: list[Any] = []
    original = paired.PairTimes.result

    def keep(self: Any, method: str, late_pairs: int = 0) -> Any:
        kept.append(self)
        return original(self, method, late_pairs)

    started = time.perf_counter()
    if per_call_ms is not None:
        times = paired.PairTimes()
        config = dataclasses.replace(config, hold_ms=paired._hold_for(source, config.hold_ms))
        _recaptured_graphs(source, config, flush_buffer(device), per_call_ms, times)
        torch.cuda.synchronize()
        method = "recaptured"
    else:
        paired.PairTimes.result = keep
        try:
            method = paired.time_paired(source, device, config).method
        finally:
            paired.PairTimes.result = original
        times = kept[-1]
    return {"method": method, "seconds": round(time.perf_counter() - started, 3),
            "base": [round(v, 7) for v in times.base], "cand": [round(v, 7) for v in times.cand],
            "first": [int(v) for v in times.baseline_first]}


def measure_task(task: Any, scratch: Path, repeats: int, pairs: int, max_cases: int) -> list[dict[str, Any]]:
    import torch

    from aka.harness.paired import GRAPH_METHOD

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")  # cpu: a smoke test only
    rows = []
    with kernel_pair(task, scratch) as (kernel_task, first, second):
        cases = list(kernel_task.cases_for("full"))
        for case in cases[::max(1, math.ceil(len(cases) / max_cases))]:
            config = dataclasses.replace(kernel_task.paired, target_rel_halfwidth=0.0, min_pairs=pairs,
                                         max_pairs=pairs, budget_s=60.0)
            variants: dict[str, list[dict[str, Any]]] = {}
            graph_ms: float | None = None
            for rep in range(repeats):
                for name, kind, base, cand in (("copies", SelfPairs, first, second), ("same", SelfPairs, first, first),
                                               ("spaced", SpacedPairs, first, second),
                                               ("swapped", SelfPairs, second, first)):
                    source = kind(kernel_task, case, base, cand, device, 7919 * rep + len(name))
                    variants.setdefault(name, []).append(measure(source, device, config))
                if variants["copies"][0]["method"] == GRAPH_METHOD:
                    graph_ms = graph_ms or statistics.median(variants["copies"][0]["base"])
                    source = SelfPairs(kernel_task, case, first, second, device, 7919 * rep + 1)
                    variants.setdefault("recaptured", []).append(measure(source, device, config, graph_ms))
            rows.append({"task": task.name, "case": case.id, "variants": variants})
            print(task.name, case.id, variants["copies"][0]["method"],
                  {k: round(sum(m["seconds"] for m in v), 1) for k, v in variants.items()}, flush=True)
    return rows


def _log_ratios(m: dict[str, Any]) -> dict[bool, list[float]]:
    out: dict[bool, list[float]] = {True: [], False: []}
    for b, c, f in zip(m["base"], m["cand"], m["first"], strict=True):
        out[bool(f)].append(math.log(b / c))
    return out


def _trimmed(values: list[float], cut: float = 0.2) -> float:
    ordered = sorted(values)
    k = int(len(ordered) * cut)
    return statistics.fmean(ordered[k:len(ordered) - k] or ordered)


ESTIMATORS: dict[str, Callable[[dict[bool, list[float]]], float]] = {
    "median (orders balanced)": lambda o: (statistics.median(o[True]) + statistics.median(o[False])) / 2,
    "mean": lambda o: (statistics.fmean(o[True]) + statistics.fmean(o[False])) / 2,
    "trimmed mean 20%": lambda o: (_trimmed(o[True]) + _trimmed(o[False])) / 2,
    "trimmed mean 10%": lambda o: (_trimmed(o[True], 0.1) + _trimmed(o[False], 0.1)) / 2,
}


def analyse(rows: list[dict[str, Any]]) -> str:
    """Per variant and estimator, medians over cases of: the sd of the estimate between repeats,
    and the sd a measurement predicts for itself (bootstrap over its pairs, 50 resamples)."""
    lines = ["# Per-measurement offsets of the paired timer (A/A, fixed pairs)", "",
             f"{len(rows)} cases. Per variant (cases measured by it) and estimator: medians over cases of the "
             "sd between repeats (`between`), the sd each measurement predicts for itself by bootstrap "
             "(`within`), and their ratio (1: no offset beyond sampling).", "",
             "| variant | estimator | cases | between sd | within sd | ratio |", "|---|---|---|---|---|---|"]
    rng = random.Random(0)
    variants = sorted({v for row in rows for v in row["variants"]})
    for variant in variants:
        for name, estimator in ESTIMATORS.items():
            between, within = [], []
            for row in rows:
                measurements = row["variants"].get(variant, [])
                if len(measurements) < 2:
                    continue
                orders = [_log_ratios(m) for m in measurements]
                if any(not o[True] or not o[False] for o in orders):
                    continue
                between.append(statistics.stdev(estimator(o) for o in orders))
                boot = []
                for _ in range(50):
                    sample = {k: rng.choices(v, k=len(v)) for k, v in orders[0].items()}
                    boot.append(estimator(sample))
                within.append(statistics.stdev(boot))
            if between:
                b, w = statistics.median(between), statistics.median(within)
                lines.append(f"| {variant} | {name} | {len(between)} | {b:.5f} | {w:.5f} | {b / w:.2f} |")
    return "\n".join(lines) + "\n"


def _expected_first(scheme: str, batch_index: int, position: int, batch: int = 10) -> bool:
    """Which side ran first at `position` of a batch: by pair parity (the timer before 6239901) or
    alternating between batches too (`aka.harness.paired._baseline_first`)."""
    return position % 2 == 0 if scheme == "parity" else (position + batch_index) % 2 == 0


def edges(rows: list[dict[str, Any]], scheme: str, batch: int = 10) -> str:
    """The first-side penalty (first call's time over its partner's, less 1) by position in the
    batch, and each variant's A/A bias, from event-timed measurements. Each batch after the first
    (all checked, none kept) keeps `batch - 1` pairs: one checked pair is left out; where the run
    order breaks the expected pattern, that is the position skipped."""
    lines = ["", f"## Batch edges and bias (event-timed cases; order scheme: {scheme})", "",
             "First-side penalty by position in the batch, 20%-trimmed mean, in 1e-4 (0: no effect). "
             "Bias: mean log self-speedup over measurements, and its standard error over cases "
             "(a case's repeats share its offsets).", "",
             "| variant | " + " | ".join(f"p{p}" for p in range(batch)) + " | bias | se |",
             "|---|" + "---|" * (batch + 2)]
    for variant in sorted({v for row in rows for v in row["variants"]} - {"recaptured"}):
        penalties: dict[int, list[float]] = {p: [] for p in range(batch)}
        per_case: list[float] = []
        for row in rows:
            kept = [m for m in row["variants"][variant] if m["method"] == "paired_cuda_event_l2flush"]
            if not kept:
                continue
            per_case.append(statistics.fmean(ESTIMATORS["trimmed mean 20%"](_log_ratios(m)) for m in kept))
            for m in kept:
                triples = list(zip(m["base"], m["cand"], m["first"], strict=True))
                for chunk_index, start in enumerate(range(0, len(triples) - batch + 2, batch - 1)):
                    position = 0
                    for base, cand, first in triples[start:start + batch - 1]:
                        if bool(first) != _expected_first(scheme, chunk_index + 1, position, batch):
                            position += 1
                        if position < batch:
                            earlier, later = (base, cand) if first else (cand, base)
                            penalties[position].append(1e4 * (earlier / later - 1))
                        position += 1
        if per_case:
            bias = statistics.fmean(per_case)
            error = statistics.stdev(per_case) / math.sqrt(len(per_case)) if len(per_case) > 1 else float("nan")
            cells = " | ".join(f"{_trimmed(v):+.1f}" if v else "-" for v in penalties.values())
            lines.append(f"| {variant} | {cells} | {bias:+.5f} | {error:.5f} |")
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser()
    add_suite_arguments(parser, exclude=("e2e/",))  # e2e: a 25 ms hold per call makes fixed pairs slow
    parser.add_argument("--repeats", type=int, default=4)
    parser.add_argument("--pairs", type=int, default=200)
    parser.add_argument("--max-cases", type=int, default=3, help="cases per task, spread over its list")
    parser.add_argument("--scheme", choices=["parity", "alternating"], default="alternating",
                        help="the timer's run order, for --merge of runs before 6239901: parity")
    args = parser.parse_args()
    rows = suite_rows(args, lambda task, scratch: measure_task(task, scratch, args.repeats, args.pairs,
                                                               args.max_cases), indent=None)
    return write_report(analyse(rows) + edges(rows, args.scheme), args.out)


if __name__ == "__main__":
    raise SystemExit(main())
