"""A/A noise of the evaluator (GPU): the noop agent over every task, repeated, next to triton's
`do_bench` on the same kernels in the same run.

    PYTHONPATH=src python3 benchmarks/aa_noise.py [--repeats 3] [--tasks all] [--out FILE]

The task's baseline is measured and frozen once, as a run does before its agent starts; then for
each repeat the real evaluator judges the noop candidate (the task's own kernel) against the
baseline (the same kernel, from the pristine copy), exactly as a run's evaluation does (compile,
correctness, paired timing, the frozen baseline's builds reused): the self-speedup should be 1.
Tasks whose baseline is the PyTorch reference are measured with `baseline: source` here, so that
both sides are the same kernel. Then `do_bench(return_mode="median")` times the two copies of each
case's kernel, `--repeats` times, holding the device alone as a performance step does, in two ways:
the original's (each side in its own fresh process on its own inputs, as its harness times the
baseline before the agent and the candidate after it) and the most favourable one (both copies
alternately in this process on the same input tensors). Its self-speedup is the mean over cases
of the ratio of the two medians. `--parallel N`
measures N tasks at once and each task's repeats at once: only their performance steps and
do_bench need the GPU alone, and the device lock serializes exactly those. The noise band of a
method is the largest |self-speedup - 1| over the repeats.
"""

from __future__ import annotations

import argparse
import faulthandler
import functools
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO / "src"), str(REPO / "benchmarks")]

from suite_copy import (  # noqa: E402
    copy_tasks,
    evaluate,
    freeze_baseline,
    kernel_pair,
    loaded_harness,
    pair_dir,
    shard,
    write_report,
)

from aka.config.tasks import Task, select_tasks  # noqa: E402
from aka.device import DeviceInfo, detect_device  # noqa: E402
from aka.evaluation.device_lock import DeviceLock  # noqa: E402
from aka.evaluation.wire import BASELINE_SOURCES_DIR  # noqa: E402

IN_PROCESS_TIMING = threading.Lock()  # do_bench runs in this process, whose working directory it changes


def do_bench_ratios(task: Task, repeats: int, scratch: Path) -> list[float]:
    """Task-level do_bench self-speedups: per repeat, the mean over cases of median(A)/median(A')."""
    import torch
    import triton.testing

    from aka.harness.task import make_case_inputs

    with kernel_pair(task, scratch) as (kernel_task, first, second):
        per_repeat: list[list[float]] = [[] for _ in range(repeats)]
        for case in kernel_task.cases_for("full"):
            inputs = make_case_inputs(kernel_task, case, case.seed, torch.device("cuda"))
            call_first = functools.partial(first, *inputs)
            call_second = functools.partial(second, *inputs)
            for rep in range(repeats):
                a = triton.testing.do_bench(call_first, return_mode="median")
                b = triton.testing.do_bench(call_second, return_mode="median")
                per_repeat[rep].append(a / b)
    return [statistics.fmean(r) for r in per_repeat]


def do_bench_separate_ratios(task: Task, repeats: int, scratch: Path) -> list[float]:
    """Task-level do_bench self-speedups the original's way: per repeat, each side's medians from
    its own process (fresh inputs, fresh allocations), then the mean over cases of their ratio."""
    eval_dir = pair_dir(task, scratch / "separate")
    ratios: list[float] = []
    for _ in range(repeats):
        first, second = (_time_side_in_child(eval_dir, side) for side in ("candidate", "baseline"))
        ratios.append(statistics.fmean(a / b for a, b in zip(first, second, strict=True)))
    return ratios


def _time_side_in_child(eval_dir: Path, side: str) -> list[float]:
    child = subprocess.run(
        [sys.executable, __file__, "--do-bench-side", side, "--eval-dir", str(eval_dir)],
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    if child.returncode != 0:
        raise RuntimeError(f"do_bench of the {side} in its own process failed: {child.stderr[-500:]}")
    medians: list[float] = json.loads(child.stdout.strip().splitlines()[-1])
    return medians


def time_side(eval_dir: Path, side: str) -> list[float]:
    """In a child process: one side's do_bench median per case, the device held alone."""
    import torch
    import triton.testing

    from aka.harness.task import make_case_inputs

    with loaded_harness(eval_dir) as kernel_task:
        kernel = kernel_task.load_candidate(eval_dir if side == "candidate" else eval_dir / BASELINE_SOURCES_DIR)
        medians: list[float] = []
        with DeviceLock.for_device(detect_device()).hold(exclusive=True):
            for case in kernel_task.cases_for("full"):
                inputs = make_case_inputs(kernel_task, case, case.seed, torch.device("cuda"))
                medians.append(triton.testing.do_bench(functools.partial(kernel, *inputs), return_mode="median"))
                del inputs
        return medians


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--tasks", nargs="*", default=["all"])
    parser.add_argument("--shard", default="1/1", help="K/N: every N-th task from the K-th (one GPU each)")
    parser.add_argument(
        "--parallel",
        type=int,
        default=1,
        help="tasks measured at once (their performance steps still take the GPU one at a time)",
    )
    parser.add_argument("--do-bench-every", type=int, default=1, help="do_bench on every N-th task (0: none)")
    parser.add_argument("--out", type=Path, help="markdown table")
    parser.add_argument("--json", type=Path, help="rows as JSON, rewritten after every task (to --merge shards)")
    parser.add_argument("--merge", type=Path, nargs="*", help="render the table from shards' --json files")
    parser.add_argument("--keep-logs", type=Path, help="folder to copy each evaluation's log into")
    parser.add_argument("--do-bench-side", choices=["candidate", "baseline"], help=argparse.SUPPRESS)
    parser.add_argument("--eval-dir", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.do_bench_side:
        print(json.dumps(time_side(args.eval_dir, args.do_bench_side)))
        return 0
    if args.merge:
        merged, superseded = latest_rows([(path.name, json.loads(path.read_text())) for path in args.merge])
        return write_report(render(merged, "merged shards", args.repeats, superseded), args.out)
    device = detect_device()
    tasks = shard(select_tasks(REPO / "tasks", args.tasks), args.shard)
    rows: dict[str, dict[str, Any]] = {}
    written = threading.Lock()
    with tempfile.TemporaryDirectory() as tmp:
        keep_logs_when_cut(Path(tmp), args.keep_logs)
        root = Path(tmp) / "tasks"
        copy_tasks(tasks, root, source_baseline=True)
        repos = Path(tmp) / "repos"
        copies = select_tasks(root, [t.name for t in tasks])
        benched = {
            task.name for index, task in enumerate(copies) if args.do_bench_every and index % args.do_bench_every == 0
        }

        def measure(task: Task) -> None:
            try:
                row = measure_task(task, Path(tmp), device, repos, args, task.name in benched)
            except Exception as exc:  # one task's trouble must not lose the others' rows
                row = {
                    "task": task.name,
                    "statuses": [f"error {type(exc).__name__}"],
                    "ours": [],
                    "ci_half": [],
                    "theirs": [],
                    "seconds": [],
                    "message": str(exc)[:300],
                }
            print(row, flush=True)
            with written:
                rows[task.name] = row
                if args.json:
                    args.json.write_text(json.dumps([rows[t.name] for t in copies if t.name in rows], indent=1))

        with ThreadPoolExecutor(max_workers=max(args.parallel, 1)) as pool:
            list(pool.map(measure, copies))
    ordered = [rows[t.name] for t in tasks if t.name in rows]
    return write_report(render(ordered, f"{device.name} ({device.arch or 'cpu'})", args.repeats), args.out)


def keep_logs_when_cut(tmp: Path, keep: Path | None) -> None:
    """On SIGTERM (a device call cut at its limit): every thread's stack, and the logs of the
    evaluations still in flight, which the temporary folder takes with it. Session 52's A/A lost
    the log of an evaluation that made no progress for eight minutes, and with it the cause."""

    def cut(signum: int, frame: object) -> None:
        faulthandler.dump_traceback(all_threads=True)
        if keep is not None:
            for log in sorted(tmp.glob("*/**/*.log")):
                evaluation = log.relative_to(tmp).parts[0]
                if (keep / f"{evaluation}.log").exists() or log.stat().st_size > 4 << 20:
                    continue  # finished: its log was kept
                copy = keep / "unfinished" / log.relative_to(tmp)
                copy.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(log, copy)
        os._exit(128 + signum)

    signal.signal(signal.SIGTERM, cut)


def measure_task(
    task: Task, tmp: Path, device: DeviceInfo, repos: Path, args: argparse.Namespace, bench: bool
) -> dict[str, Any]:
    """The task's frozen baseline, `args.repeats` noop evaluations (at once: the device lock
    gives each performance step the GPU alone) and, where `bench`, do_bench's self-speedups."""
    baseline = freeze_baseline(task, tmp / f"{task.slug}-baseline", device, repos)
    if not baseline.record.usable:
        return {
            "task": task.name,
            "statuses": [f"baseline {baseline.record.status.value}"],
            "ours": [],
            "ci_half": [],
            "theirs": [],
            "seconds": [],
            "message": baseline.record.message,
            "baseline_seconds": baseline.seconds,
        }
    with ThreadPoolExecutor(max_workers=args.repeats) as pool:
        runs = list(
            pool.map(
                lambda rep: evaluate(task, None, tmp / f"{task.slug}-{rep}", device, baseline, repos),
                range(args.repeats),
            )
        )
    if args.keep_logs:
        args.keep_logs.mkdir(parents=True, exist_ok=True)
        for rep in range(args.repeats):
            log = tmp / f"{task.slug}-{rep}" / "evaluation.log"
            if log.is_file():
                shutil.copyfile(log, args.keep_logs / f"{task.slug}-{rep}.log")
    theirs: list[float] = []
    theirs_same: list[float] = []
    do_bench_error = None
    if bench and device.is_gpu and runs[0]["speedup"]:
        try:  # do_bench's trouble must not lose the evaluator's readings
            theirs = do_bench_separate_ratios(task, args.repeats, tmp / f"{task.slug}-do-bench")
            with IN_PROCESS_TIMING, DeviceLock.for_device(device).hold(exclusive=True):
                theirs_same = do_bench_ratios(task, args.repeats, tmp)
        except Exception as exc:
            do_bench_error = f"{type(exc).__name__}: {str(exc)[:300]}"
    return {
        "task": task.name,
        "statuses": [r["verdict"] for r in runs],
        "ours": [r["speedup"] for r in runs if r["speedup"]],
        "ci_half": [r["ci_half"] for r in runs if r["speedup"]],
        "theirs": theirs,
        "theirs_same": theirs_same,
        "do_bench": "separate processes",
        "do_bench_error": do_bench_error,
        "seconds": [r["seconds"] for r in runs],
        "message": next((r["message"] for r in runs if r["message"]), None),  # a failing repeat's, not only the first's
        "messages": [r["message"] for r in runs],
        "baseline_seconds": baseline.seconds,
        "step_seconds": [r["step_seconds"] for r in runs],
        "cases": [r["cases"] for r in runs],
        "isolation": sorted({", ".join(r.get("isolation", [])) for r in runs}),
    }


def _do_bench_readings(row: dict[str, Any]) -> tuple[list[float], list[float]]:
    """(a process per side, one process) readings; rows written before the first existed hold
    only the second, under "theirs"."""
    if row.get("do_bench") == "separate processes":
        return row["theirs"], row.get("theirs_same", [])
    return [], row["theirs"]


def latest_rows(files: list[tuple[str, list[dict[str, Any]]]]) -> tuple[list[dict[str, Any]], list[str]]:
    """One row per task: a later file's row replaces an earlier one (a re-measurement after a
    change), in the earlier row's place; the replaced readings are listed, not dropped silently."""
    rows: dict[str, dict[str, Any]] = {}
    superseded: list[str] = []
    for name, file_rows in files:
        for row in file_rows:
            old = rows.get(row["task"])
            if old is not None:
                readings = ", ".join(f"{s:.4f}" for s in old["ours"]) or ", ".join(old["statuses"])
                superseded.append(f"{row['task']}: {readings} (replaced by {name})")
            rows[row["task"]] = row
    return list(rows.values()), superseded


def render(rows: list[dict[str, Any]], device: str, repeats: int, superseded: list[str] | None = None) -> str:
    lines = [
        f"# A/A noise on {device}",
        f"Date (UTC): {datetime.now(timezone.utc).isoformat(timespec='seconds')}",
        f"Command: `PYTHONPATH=src python3 benchmarks/aa_noise.py --repeats {repeats}` (per GPU shard: "
        "`--shard K/N --json F`, then `--merge F...`)",
        "",
        "| task | evaluator self-speedups | mean 95% CI | evaluator band | do_bench, a process per side "
        "| its band | band ratio | do_bench, one process, same inputs | its band | evaluation s (median) |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    within_1 = within_2 = counted = 0
    bands: dict[str, list[tuple[float, float]]] = {"separate": [], "same": []}
    for row in rows:
        ours = row["ours"]
        if not ours:
            lines.append(
                f"| {row['task']} | {', '.join(row['statuses'])}: {(row['message'] or '')[:120]} | | | | | | | | |"
            )
            continue
        band = max(abs(s - 1) for s in ours)
        counted += 1
        within_1 += band <= 0.01
        within_2 += band <= 0.02
        separate, same = _do_bench_readings(row)
        cells = []
        for key, theirs in (("separate", separate), ("same", same)):
            their_band = max((abs(s - 1) for s in theirs), default=float("nan"))
            if theirs:
                bands[key].append((band, their_band))
            cells.append(f"{', '.join(f'{s:.4f}' for s in theirs)} | {their_band:.4f}" if theirs else "not run | ")
        ratio = max((abs(s - 1) for s in separate), default=float("nan")) / band if band > 0 else float("inf")
        shown_ratio = f"{ratio:.1f}x" if separate else ""
        ci_half = statistics.fmean(row["ci_half"])
        lines.append(
            f"| {row['task']} | {', '.join(f'{s:.4f}' for s in ours)} | +-{ci_half:.4f} | {band:.4f} "
            f"| {cells[0]} | {shown_ratio} | {cells[1]} | {statistics.median(row['seconds']):.1f} |"
        )
    lines.append(
        f"\nTasks within +-1%: {within_1}/{counted}; within +-2%: {within_2}/{counted} "
        f"(of {len(rows)} tasks; the others did not pass, see their rows)."
    )
    for key, how in (
        ("separate", "do_bench with a process per side (the original's way)"),
        ("same", "do_bench with both sides in one process on the same inputs"),
    ):
        if not bands[key]:
            continue
        ours_median = statistics.median(b for b, _ in bands[key])
        theirs_median = statistics.median(t for _, t in bands[key])
        ratios = [theirs / max(ours, 1e-9) for ours, theirs in bands[key]]
        lines.append(
            f"Against {how}, on its {len(ratios)} tasks: median band evaluator {ours_median:.4f}, do_bench "
            f"{theirs_median:.4f} (the evaluator's is {theirs_median / max(ours_median, 1e-9):.1f}x narrower); "
            f"per task narrower on {sum(r > 1 for r in ratios)}/{len(ratios)}, at least 5x narrower on "
            f"{sum(r >= 5 for r in ratios)}, median ratio {statistics.median(ratios):.1f}x."
        )
    isolations = sorted({features for row in rows for features in row.get("isolation", [])})
    lines.append(f"Isolation of the evaluations: {' | '.join(isolations) or 'not recorded'}.")
    frozen = [row for row in rows if "baseline_seconds" in row]  # older rows compiled the baseline each time
    compiled = [row for row in rows if "baseline_seconds" not in row and row["seconds"]]
    if any(row["seconds"] for row in frozen):  # a task whose baseline failed has no evaluations
        lines.append(
            "Evaluation time per task (compile, correctness, paired timing; the baseline frozen once "
            f"and its builds reused, as in a run): {_median_seconds(frozen)}."
        )
    if frozen:
        lines.append(
            "Baseline measurement (once per task, before the agent): "
            f"median {statistics.median(row['baseline_seconds'] for row in frozen):.1f} s."
        )
    if compiled:
        lines.append(
            "Evaluation time per task in rows measured before the baseline was frozen (each evaluation "
            f"compiled the baseline too): {_median_seconds(compiled)}."
        )
    if superseded:
        lines.append(
            "Rows replaced by a later measurement of the same task (evaluator self-speedups): "
            + "; ".join(superseded)
            + "."
        )
    return "\n".join(lines) + "\n"


def _median_seconds(rows: list[dict[str, Any]]) -> str:
    seconds = [s for row in rows for s in row["seconds"]]
    return f"median {statistics.median(seconds):.1f} s over {sum(bool(row['seconds']) for row in rows)} tasks"


if __name__ == "__main__":
    raise SystemExit(main())
