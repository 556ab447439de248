"""Where a task's evaluation time goes: each step command's wall time, for the noop candidate.

    PYTHONPATH=src python3 scripts/eval_time_profile.py [TASK ...] [--out FILE]

Prints one row per task (compile / correctness / performance seconds and the total), plus the
bare cost of starting Python with torch and triton imported, which every step command pays.
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

from aka.device import detect_device  # noqa: E402
from aka.evaluator import evaluate_candidate  # noqa: E402
from aka.tasks import select_tasks  # noqa: E402


def startup_seconds(code: str) -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], check=True)
    return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("tasks", nargs="*", default=["all"])
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    device = detect_device()
    with_cuda = startup_seconds("import torch, triton; torch.zeros(1, device=0) if torch.cuda.is_available() else 0")
    lines = [f"# Evaluation time per step on {device.name}", "",
             f"python + import torch: {startup_seconds('import torch'):.2f} s; "
             f"+ import triton + cuda init: {with_cuda:.2f} s", "",
             "| task | compile s | correctness s | performance s | total s | verdict |", "|---|---|---|---|---|---|"]
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
        lines.append(f"| {task.name} | {seconds.get('compile', 0):.1f} | {seconds.get('correctness', 0):.1f} | "
                     f"{seconds.get('performance', 0):.1f} | {total:.1f} | {verdict} |")
        print(lines[-1], details, flush=True)
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        args.out.write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
