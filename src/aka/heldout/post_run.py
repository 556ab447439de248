"""`aka heldout RUN`: each accepted candidate of a finished run, and its baseline, on the task's
held-out cases (docs/heldout.md).

The cases are the author's hidden `heldout.py` where the task has one; otherwise cases generated
by rule from the task's own and checked on its reference (aka.heldout.generate), put into a copy of
the task under `RUN/heldout/tasks/`. Per trial, `RUN/heldout/<workspace>/heldout_task_result.yaml`;
over the run, `RUN/heldout/heldout_summary.yaml`. Not part of the score: it measures generalization.
"""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field

from aka.config.tasks import IGNORED_NAMES, Task, default_tasks_root, load_task, select_tasks
from aka.device import DeviceInfo, detect_device
from aka.evaluation.wire import HELDOUT_FILE
from aka.heldout.generate import Generated, generate_in_child, heldout_source
from aka.reports.heldout import summarize_heldout
from aka.reports.rebuild import counted_workspaces
from aka.results.task_result import CaseTiming, HeldoutOutcome, HeldoutResult, TaskStatus, write_yaml_atomic
from aka.run.layout import AGENT_WORK_DIR, REPOSITORIES_DIR
from aka.run.repository import materialize
from aka.run.runner import read_manifest
from aka.run.task_pipeline import evaluate_heldout
from aka.trees import remove_tree

HELDOUT_DIR = "heldout"
Source = Literal["author", "generated", "none"]
TASK_RESULT_FILE = "heldout_task_result.yaml"
SUMMARY_FILE = "heldout_summary.yaml"


class HeldoutTaskRecord(BaseModel):
    """One trial's held-out evaluation (`heldout_task_result.yaml`): the original's fields (outcome,
    both correctness verdicts, the speedups and their gap) and where the cases came from."""

    model_config = ConfigDict(extra="forbid")

    schema_version: int = 1
    task_name: str
    arm: str | None = None
    repeat: int | None = None
    heldout_source: Source
    outcome: HeldoutOutcome | None = None
    baseline_correct: bool | None = None
    candidate_correct: bool | None = None
    original_speedup: float | None = None
    heldout_speedup: float | None = None
    generalization_gap: float | None = None
    message: str | None = None
    cases: list[CaseTiming] = Field(default_factory=list)
    generated_cases: list[dict[str, object]] = Field(default_factory=list)
    rejected_cases: list[dict[str, object]] = Field(default_factory=list)

    def as_result(self) -> HeldoutResult | None:
        if self.outcome is None or self.baseline_correct is None or self.candidate_correct is None:
            return None
        return HeldoutResult(
            outcome=self.outcome,
            baseline_correct=self.baseline_correct,
            candidate_correct=self.candidate_correct,
            speedup_ratio=self.heldout_speedup,
            generalization_gap=self.generalization_gap,
            message=self.message,
            cases=self.cases,
        )


@dataclass
class HeldoutRun:
    summary_path: Path
    records: list[HeldoutTaskRecord] = field(default_factory=list)


def _tasks_root(run_dir: Path, tasks_root: Path | None) -> Path:
    if tasks_root is not None:
        return tasks_root.resolve()
    configured = read_manifest(run_dir).config.get("tasks_root")
    return Path(str(configured)).expanduser().resolve() if configured else default_tasks_root()


def with_generated_cases(task: Task, copies: Path, device: DeviceInfo) -> tuple[Task | None, Generated]:
    """A copy of `task` under `copies` with a `heldout.py` of generated, reference-checked cases
    (None where none survived, or the task is not an aka.harness task)."""
    if task.original is not None:
        return None, Generated(error="a task in the original's format: only author-written held-out cases")
    harness = task.directory / "harness.py"
    if not harness.is_file() or "KernelTask" not in harness.read_text(encoding="utf-8", errors="replace"):
        return None, Generated(
            error="its harness.py declares no aka.harness KernelTask: only author-written held-out cases"
        )
    copy = copies / task.name
    if copy.exists():
        remove_tree(copy, strict=True)
    shutil.copytree(task.directory, copy, ignore=shutil.ignore_patterns(*IGNORED_NAMES, "*.pyc"))
    profile = "full" if device.is_gpu else "ci"
    generated = generate_in_child(copy, profile, device)
    if generated.error is not None or not generated.accepted:
        return None, generated
    (copy / HELDOUT_FILE).write_text(heldout_source(generated), encoding="utf-8")
    config = yaml.safe_load((copy / "config.yaml").read_text(encoding="utf-8"))
    config["hidden_files"] = [*config.get("hidden_files", []), HELDOUT_FILE]
    (copy / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
    return load_task(copies, copy), generated


def _evaluate(
    run_dir: Path, workspace: Path, task: Task, speedup: float | None, device: DeviceInfo, out: Path
) -> tuple[HeldoutResult | None, Source, Generated]:
    task = materialize(task, run_dir / REPOSITORIES_DIR)
    generated = Generated()
    source: Source = "author"
    if HELDOUT_FILE not in task.config.hidden_files:
        copy, generated = with_generated_cases(task, out / "tasks", device)
        if copy is None:
            return None, "none", generated
        task, source = copy, "generated"
    scratch = out / workspace.name
    if scratch.exists():
        remove_tree(scratch, strict=True)
    scratch.mkdir(parents=True)
    return evaluate_heldout(task, workspace / AGENT_WORK_DIR, scratch, device, speedup), source, generated


def heldout_run(run_dir: Path, tasks_root: Path | None = None, device: DeviceInfo | None = None) -> HeldoutRun:
    """Evaluate every accepted candidate of `run_dir` on held-out cases; write the files."""
    run_dir = run_dir.resolve()
    root = _tasks_root(run_dir, tasks_root)
    device = device or detect_device()
    out = run_dir / HELDOUT_DIR
    outcome = HeldoutRun(out / SUMMARY_FILE)
    for workspace, result in counted_workspaces(run_dir):
        if result.status is not TaskStatus.PASS or not result.pass_correctness:
            continue
        (task,) = select_tasks(root, [result.task_name])
        heldout, source, generated = _evaluate(run_dir, workspace, task, result.speedup_ratio, device, out)
        record = HeldoutTaskRecord(
            task_name=result.task_name,
            arm=result.arm,
            repeat=result.repeat,
            heldout_source=source,
            original_speedup=result.speedup_ratio,
            generated_cases=generated.accepted,
            rejected_cases=generated.rejected,
            message=generated.error or (None if heldout or generated.accepted else "no generated case survived"),
        )
        if heldout is not None:
            record = record.model_copy(
                update={
                    "outcome": heldout.outcome,
                    "baseline_correct": heldout.baseline_correct,
                    "candidate_correct": heldout.candidate_correct,
                    "heldout_speedup": heldout.speedup_ratio,
                    "generalization_gap": heldout.generalization_gap,
                    "message": heldout.message,
                    "cases": heldout.cases,
                }
            )
        write_yaml_atomic(out / workspace.name / TASK_RESULT_FILE, record.model_dump(mode="json"))
        outcome.records.append(record)
    write_yaml_atomic(outcome.summary_path, run_summary(run_dir, outcome.records))
    return outcome


def run_summary(run_dir: Path, records: Sequence[HeldoutTaskRecord]) -> dict[str, object]:
    """`heldout_summary.yaml`: the quadrants, P(candidate correct | baseline correct), correctness
    retention and the generalization gap, over the trials evaluated; the others listed."""
    evaluated = [r for r in (record.as_result() for record in records) if r is not None]
    originals = [r.original_speedup for r in records if r.as_result() is not None and r.original_speedup is not None]
    summary = summarize_heldout(evaluated) or {"task_count": 0}
    return {
        "run": run_dir.name,
        **summary,
        "mean_original_speedup": round(sum(originals) / len(originals), 4) if originals else None,
        "sources": {s: sum(r.heldout_source == s for r in records) for s in ("author", "generated", "none")},
        "not_evaluated": {r.task_name: r.message for r in records if r.as_result() is None},
    }
