"""The original AgentKernelArena's task folders through our evaluator: a baseline A/A per task.

For every task under TASKS_ROOT (a clone of the original's `tasks/`, or any selection of it) the
baseline is measured as a run measures it (`measure_baseline`, from the pristine folder: compile,
correctness, performance), then the task's own untouched sources are timed as the candidate (a
noop agent; its compile and correctness are the baseline's, already passed on the same sources,
unless --full-candidate) and judged as a run judges them; A/A passes when the speedup is within
+-1% of 1. Each task runs in a child process
of its own with a wall-clock limit (`--task-timeout`; every step command is also capped at
`--step-timeout`), so one task that hangs or crashes never stops the others; its row says why.
Rows are appended to `OUT/rows-K-of-N.jsonl` as they come (a rerun with the same OUT skips the
tasks that already have a row, except those whose verdict `--retry` names), and `OUT/table.md`
is rewritten from every shard's rows after each task: how many ran, how many pass A/A within
+-1%, and why the others do not. Tasks run in the order of the selectors (`--tasks`).

    PYTHONPATH=src python scripts/original_tasks_check.py /path/to/AgentKernelArena/tasks \
        --tasks triton2triton instruction2triton --out original_check [--shard 1/4]
    PYTHONPATH=src python scripts/original_tasks_check.py ROOT --out original_check --table-only

On a machine with N GPUs, one shard per GPU (they share OUT; each writes its own rows file):

    for i in $(seq 1 N); do CUDA_VISIBLE_DEVICES=$((i-1)) PYTHONPATH=src python \
        scripts/original_tasks_check.py ROOT --out original_check --shard $i/N & done; wait
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

from aka.compat.steps import HELD_NOTE
from aka.config.tasks import Task, gate_tasks, select_tasks, task_identity
from aka.device import DeviceInfo, detect_device
from aka.errors import AkaError
from aka.evaluation.baseline import baseline_builds, measure_baseline
from aka.evaluation.eval_dir import build_eval_dir
from aka.evaluation.step_process import StepSetup
from aka.evaluation.step_spec import Step, Target
from aka.evaluation.steps import StepOutcome, evaluate_candidate, run_steps
from aka.results.scoring import resolve_scorer
from aka.results.task_result import AgentOutcome, FailureKind, TaskStatus, write_text_atomic
from aka.run.task_pipeline import judge_outcomes

AA_TOLERANCE = 0.01
VERDICTS = ("pass", "outside", "baseline_failed", "noop_failed", "skipped", "unloadable", "timeout", "error")


def shard(names: list[str], spec: str) -> list[str]:
    index, count = (int(part) for part in spec.split("/"))
    if not 1 <= index <= count:
        raise SystemExit(f"--shard {spec}: use K/N with 1 <= K <= N")
    return names[index - 1 :: count]


def _named_row(name: str) -> dict[str, Any]:
    """A row's task, family and suite, from the task's name alone (also for tasks that never loaded)."""
    parts = name.strip("/").split("/")
    return {"task": name.strip("/"), "family": parts[0], "suite": parts[1] if len(parts) > 2 else ""}


def _base_row(task: Task) -> dict[str, Any]:
    return {**_named_row(task.name), "format": task.original.format.value if task.original else "aka"}


PHASE = "phase: "
WORK = "work: "  # the child's folder, where a task killed at its time limit left its evaluation logs


def _phase(started: float, what: str) -> None:
    """A line in the task's log (the child's stderr), so a task killed at its time limit says where it was."""
    print(f"{PHASE}{what} (at {time.monotonic() - started:.0f} s)", file=sys.stderr, flush=True)


def device_seconds(logs: list[Path]) -> dict[str, list[float]]:
    """Per step, the seconds the original's commands of these logs held the device and waited for
    it, from the evaluator's notes (aka.compat.steps): what the gate saves shows here."""
    sums: dict[str, list[float]] = {}
    for log in logs:
        for step, held, waited in HELD_NOTE.findall(log.read_text(errors="replace")):
            total = sums.setdefault(step, [0.0, 0.0])
            total[0], total[1] = round(total[0] + float(held), 3), round(total[1] + float(waited), 3)
    return sums


def _capped(task: Task, seconds: float) -> Task:
    """The task with every step command capped at `seconds`."""
    caps = {
        f"{s}_timeout": min(getattr(task.config, f"{s}_timeout"), seconds)
        for s in ("compile", "correctness", "performance")
    }
    return dataclasses.replace(task, config=task.config.model_copy(update=caps))


def noop_outcomes(task: Task, work: Path, device: DeviceInfo, trusted: Path, full: bool) -> list[StepOutcome]:
    """The noop candidate's steps. Its sources are the baseline's, whose compile and correctness
    just passed on the same machine, so unless `full` only its performance step runs again."""
    if full:
        return evaluate_candidate(task, task.directory, work, device, trusted_cache=trusted)
    eval_dir = work / "evaluation"
    build_eval_dir(task, eval_dir, task.directory)
    setup = StepSetup(
        task,
        device,
        eval_dir,
        work / ".reports_evaluation",
        work / "evaluation.log",
        rebuild=lambda: build_eval_dir(task, eval_dir, task.directory),
    )
    same = "the baseline's step on the same sources passed"
    return [
        StepOutcome(Step.COMPILE, message=same),
        StepOutcome(Step.CORRECTNESS, message=same),
        *run_steps(setup, [(Step.PERFORMANCE, Target.CANDIDATE)], trusted_cache=trusted),
    ]


def check_one(root: Path, name: str, scratch: Path, step_timeout: float, full: bool = False) -> dict[str, Any]:
    """One task's A/A row (run in the child process)."""
    try:
        task = select_tasks(root, [name], "original_tasks_check")[0]
    except AkaError as exc:
        return {**_named_row(name), "verdict": "unloadable", "message": str(exc)}
    row = _base_row(task)
    task = _capped(task, step_timeout)
    device = detect_device()
    work = Path(tempfile.mkdtemp(prefix="aka_check_", dir=scratch))  # no dots: rocmbench derives paths from __file__
    print(f"{WORK}{work}", file=sys.stderr, flush=True)
    began = started = time.monotonic()
    _phase(began, "measuring the baseline")
    baseline = measure_baseline(work / "run", task, task_identity(task), device, work / "baseline")
    row.update(device=device.name, baseline_seconds=round(time.monotonic() - started, 1))
    if not baseline.usable:
        verdict = "skipped" if baseline.status is FailureKind.SKIPPED else "baseline_failed"
        return {**row, "verdict": verdict, "message": baseline.message}
    started = time.monotonic()
    _phase(began, f"timing the unchanged candidate (the baseline took {row['baseline_seconds']:.0f} s)")
    outcomes = noop_outcomes(task, work, device, baseline_builds(work / "run", task), full)
    row["candidate_seconds"] = round(time.monotonic() - started, 1)
    candidate_log = work / "evaluation.log"  # noop_outcomes's; every other log is the baseline's
    baseline_logs = sorted(p for p in work.rglob("*.log") if p != candidate_log)
    row["device_s"] = {  # [held, waited] per step
        "baseline": device_seconds(baseline_logs),
        "candidate": device_seconds([candidate_log] if candidate_log.is_file() else []),
    }
    result = judge_outcomes(
        task,
        baseline,
        device,
        resolve_scorer("default"),
        "default",
        AgentOutcome(agent="noop", message="the task's own sources"),
        outcomes,
        [],
    )
    row.update(
        status=result.status.value,
        failure_kind=result.failure_kind.value,
        speedup=result.speedup_ratio,
        ci=[result.speedup_ci_low, result.speedup_ci_high],
        trust=result.trust,
        cases=[
            {
                "id": c.id,
                "speedup": c.speedup,
                "base_ms": c.base_ms,
                "ms": c.optimized_ms,
                "paired": c.paired,
                "method": c.optimized_method,
            }
            for c in result.cases
        ],
    )
    if result.status is not TaskStatus.PASS or result.speedup_ratio is None:
        return {
            **row,
            "verdict": "noop_failed",
            "message": result.failure_message
            or result.correctness_error_message
            or result.speedup_calculation_error_message,
        }
    if abs(result.speedup_ratio - 1.0) <= AA_TOLERANCE:
        return {**row, "verdict": "pass", "message": None}
    low, high = result.speedup_ci_low, result.speedup_ci_high
    why = (
        "its 95% interval holds 1: too few or too noisy samples"
        if low and high and low <= 1.0 <= high
        else "its 95% interval excludes 1: a bias between the two sides"
        if low and high
        else "no interval: timed against the frozen baseline, not interleaved"
    )
    return {
        **row,
        "verdict": "outside",
        "message": f"noop speedup {result.speedup_ratio:.4f} is outside 1 +- {AA_TOLERANCE}; {why}",
    }


def _child(args: argparse.Namespace, name: str, log: Path) -> dict[str, Any]:
    """`check_one` in a child process of its own (own process group), killed after the task timeout."""
    command = [
        sys.executable,
        str(Path(__file__).resolve()),
        str(args.tasks_root),
        "--one",
        name,
        "--scratch",
        str(args.scratch),
        "--step-timeout",
        str(args.step_timeout),
        *(["--full-candidate"] if args.full_candidate else []),
    ]
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("w") as stderr:
        child = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=stderr, text=True, start_new_session=True)
        try:
            out, _ = child.communicate(timeout=args.task_timeout)
        except subprocess.TimeoutExpired:
            os.killpg(child.pid, signal.SIGKILL)
            child.communicate()
            lines = log.read_text(errors="replace").splitlines()
            phases = [line.removeprefix(PHASE) for line in lines if line.startswith(PHASE)]
            works = [Path(line.removeprefix(WORK)) for line in lines if line.startswith(WORK)]
            last = _keep_evaluation_logs(works[-1], log) if works else None
            return {
                **_named_row(name),
                "verdict": "timeout",
                "message": f"the task took over {args.task_timeout:.0f} s (--task-timeout)"
                + (f"; it was {phases[-1]}" if phases else "")
                + (f"; its last command: {last}" if last else ""),
            }
    lines = [line for line in out.splitlines() if line.startswith("{")]
    if child.returncode != 0 or not lines:
        tail = [line for line in log.read_text(errors="replace").splitlines() if line.strip()][-1:] or ["no output"]
        return {
            **_named_row(name),
            "verdict": "error",
            "message": f"the check exited with status {child.returncode}: {tail[0][:300]}",
        }
    row: dict[str, Any] = json.loads(lines[-1])
    return row


def _keep_evaluation_logs(work: Path, log: Path, lines: int = 40) -> str | None:
    """Append the end of each evaluation log a killed task left in `work` to its own log, and
    return the last command those logs show started (`$ ...`): where its time went."""
    logs = sorted((p for p in work.rglob("*.log") if p.is_file()), key=lambda p: p.stat().st_mtime)
    last = None
    with log.open("a") as out:
        for path in logs:
            text = path.read_text(errors="replace").splitlines()
            commands = [line[2:].strip() for line in text if line.startswith("$ ")]
            last = commands[-1] if commands else last
            out.write(f"--- {path.relative_to(work)} (its last {lines} lines, when the task was killed) ---\n")
            out.write("\n".join(text[-lines:]) + "\n")
    return last


def _reason(row: dict[str, Any]) -> str:
    """A message with its numbers and paths masked, so tasks failing alike group together."""
    text = " ".join(str(row.get("message") or row["verdict"]).split())
    text = re.sub(r"(/[\w.+-]+)+", "<path>", text)
    text = re.sub(r"\d+(\.\d+)?", "N", text.split("; ", 1)[-1] if row["verdict"] == "outside" else text)
    return f"{row['verdict']}: {text[:140]}"


def render_table(rows: list[dict[str, Any]]) -> str:
    counts = Counter(row["verdict"] for row in rows)
    device = ", ".join(sorted({str(row["device"]) for row in rows if row.get("device")})) or "no task ran"
    ran = counts["pass"] + counts["outside"]
    lines = [
        f"# The original's task folders through aka's evaluator: baseline A/A ({device})",
        "",
        f"{len(rows)} tasks; {ran} evaluated; **{counts['pass']} pass A/A within +-1%**; "
        + "; ".join(f"{counts[v]} {v}" for v in VERDICTS[1:] if counts[v]),
        "",
        "| group | tasks | " + " | ".join(VERDICTS) + " |",
        "|---|---|" + "---|" * len(VERDICTS),
    ]
    groups: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        groups["/".join(p for p in (row.get("family"), row.get("suite")) if p)].append(row)
    for group, members in sorted(groups.items()):
        tally = Counter(r["verdict"] for r in members)
        lines.append(f"| {group} | {len(members)} | " + " | ".join(str(tally[v]) for v in VERDICTS) + " |")
    reasons: dict[str, list[str]] = defaultdict(list)
    for row in rows:
        if row["verdict"] != "pass":
            reasons[_reason(row)].append(row["task"])
    lines += ["", "## Why the others do not pass", "", "| reason | tasks | examples |", "|---|---|---|"]
    for reason, tasks in sorted(reasons.items(), key=lambda item: -len(item[1])):
        lines.append(f"| {reason.replace('|', '/')} | {len(tasks)} | {', '.join(sorted(tasks)[:3])} |")
    lines += [
        "",
        "## Every task",
        "",
        "| task | verdict | speedup | 95% CI | trust | seconds |",
        "|---|---|---|---|---|---|",
    ]
    for row in sorted(rows, key=lambda r: r["task"]):
        speedup = f"{row['speedup']:.4f}" if row.get("speedup") else ""
        ci = row.get("ci") or [None, None]
        interval = f"{ci[0]:.4f}-{ci[1]:.4f}" if ci[0] and ci[1] else ""
        seconds = (row.get("baseline_seconds") or 0) + (row.get("candidate_seconds") or 0)
        lines.append(
            f"| {row['task']} | {row['verdict']} | {speedup} | {interval} | {row.get('trust') or ''} | {seconds:.0f} |"
        )
    return "\n".join(lines) + "\n"


def read_rows(out: Path) -> list[dict[str, Any]]:
    """Every shard's rows; a task's last row wins."""
    latest: dict[str, dict[str, Any]] = {}
    for path in sorted(out.glob("rows-*.jsonl")):
        for line in path.read_text().splitlines():
            try:
                row = json.loads(line)
            except ValueError:  # another shard's line being written right now
                continue
            latest[row["task"]] = row
    return list(latest.values())


def write_table(out: Path) -> None:
    """`OUT/table.md` from every shard's rows, replaced at once (shards write it concurrently)."""
    write_text_atomic(out / "table.md", render_table(read_rows(out)))


def _selected(root: Path, selectors: list[str]) -> tuple[list[Task], list[dict[str, Any]]]:
    """The tasks the selectors name, in their order (the first selector's tasks run first); a selector
    that fails (a named task that does not load) is a row."""
    tasks: dict[str, Task] = {}
    rows = []
    for selector in selectors:
        try:
            chosen = select_tasks(root, [selector], "original_tasks_check")
            # one selector's tasks by name, after the earlier selectors' (a task named twice runs once)
            tasks.update({t.name: t for t in sorted(chosen, key=lambda t: t.name) if t.name not in tasks})
        except AkaError as exc:
            rows.append({**_named_row(selector), "verdict": "unloadable", "message": str(exc)})
    return list(tasks.values()), rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("tasks_root", type=Path)
    parser.add_argument("--tasks", nargs="*", default=["all"], help="selectors under the root (default: all)")
    parser.add_argument("--shard", default="1/1", help="K/N: every N-th task from the K-th (one GPU each)")
    parser.add_argument("--out", type=Path, default=Path("original_check"))
    parser.add_argument("--task-timeout", type=float, default=1800.0, help="seconds a task may take in all")
    parser.add_argument("--step-timeout", type=float, default=600.0, help="seconds a step command may take")
    parser.add_argument("--scratch", type=Path, default=Path(tempfile.gettempdir()) / "aka_original_check")
    parser.add_argument("--table-only", action="store_true", help="only rewrite OUT/table.md from the rows")
    parser.add_argument(
        "--full-candidate",
        action="store_true",
        help="run the noop candidate's compile and correctness too (default: performance only)",
    )
    parser.add_argument(
        "--retry",
        default="",
        help="comma-separated verdicts whose tasks run again (e.g. timeout, with a longer --task-timeout)",
    )
    parser.add_argument("--one", help=argparse.SUPPRESS)
    args = parser.parse_args()
    args.tasks_root, args.scratch = args.tasks_root.resolve(), args.scratch.resolve()
    args.scratch.mkdir(parents=True, exist_ok=True)
    if args.one:
        row = check_one(args.tasks_root, args.one, args.scratch, args.step_timeout, args.full_candidate)
        print(json.dumps(row), flush=True)
        return 0
    args.out.mkdir(parents=True, exist_ok=True)
    if args.table_only:
        write_table(args.out)
        return 0
    device = detect_device()
    tasks, unloadable = _selected(args.tasks_root, args.tasks)
    _, dropped = gate_tasks(tasks, device.arch)
    skipped = {task.name: why for task, why in dropped}
    by_name, prepared = {task.name: task for task in tasks}, {row["task"]: row for row in unloadable}
    rows_path = args.out / f"rows-{args.shard.replace('/', '-of-')}.jsonl"
    retry = {verdict.strip() for verdict in args.retry.split(",") if verdict.strip()}
    done = {row["task"] for row in read_rows(args.out) if row["verdict"] not in retry}
    for name in shard(list(prepared) + [name for name in by_name if name not in prepared], args.shard):
        if name in done:
            continue
        task = by_name.get(name)
        if task is None:
            row = prepared[name]
        elif task.problem is not None:
            row = {**_base_row(task), "verdict": "unloadable", "message": task.problem}
        elif name in skipped:
            row = {**_base_row(task), "verdict": "skipped", "message": skipped[name]}
        else:
            print(f"{name} ...", flush=True)
            row = _child(args, name, args.out / "logs" / f"{task.slug}.log")
        print(f"{name}: {row['verdict']} {row.get('speedup') or ''} {row.get('message') or ''}"[:300], flush=True)
        with rows_path.open("a") as handle:
            handle.write(json.dumps(row) + "\n")
        write_table(args.out)
    write_table(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
