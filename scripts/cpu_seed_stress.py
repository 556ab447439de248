"""How often does the CPU profile fail an honest candidate? Many evaluation seeds, one task.

The correctness step draws a fresh evaluation seed on every run, so a candidate that differs from
the reference by rounding alone fails a run now and then: a flaky test in CI, a wrong verdict for
a user. This script checks one task's untouched sources (or a solution, with --solution) on every
CPU case (`ci` profile and held-out `ci` cases) for evaluation seeds 0..N-1 (reproducible), under
Triton's interpreter, exactly as the correctness step compares them, and prints each failing
(case, seed) with the comparison's message. Exit status 1 when anything failed.

    PYTHONPATH=src python scripts/cpu_seed_stress.py tasks/torch2triton/llm/rotary_embedding \
        [--solution solutions/examples/torch2triton/llm/rotary_embedding] [--seeds 200]
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
from pathlib import Path

os.environ["TRITON_INTERPRET"] = "1"  # before Triton is imported: kernels run on the CPU

import torch  # noqa: E402

from aka.harness.candidates import import_candidate  # noqa: E402
from aka.harness.cases import input_distribution  # noqa: E402
from aka.harness.checks import check_plan  # noqa: E402
from aka.harness.compare import compare_outputs  # noqa: E402
from aka.harness.task import expected_output, make_case_inputs  # noqa: E402


def stress(task_dir: Path, solution: Path | None, seeds: int) -> int:
    """Failing (case, seed) pairs, printed; returns how many."""
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp) / "task"
        shutil.copytree(task_dir, work)
        if solution is not None:
            shutil.copytree(solution, work, dirs_exist_ok=True)
        os.chdir(work)
        sys.path.insert(0, str(work))
        task = import_candidate("harness").TASK
        function = task.load_candidate(work)
        device = torch.device("cpu")
        failures = 0
        cases = [*task.cases_for("ci"), *task.cases_for("heldout_ci")]  # heldout.py of the copy in cwd
        for case in cases:
            for eval_seed in range(seeds):
                # The case's own two seeds are the same on every run: checked once, with seed 0.
                for seed, distribution in check_plan(case, eval_seed)[2:] if eval_seed else check_plan(case, 0):
                    with input_distribution(distribution):
                        inputs = make_case_inputs(task, case, seed, device)
                    expected = expected_output(task, inputs, device)
                    comparison = compare_outputs(function(*inputs), expected, task.tolerances)
                    if not comparison.correct:
                        failures += 1
                        print(f"FAIL {case.id} seed {seed} ({distribution}): {comparison.message}", flush=True)
        print(
            f"{task.name}{' + solution' if solution else ''}: {failures} failures over {len(cases)} cases "
            f"x {seeds} evaluation seeds",
            flush=True,
        )
        return failures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("task", type=Path)
    parser.add_argument("--solution", type=Path)
    parser.add_argument("--seeds", type=int, default=200)
    args = parser.parse_args()
    return 1 if stress(args.task.resolve(), args.solution.resolve() if args.solution else None, args.seeds) else 0


if __name__ == "__main__":
    raise SystemExit(main())
