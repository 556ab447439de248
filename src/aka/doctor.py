"""`aka doctor`'s answers to "what will happen if I run here?": which tasks run, which are skipped
on this machine (a CUDA task without a GPU) and which its `platform_support` drops, and which
agents are ready, with what (built in, or a CLI's binary, version and credentials).

A task is skipped where a GPU is missing when its family's kernels are CUDA or HIP, or when its
harness declares `requires_gpu=True` (its steps then report themselves skipped, `aka.harness`);
both are read from the task folder without running it.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from rich.table import Table

from aka.agents.check import AgentCheck
from aka.config.families import family_named
from aka.config.tasks import Task, gate_tasks
from aka.device import DeviceInfo

GPU_LANGUAGES = frozenset({"cuda", "hip"})


def _declares_requires_gpu(path: Path) -> bool:
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    except (OSError, SyntaxError, UnicodeDecodeError):
        return False
    return any(
        isinstance(node, ast.keyword)
        and node.arg == "requires_gpu"
        and isinstance(node.value, ast.Constant)
        and node.value.value is True
        for node in ast.walk(tree)
    )


def needs_gpu(task: Task) -> str | None:
    """Why the task cannot run without a GPU, or None when it can."""
    family = family_named(task.family)
    if family is not None and family.language in GPU_LANGUAGES:
        return f"{family.language.upper()} kernels need a GPU"
    declared = sorted(p.name for p in task.directory.glob("*.py") if _declares_requires_gpu(p))
    return f"{declared[0]} declares requires_gpu=True" if declared else None


@dataclass
class TaskPlan:
    """The tasks of a tasks root as they would go on this machine."""

    run: list[Task] = field(default_factory=list)
    skipped: list[tuple[Task, str]] = field(default_factory=list)
    dropped: list[tuple[Task, str]] = field(default_factory=list)


def plan_tasks(tasks: list[Task], device: DeviceInfo) -> TaskPlan:
    runnable, dropped = gate_tasks(tasks, device.arch)
    plan = TaskPlan(dropped=dropped)
    for task in runnable:
        reason = None if device.is_gpu else needs_gpu(task)
        if reason is None:
            plan.run.append(task)
        else:
            plan.skipped.append((task, reason))
    return plan


def tasks_table(plan: TaskPlan, device: DeviceInfo) -> Table:
    """Per family: how many tasks run here, and the names of those that do not, with why."""
    where = "this GPU" if device.is_gpu else "this CPU (Triton's interpreter: a smoke test)"
    table = Table(
        "family",
        "run here",
        "skipped here",
        "dropped (platform_support)",
        title=f"tasks on {where}: {len(plan.run)} run, {len(plan.skipped)} skipped, {len(plan.dropped)} dropped",
        title_justify="left",
    )
    runs: dict[str, int] = defaultdict(int)
    skipped: dict[str, list[str]] = defaultdict(list)
    dropped: dict[str, list[str]] = defaultdict(list)
    for task in plan.run:
        runs[task.family] += 1
    for task, why in plan.skipped:
        skipped[task.family].append(f"{task.name} ({why})")
    for task, why in plan.dropped:
        dropped[task.family].append(f"{task.name} ({why})")
    for family in sorted({*runs, *skipped, *dropped}):
        table.add_row(family, str(runs[family]), "\n".join(skipped[family]) or "-", "\n".join(dropped[family]) or "-")
    return table


def agents_table(checks: list[AgentCheck]) -> Table:
    """Each agent: ready or not, and with what."""
    table = Table("agent", "ready", "with", title="agents (aka check-agents --live makes a call)", title_justify="left")
    for check in checks:
        if check.binary == "built-in":
            with_what = "built in"
        elif check.version == "-":
            with_what = check.binary
        else:
            with_what = f"{check.binary} {check.version}; credentials: {check.credentials}"
        table.add_row(check.name, "[green]yes[/]" if check.ready else "[red]no[/]", with_what)
    return table
