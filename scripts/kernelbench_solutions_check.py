"""Template-style solutions of KernelBench problems through the evaluator, each beside its zeros and
NaN variants: the solution must pass and neither variant may (issue 20's "done when").

    PYTHONPATH=src python3 scripts/kernelbench_solutions_check.py KERNELBENCH_DIR \
        [--solutions solutions/kernelbench] [--through correctness] [--out table.md]

KERNELBENCH_DIR holds level1/, level2/ (KernelBench's `KernelBench/` folder, or files of your own
in that format). Every problem with a solution (`<solutions>/level{N}/<task name>/kernel.py`) is
imported as a torch2triton task, its reference probed, and three candidates evaluated from the
pristine task: the solution; the solution with its output replaced by zeros after its kernels ran;
the same with NaN. A variant is rejected when it is `incorrect`, or when the judge stops on the task
as defective (a reference that zeros match: `infra_error` naming it, no reward for any kernel).
`--through correctness` stops there (on the CPU the interpreter times nothing worth a verdict, and
KernelBench's sizes take it minutes a call). Exits 1 unless every row is as required.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

from aka.authoring.kernelbench import import_kernelbench, snake_case  # noqa: E402
from aka.config.tasks import load_task  # noqa: E402
from aka.device import detect_device  # noqa: E402
from aka.evaluation.steps import evaluate_candidate  # noqa: E402
from aka.results.task_result import FailureKind  # noqa: E402

DEFECT = "cannot tell a wrong kernel from a right one"  # aka.harness.checks.zeros_defect
VARIANTS = {
    "zeros": "torch.zeros_like(out)",
    "nan": "torch.full_like(out, float('nan'))",
}


def variant(source: str, fill: str) -> str:
    """The solution, its forward's output replaced after its kernels ran (allocations only: the
    torch-operator policy lets them through, so the comparison is what must catch it)."""
    return source + (
        "\n\n_solution_forward = ModelNew.forward\n\n\n"
        "def _replaced_forward(self, *args):\n"
        "    out = _solution_forward(self, *args)\n"
        f"    return {fill}\n\n\n"
        "ModelNew.forward = _replaced_forward\n"
    )


def judge(task_dir: Path, root: Path, source: str, through: int) -> tuple[str, str]:
    """(verdict, message): the first failing step's kind, or `none` with the fastest speedup."""
    task = load_task(root, task_dir)
    with tempfile.TemporaryDirectory() as tmp:
        candidate = Path(tmp) / "candidate"
        candidate.mkdir()
        (candidate / "kernel.py").write_text(source)
        outcomes = evaluate_candidate(task, candidate, Path(tmp) / "scratch", detect_device(), through=through)
    failed = next((o for o in outcomes if not o.passed), None)
    if failed is None:
        fastest = max((c.speedup or 0.0 for o in outcomes for c in o.cases), default=0.0)
        return "none", f"fastest case {fastest:.2f}x" if fastest else "correct"
    return failed.failure.value, (failed.message or "")[:300]


def rejected(verdict: str, message: str) -> bool:
    return verdict == FailureKind.INCORRECT.value or (verdict == FailureKind.INFRA_ERROR.value and DEFECT in message)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("kernelbench", type=Path, help="the folder holding level1/, level2/")
    parser.add_argument("--solutions", type=Path, default=REPO / "solutions" / "kernelbench")
    parser.add_argument("--through", choices=("correctness", "performance"), default="performance")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    through = 2 if args.through == "correctness" else 3
    lines = [
        "| problem | solution | zeros | NaN | seconds |",
        "|---|---|---|---|---|",
    ]
    failures = 0
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "tasks"
        for level_dir in sorted(args.solutions.glob("level*")):
            level = int(level_dir.name.removeprefix("level"))
            wanted = {d.name for d in level_dir.iterdir() if (d / "kernel.py").is_file()}
            problems = Path(tmp) / "problems" / level_dir.name
            problems.mkdir(parents=True)
            for problem in sorted((args.kernelbench / level_dir.name).glob("*.py")):
                if snake_case(problem.stem) in wanted:
                    (problems / problem.name).write_bytes(problem.read_bytes())
            imported = import_kernelbench(problems, "torch2triton", root, level=level, probe=False)
            missing = wanted - {d.name for d in imported.created}
            if missing:
                names = ", ".join(sorted(missing))
                raise SystemExit(f"{args.kernelbench / level_dir.name}: no problem file for {names}")
            for task_dir in imported.created:
                source = (level_dir / task_dir.name / "kernel.py").read_text()
                started = time.monotonic()
                verdicts = {"solution": judge(task_dir, root, source, through)}
                for name, fill in VARIANTS.items():
                    verdicts[name] = judge(task_dir, root, variant(source, fill), through)
                seconds = time.monotonic() - started
                solution, message = verdicts["solution"]
                defect = solution == FailureKind.INFRA_ERROR.value and DEFECT in message
                required = {"solution": solution == "none" or defect}
                required |= {name: rejected(*verdicts[name]) for name in VARIANTS}
                failures += not all(required.values())
                cells = [
                    f"{'OK' if required[kind] else 'MISSED'}: {verdicts[kind][0]} ({verdicts[kind][1][:120]})".replace(
                        "|", "/"
                    )
                    for kind in required
                ]
                lines.append(f"| level{level}/{task_dir.name} | {' | '.join(cells)} | {seconds:.0f} |")
                print(lines[-1], flush=True)
    lines.append(f"\n{len(lines) - 2 - failures} of {len(lines) - 2} problems as required.")
    text = "\n".join(lines) + "\n"
    if args.out:
        args.out.write_text(text)
    print(text, end="")
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
