"""The prompt an agent gets: what to edit, what must exist, how to check, and what to beat."""

from __future__ import annotations

import logging
from pathlib import Path

from aka.config.tasks import Task
from aka.device import DeviceInfo
from aka.evaluation.baseline import BaselineRecord
from aka.harness.describe import judging_notes, load_kernel_task

FENCE = "```"
logger = logging.getLogger(__name__)


def _language(path: str) -> str:
    return {".py": "python", ".cu": "cuda", ".cuh": "cuda", ".cpp": "cpp", ".h": "cpp"}.get(Path(path).suffix, "")


def _baseline_lines(baseline: BaselineRecord) -> list[str]:
    if not baseline.usable:
        return [f"Baseline timings are not available on this machine: {baseline.message}"]
    what = "the PyTorch reference" if baseline.source.value == "reference" else "the original sources"
    lines = [f"Baseline ({what}), per test case:"]
    for case in baseline.cases:
        if case.time_ms:
            lines.append(f"- {case.id}: {case.time_ms:.4f} ms ({case.timing_method})")
    return lines


def _judging(task: Task, device: DeviceInfo) -> list[str]:
    """Generated from the task's own `KernelTask` (aka.harness.describe); none for other tasks."""
    try:
        kernel_task = load_kernel_task(task.directory)
    except Exception as exc:  # noqa: BLE001 - the prompt goes without it; the steps will say what is wrong
        logger.warning("%s: harness.py did not load for the prompt: %s", task.name, exc)
        return []
    return judging_notes(kernel_task, task.family, device.is_gpu) if kernel_task is not None else []


def _scope_lines(task: Task) -> list[str]:
    """Files of the original's tasks that hold their tests too: which definitions may change."""
    scopes = task.original.symbol_scopes() if task.original else []
    return [
        f"- In `{scope.path}` only {', '.join(f'`{s}`' for s in scope.symbols)}"
        + (" (and new helper functions)" if scope.allow_new_helpers else "")
        + " may change; the rest of it is the task's harness (any other change fails the task)."
        for scope in scopes
    ]


def build_prompt(task: Task, work_dir: Path, baseline: BaselineRecord, device: DeviceInfo) -> str:
    """Markdown prompt; the task's `prompt.source_code` replaces the inlined sources when given."""
    config = task.config
    commands = [*config.compile_command, *config.correctness_command, *config.performance_command]
    parts = [
        f"# Task: {task.name} ({config.task_type})",
        f"Device: {device.name} ({device.arch or 'cpu; Triton runs in its interpreter'}).",
        "You are in the task workspace. Optimize the kernel for speed while keeping it correct.",
        "## Files you may edit (only these are evaluated; everything else is restored)",
        *[f"- `{rel}`" for rel in config.source_file_path],
        *_scope_lines(task),
        "## Kernel functions that must exist and be used",
        *[f"- `{name}`" for name in config.target_kernel_functions],
        "## Commands you can run here to check your work",
        *[f"- `{command}`" for command in commands],
        "The evaluation re-runs these independently on a pristine copy of the task with your edited files.",
        "## Baseline",
        *_baseline_lines(baseline),
    ]
    if config.prompt.instructions:
        parts += ["## Instructions", config.prompt.instructions.strip()]
    judged = _judging(task, device)
    if judged:
        parts += ["## How your kernel is judged", *judged]
    parts.append("## Source code")
    if config.prompt.source_code:
        parts.append(config.prompt.source_code.strip())
    else:
        for rel in config.source_file_path:
            text = (work_dir / rel).read_text(encoding="utf-8", errors="replace")
            parts += [f"`{rel}`:", f"{FENCE}{_language(rel)}\n{text.rstrip()}\n{FENCE}"]
    if config.prompt.cheatsheet:
        parts += ["## Cheatsheet", config.prompt.cheatsheet.strip()]
    return "\n\n".join(parts) + "\n"
