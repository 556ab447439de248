"""The tuning loop: each variant is judged by the platform's own steps in a scratch directory,
recorded in the variant log, and offered to the search; the loop keeps to the iteration and time budget.

Variants are ranked by the platform's own speedup (`aka.evaluation.speedup.apply_timings`, the number the
score is made of): the mean over cases of baseline / variant time, paired cases preferred. When the
baseline has no times, the first correct variant stands in for it.
"""

from __future__ import annotations

import dataclasses
import logging
import shutil
import statistics
import time
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from aka.agents.autotune.knobs import TunedSources, Value
from aka.agents.autotune.search import SearchSpace, Variant, VariantSearch
from aka.agents.registry import AgentContext
from aka.config.tasks import Task
from aka.evaluation.speedup import apply_timings
from aka.evaluation.steps import evaluate_candidate
from aka.results.task_result import FailureKind, TaskResult, write_text_atomic
from aka.trees import remove_tree

logger = logging.getLogger(__name__)

LOG_FORMAT = "aka-autotune-log/1"
LOG_NAME = "autotune_variants.json"
SCRATCH_NAME = "autotune"
MAX_MESSAGE = 2000
STEP_TIMEOUTS = ("compile_timeout", "correctness_timeout", "performance_timeout")


class VariantRecord(BaseModel):
    """One evaluated variant: its knob values and what the platform's steps made of it."""

    model_config = ConfigDict(extra="forbid")

    index: int
    values: dict[str, Value]
    start: bool = False
    correct: bool = False
    failure: FailureKind = FailureKind.NONE
    failed_step: str | None = None
    message: str | None = None
    case_times_ms: dict[str, float] = Field(default_factory=dict)
    mean_time_ms: float | None = None
    mean_speedup: float | None = None
    became_best: bool = False
    seconds: float = 0.0


class TuningLog(BaseModel):
    """`autotune_variants.json`, rewritten after every variant so an interrupted search leaves its record."""

    model_config = ConfigDict(extra="forbid")

    format: str = LOG_FORMAT
    task: str
    tunables: list[str]
    strategy: str
    grid_size: int
    max_iterations: int | None
    timeout_seconds: float | None
    margin: float
    seed: int
    speedup_reference: str = "baseline"
    stop_reason: str = "running"
    best_index: int | None = None
    variants: list[VariantRecord] = Field(default_factory=list)

    @property
    def best(self) -> VariantRecord | None:
        return next((v for v in self.variants if v.index == self.best_index), None)


def capped_task(task: Task, remaining: float | None) -> Task:
    """The task with every step timeout cut to the time the agent has left."""
    if remaining is None:
        return task
    update = {name: max(0.5, min(float(getattr(task.config, name)), remaining)) for name in STEP_TIMEOUTS}
    return dataclasses.replace(task, config=task.config.model_copy(update=update))


class Tuner:
    """One search over one task's knobs; `run` returns the log and `best_variant` the winner."""

    def __init__(self, ctx: AgentContext, workspace: Path, sources: TunedSources, margin: float, seed: int) -> None:
        self.ctx, self.workspace, self.sources = ctx, workspace, sources
        config = ctx.task.config
        space = SearchSpace.of(sources.names, [list(t.values) for t in config.tunables], sources.start)
        self.budget = ctx.settings.max_iterations
        self.search = VariantSearch(space, self.budget, seed, margin)
        self.scratch = ctx.log_path.parent / SCRATCH_NAME
        self.log_file = ctx.log_path.parent / LOG_NAME
        timeout = ctx.settings.timeout_seconds
        self.deadline = time.monotonic() + timeout if timeout is not None else None
        timed_baseline = ctx.baseline.usable and any(c.time_ms for c in ctx.baseline.cases)
        self.stand_in: dict[str, float] = {}
        self.log = TuningLog(
            task=ctx.task_name,
            tunables=list(sources.names),
            strategy=self.search.strategy,
            grid_size=space.size,
            max_iterations=self.budget,
            timeout_seconds=timeout,
            margin=margin,
            seed=seed,
            speedup_reference="baseline" if timed_baseline else "first correct variant",
        )

    def run(self) -> TuningLog:
        """Evaluate variants until the grid, the iterations or the time run out."""
        while (reason := self._stop_reason()) is None:
            variant = self.search.next_variant()
            if variant is None:
                reason = "exhausted"
                break
            record = self._evaluate(len(self.log.variants) + 1, variant)
            record.became_best = self.search.record(variant, record.mean_speedup if record.correct else None)
            if record.became_best:
                self.log.best_index = record.index
            self.log.variants.append(record)
            self._note(record)
            if record.failure is FailureKind.SKIPPED:
                reason = "skipped"
                break
            self._save()
        self.log.stop_reason = reason
        self._save()
        return self.log

    @property
    def best_variant(self) -> Variant | None:
        return self.search.best

    def _stop_reason(self) -> str | None:
        if self.search.done:
            return "exhausted"
        if self.budget is not None and len(self.log.variants) >= self.budget:
            return "max_iterations"
        if self.deadline is None:
            return None
        remaining = self.deadline - time.monotonic()
        slowest = max((v.seconds for v in self.log.variants), default=0.0)
        return "timeout" if remaining <= 0 or (self.log.variants and slowest > remaining) else None

    def _evaluate(self, index: int, variant: Variant) -> VariantRecord:
        folder = self.scratch / f"{index:03d}"
        candidate = folder / "candidate"
        if folder.exists():
            remove_tree(folder, strict=True)
        for rel in self.ctx.task.config.source_file_path:
            if (self.workspace / rel).is_file():
                (candidate / rel).parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(self.workspace / rel, candidate / rel)
        self.sources.write(variant, candidate)
        remaining = None if self.deadline is None else self.deadline - time.monotonic()
        started = time.monotonic()
        outcomes = evaluate_candidate(capped_task(self.ctx.task, remaining), candidate, folder, self.ctx.device)
        record = VariantRecord(
            index=index,
            values=dict(zip(self.sources.names, variant, strict=True)),
            start=index == 1,
            seconds=round(time.monotonic() - started, 3),
        )
        for leftover in ("evaluation", ".reports"):
            remove_tree(folder / leftover)
        problem = next((o for o in outcomes if not o.passed), None)
        if problem is not None:
            record.failure, record.failed_step = problem.failure, problem.step.value
            record.message = (problem.message or "")[:MAX_MESSAGE] or None
            return record
        cases = outcomes[-1].cases
        times = {c.id: c.time_ms for c in cases if c.time_ms}
        record.correct = bool(times)
        if not times:
            record.message = "no timed case in the performance step"
            return record
        record.case_times_ms = times
        record.mean_time_ms = round(statistics.fmean(times.values()), 6)
        judged = TaskResult(task_name=self.ctx.task_name, task_type=self.ctx.task.family)
        apply_timings(judged, self.ctx.baseline, cases)
        record.mean_speedup = judged.speedup_ratio
        if record.mean_speedup is None:
            self.stand_in = self.stand_in or dict(times)
            ratios = [self.stand_in[i] / t for i, t in times.items() if i in self.stand_in]
            record.mean_speedup = round(statistics.fmean(ratios), 6) if ratios else None
        return record

    def _note(self, record: VariantRecord) -> None:
        values = ", ".join(f"{k}={v}" for k, v in record.values.items())
        verdict = (
            f"correct, mean {record.mean_time_ms} ms, speedup {record.mean_speedup}"
            if record.correct
            else f"{record.failure.value} at {record.failed_step}: {record.message}"
        )
        line = f"variant {record.index} ({values}): {verdict}{' -> best' if record.became_best else ''}"
        logger.info("%s: %s", self.ctx.task_name, line)
        self.ctx.log_path.parent.mkdir(parents=True, exist_ok=True)
        with self.ctx.log_path.open("a", encoding="utf-8") as handle:
            handle.write(line + "\n")

    def _save(self) -> None:
        write_text_atomic(self.log_file, self.log.model_dump_json(indent=2))
