"""Does a kernel's speed depend on where its code was loaded? (GPU)

    PYTHONPATH=src python3 benchmarks/code_placement.py [--tasks all] [--copies 6] [--repeats 2]
        [--pairs 200] [--max-cases 1] [--shard K/N] --json F
    PYTHONPATH=src python3 benchmarks/code_placement.py --merge F... [--out FILE]

timer_offsets.py found per-case A/A offsets that repeat within a process when the kernel is
loaded twice (the evaluator's two copies) and none with one copy on both sides. Here the task's
kernel is loaded `--copies` times (copy 0 as the evaluator loads the candidate, the others
through `aka.harness.candidates.separate_load`, as the performance step loads its sides: new
Triton JIT functions, CUDA libraries copied to a new path) and each copy is timed against copy 0
with a fixed number of pairs, `--repeats` times, interleaved:
- `c0` (copy 0 on both sides: no placement difference), `c1`..: copy i against copy 0;
- `rotated`: the first half of the copies on the baseline side, the second half on the
  candidate side, one of each per pair in turn (every combination equally often): does
  spreading each side over several loads average the offsets away?
The analysis (`--merge`): per variant, the spread of the cases' mean self-speedups against what
the repeats predict (a ratio near 1: no offset that persists; above 1: a persistent one).
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import statistics
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO / "src"), str(REPO / "benchmarks")]

from paired_precision import SelfPairs  # noqa: E402
from suite_copy import add_suite_arguments, kernel_pair, suite_rows, write_report  # noqa: E402
from timer_offsets import ESTIMATORS, _log_ratios, measure  # noqa: E402

from aka.evaluator import BASELINE_SOURCES_DIR  # noqa: E402


class RotatedPairs(SelfPairs):
    """Each side spread over several loaded copies: pair i uses base[i % k], cand[(i // k) % k]."""

    def __init__(self, kernel_task: Any, case: Any, bases: list[Any], cands: list[Any], device: Any,
                 salt: int) -> None:
        super().__init__(kernel_task, case, bases[0], cands[0], device, salt)
        self.bases, self.cands = bases, cands

    def baseline(self, index: int) -> object:
        return self.bases[index % len(self.bases)](*self.prepared[index])

    def candidate(self, index: int) -> object:
        return self.cands[(index // len(self.cands)) % len(self.cands)](*self.prepared[index])


def measure_task(task: Any, scratch: Path, copies: int, repeats: int, pairs: int,
                 max_cases: int) -> list[dict[str, Any]]:
    import torch

    from aka.harness.candidates import separate_load

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")  # cpu: a smoke test only
    rows = []
    with kernel_pair(task, scratch) as (kernel_task, first, _):
        loaded: list[Callable[..., object]] = [first]
        for serial in range(1, copies):  # as the performance step loads its sides
            with separate_load(serial):
                loaded.append(kernel_task.load_candidate(Path.cwd() / BASELINE_SOURCES_DIR))
        cases = list(kernel_task.cases_for("full"))
        half = copies // 2
        for case in cases[::max(1, math.ceil(len(cases) / max_cases))]:
            config = dataclasses.replace(kernel_task.paired, target_rel_halfwidth=0.0, min_pairs=pairs,
                                         max_pairs=pairs, budget_s=60.0)
            variants: dict[str, list[dict[str, Any]]] = {}
            for rep in range(repeats):
                for index in range(copies):
                    source = SelfPairs(kernel_task, case, loaded[0], loaded[index], device, 7919 * rep + index)
                    variants.setdefault(f"c{index}", []).append(measure(source, device, config))
                source = RotatedPairs(kernel_task, case, loaded[:half], loaded[half:2 * half], device, 7919 * rep)
                variants.setdefault("rotated", []).append(measure(source, device, config))
            rows.append({"task": task.name, "case": case.id, "variants": variants})
            print(task.name, case.id, variants["c0"][0]["method"],
                  {k: [f"{math.exp(ESTIMATORS['trimmed mean 20%'](_log_ratios(m))):.4f}" for m in v]
                   for k, v in variants.items()}, flush=True)
    return rows


def analyse(rows: list[dict[str, Any]]) -> str:
    estimate = ESTIMATORS["trimmed mean 20%"]
    lines = ["# Code placement: self-speedups of separately loaded copies of one kernel", "",
             f"{len(rows)} cases. Per variant: the sd over cases of a case's mean log self-speedup "
             "(`observed`), the sd its repeats predict (`sampling`), their variance ratio (1: no "
             "persistent offset), and the persistent part (sqrt of the excess variance).", "",
             "| variant | cases | observed sd | sampling sd | variance ratio | persistent sd |",
             "|---|---|---|---|---|---|"]
    variants = sorted({v for row in rows for v in row["variants"]}, key=lambda v: (len(v), v))
    for variant in variants:
        means, variances, counts = [], [], []
        for row in rows:
            estimates = [estimate(_log_ratios(m)) for m in row["variants"].get(variant, [])]
            if len(estimates) >= 2:
                means.append(statistics.fmean(estimates))
                variances.append(statistics.variance(estimates))
                counts.append(len(estimates))
        if len(means) < 2:
            continue
        observed = statistics.variance(means)
        sampling = statistics.fmean(v / n for v, n in zip(variances, counts, strict=True))
        lines.append(f"| {variant} | {len(means)} | {math.sqrt(observed):.5f} | {math.sqrt(sampling):.5f} | "
                     f"{observed / sampling:.2f} | {math.sqrt(max(0.0, observed - sampling)):.5f} |")
    lines += ["", "Per case, mean self-speedup - 1 per variant, in 1e-4:", "",
              "| task | case | " + " | ".join(variants) + " |", "|---|---|" + "---|" * len(variants)]
    for row in rows:
        cells = []
        for variant in variants:
            estimates = [estimate(_log_ratios(m)) for m in row["variants"].get(variant, [])]
            cells.append(f"{1e4 * statistics.fmean(estimates):+.1f}" if estimates else "-")
        lines.append(f"| {row['task']} | {row['case']} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser()
    add_suite_arguments(parser, exclude=("e2e/",))
    parser.add_argument("--copies", type=int, default=6)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--pairs", type=int, default=200)
    parser.add_argument("--max-cases", type=int, default=1, help="cases per task, spread over its list")
    args = parser.parse_args()
    rows = suite_rows(args, lambda task, scratch: measure_task(task, scratch, args.copies, args.repeats,
                                                               args.pairs, args.max_cases), indent=None)
    return write_report(analyse(rows), args.out)


if __name__ == "__main__":
    raise SystemExit(main())
