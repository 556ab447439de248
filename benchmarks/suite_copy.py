"""Copies of tasks for the suite benchmarks, and sharding over GPUs (one process per GPU).

A/A runs time the task's own sources on both sides (`baseline: source`); a task whose editable
file is a skeleton (instruction2triton) gets its solution from solutions/examples on both sides
instead. Held-out files are dropped: the benchmarks do not measure generalization.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import importlib.util
import json
import os
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import yaml

from aka.authoring.task_tools import SKELETON_FAMILIES
from aka.config.tasks import Task, select_tasks, task_identity
from aka.device import DeviceInfo
from aka.evaluation.baseline import BaselineRecord, baseline_builds, measure_baseline
from aka.evaluation.eval_dir import build_eval_dir
from aka.evaluation.step_report import CaseReport
from aka.evaluation.step_spec import Step
from aka.evaluation.steps import evaluate_candidate
from aka.evaluation.wire import BASELINE_SOURCES_DIR
from aka.run.repository import materialize

REPO = Path(__file__).resolve().parents[1]
SOLUTIONS = REPO / "solutions" / "examples"


def shard(tasks: list[Task], spec: str) -> list[Task]:
    """`K/N`: tasks K, K+N, K+2N, ... (1-based), so N processes split a suite evenly."""
    index, count = (int(part) for part in spec.split("/"))
    if not 1 <= index <= count:
        raise SystemExit(f"--shard {spec}: use K/N with 1 <= K <= N")
    return tasks[index - 1 :: count]


def copy_tasks(tasks: list[Task], root: Path, source_baseline: bool) -> None:
    for task in tasks:
        target = root / task.name
        shutil.copytree(task.directory, target)
        config_path = target / "config.yaml"
        config = yaml.safe_load(config_path.read_text())
        for hidden in config.pop("hidden_files", []) or []:
            (target / hidden).unlink(missing_ok=True)
        if source_baseline:
            config["baseline"] = "source"
            if task.family in SKELETON_FAMILIES and (SOLUTIONS / task.name).is_dir():
                for rel in task.config.source_file_path:
                    shutil.copyfile(SOLUTIONS / task.name / rel, target / rel)
        config_path.write_text(yaml.safe_dump(config, sort_keys=False))


def measure_each(
    tasks: list[Task],
    measure: Callable[[Task, Path], list[dict[str, Any]]],
    json_path: Path | None,
    indent: int | None = 1,
) -> list[dict[str, Any]]:
    """The rows `measure(task, scratch)` gives for each task's copy (with `baseline: source`), in
    turn. One task's trouble is printed, not fatal; the rows so far are rewritten to `json_path`
    after every task, so a run cut short keeps them."""
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "tasks"
        copy_tasks(tasks, root, source_baseline=True)
        for task in select_tasks(root, [t.name for t in tasks]):
            try:
                rows += measure(task, Path(tmp) / task.slug)
            except Exception as exc:  # one task's trouble must not lose the others' rows
                print(f"{task.name}: {type(exc).__name__}: {exc}", flush=True)
            if json_path:
                json_path.write_text(json.dumps(rows, indent=indent))
    return rows


def add_suite_arguments(parser: argparse.ArgumentParser, exclude: tuple[str, ...] = ()) -> None:
    """The options every per-task benchmark shares: which tasks, which shard, where rows go."""
    parser.add_argument("--tasks", nargs="*", default=["all"])
    parser.add_argument("--exclude", nargs="*", default=list(exclude), help="task name prefixes left out")
    parser.add_argument("--shard", default="1/1", help="K/N: every N-th task from the K-th (one GPU each)")
    parser.add_argument("--json", type=Path, help="rows as JSON, rewritten after every task (to --merge shards)")
    parser.add_argument("--merge", type=Path, nargs="*", help="render the report from shards' --json files")
    parser.add_argument("--out", type=Path, help="the report, as markdown")


def suite_rows(
    args: argparse.Namespace, measure: Callable[[Task, Path], list[dict[str, Any]]], indent: int | None = 1
) -> list[dict[str, Any]]:
    """The rows of the `--merge` files, else what `measure` gives for the selected tasks' copies."""
    if args.merge:
        return [row for path in args.merge for row in json.loads(path.read_text())]
    tasks = [t for t in select_tasks(REPO / "tasks", args.tasks) if not t.name.startswith(tuple(args.exclude))]
    return measure_each(shard(tasks, args.shard), measure, args.json, indent)


def write_report(text: str, out: Path | None) -> int:
    """Print the report, and write it to `out` when given; 0, the exit status."""
    print(text)
    if out:
        out.write_text(text)
    return 0


@dataclasses.dataclass(frozen=True)
class FrozenBaseline:
    """A task's baseline measured once, as a run measures it before the agent starts; its builds
    seed every evaluation's performance step (`evaluate(..., baseline=...)`), as in a run."""

    builds: Path
    record: BaselineRecord
    seconds: float


def freeze_baseline(task: Task, scratch: Path, device: DeviceInfo, repos: Path) -> FrozenBaseline:
    """`aka.evaluation.baseline.measure_baseline` on the task's copy, into a scratch run directory."""
    run_dir = scratch / "run"
    started = time.monotonic()
    record = measure_baseline(run_dir, materialize(task, repos), task_identity(task), device, scratch / "baseline")
    return FrozenBaseline(baseline_builds(run_dir, task), record, round(time.monotonic() - started, 1))


def evaluate(
    task: Task,
    solution: Path | None,
    scratch: Path,
    device: DeviceInfo,
    baseline: FrozenBaseline | None = None,
    repos: Path | None = None,
) -> dict[str, Any]:
    """One evaluation as a run makes it, of the task's own sources or of `solution`'s copies of
    them (as the replay agent places them); the task-level numbers come from the paired cases.
    With `baseline`, its builds seed the performance step as a run's frozen baseline does (else
    the baseline is compiled in that step too). `repos`: where repository tasks are cloned
    (default: in `scratch`), shared to clone once."""
    task = materialize(task, repos or scratch / "repos")
    candidate = scratch / "candidate"
    shutil.copytree(task.directory, candidate)
    for rel in task.config.source_file_path if solution is not None else ():
        shutil.copyfile(solution / rel, candidate / rel)
    started = time.monotonic()
    outcomes = evaluate_candidate(task, candidate, scratch, device, trusted_cache=baseline.builds if baseline else None)
    seconds = time.monotonic() - started
    failed = next((o for o in outcomes if not o.passed), None)
    cases: list[CaseReport] = next((o.cases for o in outcomes if o.step is Step.PERFORMANCE), [])
    timed = [c for c in cases if c.speedup and c.time_ms and c.baseline_time_ms]
    ok = failed is None and bool(timed)
    return {
        "verdict": "PASS" if ok else (failed.failure.value if failed else "untimed"),
        "message": (failed.message or "")[:200] if failed else None,
        "speedup": statistics.fmean(c.speedup or 0 for c in timed) if ok else None,
        "ci_half": statistics.fmean(((c.speedup_ci_high or 1) - (c.speedup_ci_low or 1)) / 2 for c in timed)
        if ok
        else None,
        "base_ms": statistics.fmean(c.baseline_time_ms or 0 for c in timed) if timed else None,
        "ms": statistics.fmean(c.time_ms or 0 for c in timed) if timed else None,
        "ci": [
            statistics.fmean(c.speedup_ci_low or 0 for c in timed),
            statistics.fmean(c.speedup_ci_high or 0 for c in timed),
        ]
        if ok
        else [None, None],
        "seconds": round(seconds, 1),
        "step_seconds": {o.step.value: round(sum(c.seconds for c in o.commands), 2) for o in outcomes},
        "cases": [
            {
                "id": c.id,
                "speedup": c.speedup,
                "ci": [c.speedup_ci_low, c.speedup_ci_high],
                "method": c.timing_method,
                "base_ms": c.baseline_time_ms,
                "pairs": c.samples,
                "late_pairs": c.late_pairs,
                "unexplained_ms": c.unexplained_ms,
                "span_speedup": c.span_speedup,
            }
            for c in timed
        ],
        "isolation": outcomes[-1].isolation if outcomes else [],
    }


@contextlib.contextmanager
def kernel_pair(
    task: Task, scratch: Path, solution: Path | None = None
) -> Iterator[tuple[Any, Callable[..., object], Callable[..., object]]]:
    """The task's harness object and two separately loaded kernels: the evaluation directory's
    (the task's own sources, or `solution`'s copies of them) and `.aka_baseline/`'s, timed in
    this process."""
    eval_dir = pair_dir(task, scratch, solution)
    with loaded_harness(eval_dir) as kernel_task:
        baseline_dir = eval_dir / BASELINE_SOURCES_DIR
        yield kernel_task, kernel_task.load_candidate(eval_dir), kernel_task.load_candidate(baseline_dir)


def pair_dir(task: Task, scratch: Path, solution: Path | None = None) -> Path:
    """An evaluation directory with the task's (or `solution`'s) sources and the baseline's in
    `.aka_baseline/`, as `kernel_pair` loads them."""
    task = materialize(task, scratch / "repos")
    eval_dir = scratch / task.slug
    build_eval_dir(task, eval_dir, solution)
    return eval_dir


@contextlib.contextmanager
def loaded_harness(eval_dir: Path) -> Iterator[Any]:
    """The harness object of an evaluation directory, loaded in this process with that directory
    as the working directory (a task's sources find their files relative to it)."""
    before = Path.cwd()
    os.chdir(eval_dir)
    try:
        spec = importlib.util.spec_from_file_location(f"bench_{eval_dir.name}", eval_dir / "harness.py")
        assert spec and spec.loader
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        yield module.TASK
    finally:
        os.chdir(before)
