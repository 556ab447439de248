"""Where a task's evaluation time goes: each step command's wall time, for the noop candidate.

    PYTHONPATH=src python3 scripts/eval_time_profile.py [TASK ...] [--out FILE]
    PYTHONPATH=src python3 scripts/eval_time_profile.py TASK --cprofile [--top N]

Prints one row per task (compile / correctness / performance seconds and the total), plus the
bare cost of starting Python with torch and triton imported, which every step command pays.
`--cprofile` instead runs each step command of the noop candidate under cProfile (outside the
sandbox, in a copy of the evaluation directory sharing one build cache, as the evaluator does)
and prints where each step's seconds go.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

from aka.config.tasks import select_tasks  # noqa: E402
from aka.device import detect_device  # noqa: E402
from aka.evaluation.eval_dir import build_eval_dir  # noqa: E402
from aka.evaluation.step_spec import Step, Target, step_environment  # noqa: E402
from aka.evaluation.steps import evaluate_candidate  # noqa: E402
from aka.evaluation.wire import ENV_SHARED_CACHE  # noqa: E402


def startup_seconds(code: str) -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], check=True)
    return time.perf_counter() - start


def cprofile_steps(task_names: list[str], top: int) -> None:
    import pstats

    device = detect_device()
    for task in select_tasks(REPO / "tasks", task_names):
        with tempfile.TemporaryDirectory() as tmp:
            eval_dir, cache = Path(tmp) / "eval", Path(tmp) / "cache"
            eval_dir.mkdir()
            cache.mkdir()
            build_eval_dir(task, eval_dir, None)
            for step in Step:
                profile = Path(tmp) / f"{step.value}.prof"
                env = step_environment(
                    task,
                    device,
                    step,
                    Target.CANDIDATE,
                    eval_dir,
                    {ENV_SHARED_CACHE: str(cache), "AKA_RESULT_FILE": str(Path(tmp) / "r.json")},
                )
                start = time.perf_counter()
                subprocess.run(
                    [sys.executable, "-m", "cProfile", "-o", str(profile), "harness.py", step.value],
                    cwd=eval_dir,
                    env=env,
                    check=True,
                )
                print(f"\n## {task.name} {step.value}: {time.perf_counter() - start:.2f} s", flush=True)
                stats = pstats.Stats(str(profile))
                stats.sort_stats("cumulative").print_stats(top)
                stats.sort_stats("tottime").print_stats(top // 2)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("tasks", nargs="*", default=["all"])
    parser.add_argument("--out", type=Path)
    parser.add_argument("--cprofile", action="store_true", help="where each step's seconds go (cProfile)")
    parser.add_argument("--top", type=int, default=40)
    args = parser.parse_args()
    if args.cprofile:
        cprofile_steps(args.tasks, args.top)
        return 0
    device = detect_device()
    with_cuda = startup_seconds("import torch, triton; torch.zeros(1, device=0) if torch.cuda.is_available() else 0")
    lines = [
        f"# Evaluation time per step on {device.name}",
        "",
        f"python + import torch: {startup_seconds('import torch'):.2f} s; "
        f"+ import triton + cuda init: {with_cuda:.2f} s",
        "",
        "| task | compile s | correctness s | performance s | total s | verdict |",
        "|---|---|---|---|---|---|",
    ]
    for task in select_tasks(REPO / "tasks", args.tasks):
        with tempfile.TemporaryDirectory() as tmp:
            start = time.perf_counter()
            outcomes = evaluate_candidate(task, task.directory, Path(tmp), device)
            total = time.perf_counter() - start
            performance = [o for o in outcomes if o.step.value == "performance"]
            cases = performance[0].cases if performance else []
            details = "; ".join(f"{c.id}: {c.time_ms or 0:.4f} ms x{c.samples} {c.speedup or 0:.4f}" for c in cases)
        seconds = {o.step.value: sum(c.seconds for c in o.commands) for o in outcomes}
        verdict = next((o.failure.value for o in outcomes if not o.passed), "pass")
        lines.append(
            f"| {task.name} | {seconds.get('compile', 0):.1f} | {seconds.get('correctness', 0):.1f} | "
            f"{seconds.get('performance', 0):.1f} | {total:.1f} | {verdict} |"
        )
        print(lines[-1], details, flush=True)
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        args.out.write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
