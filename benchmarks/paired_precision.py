"""How precise the paired timer is, per kernel, against its stop rule's target (GPU).

    PYTHONPATH=src python3 benchmarks/paired_precision.py [--tasks all] [--targets 0.002 0.0005]
        [--repeats 5] [--shard K/N --json F] [--merge F...] [--out FILE]

For every case of every task, in one process: the task's kernel is loaded twice (as the A/A
benchmark does) and timed against itself `--repeats` times by `time_paired` at each stop-rule
target (the half-width of the median ratio's 95% interval; the case's time budget as in an
evaluation), and by triton's `do_bench` (median of A over median of A'), the methods interleaved.
Reported per method: the spread of the self-speedups (standard deviation, and the band: the
largest |self-speedup - 1|), the pairs taken and the seconds spent. This is the lever behind the
A/A benchmark's noise band, measured without the cost of whole evaluations; the verdict is still
`aa_noise.py`'s.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import json
import math
import statistics
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO / "src"), str(REPO / "benchmarks")]

from suite_copy import add_suite_arguments, kernel_pair, suite_rows, write_report  # noqa: E402


class SelfPairs:
    """The same kernel on both sides, fresh inputs per pair drawn as the evaluator draws them."""

    def __init__(self, kernel_task: Any, case: Any, first: Any, second: Any, device: Any, salt: int) -> None:
        self.kernel_task, self.case, self.first, self.second = kernel_task, case, first, second
        self.device, self.salt = device, salt
        self.prepared: dict[int, tuple[Any, ...]] = {}

    def prepare(self, index: int, checked: bool) -> None:
        from aka.harness.perf import pair_inputs

        self.prepared[index] = pair_inputs(self.kernel_task, self.case, index, self.salt, self.device)

    def baseline(self, index: int) -> object:
        return self.first(*self.prepared[index])

    def candidate(self, index: int) -> object:
        return self.second(*self.prepared[index])

    def check(self, index: int, output: object) -> None:
        pass

    def release(self) -> None:
        self.prepared.clear()


def measure_task(task: Any, scratch: Path, targets: list[float], repeats: int) -> list[dict[str, Any]]:
    import torch

    from aka.harness.paired import time_paired
    from aka.harness.runner import make_case_inputs

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")  # cpu: a smoke test only
    rows = []
    with kernel_pair(task, scratch) as (kernel_task, first, second):
        cases = list(kernel_task.cases_for("full"))
        for case in cases:
            methods: dict[str, dict[str, list[float]]] = {}
            inputs = make_case_inputs(kernel_task, case, case.seed, device)
            for rep in range(repeats):
                for target in targets:
                    config = dataclasses.replace(kernel_task.paired, target_rel_halfwidth=target).for_cases(len(cases))
                    started = time.perf_counter()
                    result = time_paired(SelfPairs(kernel_task, case, first, second, device, rep), device, config)
                    entry = methods.setdefault(f"paired {target:g}", {"ratios": [], "pairs": [], "seconds": []})
                    entry["ratios"].append(result.speedup)
                    entry["pairs"].append(result.pairs)
                    entry["seconds"].append(time.perf_counter() - started)
                if device.type != "cuda":
                    continue
                import triton.testing

                started = time.perf_counter()
                a = triton.testing.do_bench(functools.partial(first, *inputs), return_mode="median")
                b = triton.testing.do_bench(functools.partial(second, *inputs), return_mode="median")
                entry = methods.setdefault("do_bench", {"ratios": [], "pairs": [], "seconds": []})
                entry["ratios"].append(a / b)
                entry["seconds"].append(time.perf_counter() - started)
            rows.append({"task": task.name, "case": case.id, "methods": methods})
            print(json.dumps(rows[-1]), flush=True)
    return rows


def render(rows: list[dict[str, Any]], repeats: int) -> str:
    methods = list(rows[0]["methods"]) if rows else []
    lines = ["# Paired timer precision per kernel (A/A)", "",
             f"Command: `PYTHONPATH=src python3 benchmarks/paired_precision.py --repeats {repeats}` "
             "(per GPU shard: `--shard K/N --json F`, then `--merge F...`)", "",
             f"{len(rows)} cases. Per method, medians over cases of: the standard deviation of the "
             "self-speedup, the band (largest |self-speedup - 1| over the repeats), the pairs taken and "
             "the seconds per measurement; and the seconds per task summed over its cases.", "",
             "| method | sd (median) | band (median) | band (90th pct) | pairs | s per case | s per task |",
             "|---|---|---|---|---|---|---|"]
    for method in methods:
        sds, bands, pairs, seconds = [], [], [], []
        per_task: dict[str, float] = {}
        for row in rows:
            entry = row["methods"][method]
            ratios = entry["ratios"]
            sds.append(statistics.stdev(ratios) if len(ratios) > 1 else float("nan"))
            bands.append(max(abs(r - 1) for r in ratios))
            pairs += entry["pairs"]
            seconds.append(statistics.median(entry["seconds"]))
            per_task[row["task"]] = per_task.get(row["task"], 0.0) + seconds[-1]
        bands.sort()
        nearest_rank_90 = max(0, math.ceil(0.9 * len(bands)) - 1)
        lines.append(f"| {method} | {statistics.median(sds):.5f} | {statistics.median(bands):.5f} "
                     f"| {bands[nearest_rank_90]:.5f} | {statistics.median(pairs) if pairs else '-'} "
                     f"| {statistics.median(seconds):.3f} | {statistics.median(per_task.values()):.2f} |")
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser()
    add_suite_arguments(parser)
    parser.add_argument("--targets", nargs="*", type=float, default=[0.002, 0.0005])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    rows = suite_rows(args, lambda task, scratch: measure_task(task, scratch, args.targets, args.repeats))
    return write_report(render(rows, args.repeats), args.out)


if __name__ == "__main__":
    raise SystemExit(main())
