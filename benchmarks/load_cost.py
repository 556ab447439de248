"""What one more separate load of a side's code costs the performance step (GPU).

    PYTHONPATH=src python3 benchmarks/load_cost.py [--tasks all] [--loads 3] [--shard K/N] [--json F] [--out FILE]

The performance step loads each side `PairedConfig.loads` times (aka.harness.perf). Per task,
with the compile caches already warm (as in an evaluation, where the correctness step built the
candidate), this times `--loads` separate loads of the task's sources, each followed by one call
per case (the first call compiles or fetches each specialization, and loads the CUDA module):
the seconds one extra load adds, twice per evaluation per extra load (both sides).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO / "src"), str(REPO / "benchmarks")]

from suite_copy import add_suite_arguments, kernel_pair, suite_rows, write_report  # noqa: E402

from aka.evaluator import BASELINE_SOURCES_DIR  # noqa: E402


def measure_task(task: Any, scratch: Path, loads: int) -> list[dict[str, Any]]:
    import torch

    from aka.harness.candidates import separate_load
    from aka.harness.runner import make_case_inputs

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    with kernel_pair(task, scratch) as (kernel_task, first, _):
        cases = list(kernel_task.cases_for("full"))
        inputs = [make_case_inputs(kernel_task, case, case.seed, device) for case in cases]
        for args in inputs:  # compiled once: the caches are warm, as in an evaluation
            first(*args)
        seconds = []
        for serial in range(1, loads + 1):
            started = time.perf_counter()
            with separate_load(serial):
                function = kernel_task.load_candidate(Path.cwd() / BASELINE_SOURCES_DIR)
            for args in inputs:
                function(*args)
            if device.type == "cuda":
                torch.cuda.synchronize()
            seconds.append(time.perf_counter() - started)
    row = {"task": task.name, "cases": len(cases), "seconds": [round(s, 4) for s in seconds]}
    print(row, flush=True)
    return [row]


def render(rows: list[dict[str, Any]]) -> str:
    lines = ["# Cost of one more separate load (load + one call per case, caches warm)", "",
             "| task | cases | seconds per load | median |", "|---|---|---|---|"]
    medians = []
    for row in rows:
        medians.append(statistics.median(row["seconds"]))
        lines.append(f"| {row['task']} | {row['cases']} | {', '.join(f'{s:.3f}' for s in row['seconds'])} "
                     f"| {medians[-1]:.3f} |")
    if medians:
        lines += ["", f"Median over tasks: {statistics.median(medians):.3f} s per load; the largest "
                      f"{max(medians):.3f} s."]
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser()
    add_suite_arguments(parser)
    parser.add_argument("--loads", type=int, default=3)
    args = parser.parse_args()
    rows = suite_rows(args, lambda task, scratch: measure_task(task, scratch, args.loads))
    return write_report(render(rows), args.out)


if __name__ == "__main__":
    raise SystemExit(main())
