"""A run's events: one model for what happened when, appended to the run's `events.jsonl` by the
process that runs the trial and shown by the console (`aka.run.progress_display`).

A trial starts, passes through its phases (`aka.progress.Phase`), and finishes (or is reused from
an earlier attempt on resume); the run starts and finishes around them. In a parallel run the
workers append the trial events and the parent follows the file (`EventFollower`), so one view
shows every worker's trials. Lines are appended whole, one write each, so concurrent writers
never interleave inside a line.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from datetime import datetime, timezone
from enum import Enum
from pathlib import Path
from typing import Protocol

from pydantic import BaseModel, ConfigDict, ValidationError

from aka.progress import Phase
from aka.results.task_result import TaskResult
from aka.results.verdict import verdict

logger = logging.getLogger(__name__)


class EventKind(str, Enum):
    RUN_STARTED = "run_started"
    TASK_STARTED = "task_started"
    TASK_PHASE = "task_phase"
    TASK_FINISHED = "task_finished"
    TASK_REUSED = "task_reused"
    RUN_FINISHED = "run_finished"


TRIAL_ENDS = frozenset({EventKind.TASK_FINISHED, EventKind.TASK_REUSED})


class RunEvent(BaseModel):
    """One line of `events.jsonl` (and of `aka run --json-events`); fields that do not apply are
    left out of the line. Trial events name the trial (task, arm, repeat) and the worker."""

    model_config = ConfigDict(extra="ignore")

    time: str
    event: EventKind
    task: str | None = None
    arm: str | None = None
    repeat: int | None = None
    worker: str | None = None
    phase: Phase | None = None
    status: str | None = None
    verdict: str | None = None
    score: float | None = None
    speedup: float | None = None
    message: str | None = None
    run_dir: str | None = None
    agent: str | None = None
    device: str | None = None
    smoke_test: bool | None = None
    trials: int | None = None
    dropped: int | None = None
    arm_trials: dict[str, int] | None = None
    workers: int | None = None
    reports: str | None = None

    @property
    def trial(self) -> tuple[str, str | None, int]:
        """The trial this event is about; a trial of a plain run (no repeat recorded) is repeat 1."""
        return self.task or "", self.arm, self.repeat or 1

    def line(self) -> str:
        return json.dumps(self.model_dump(mode="json", exclude_none=True))


def now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


class EventSink(Protocol):
    """Whatever takes a run's events: the events file, a console view."""

    def emit(self, event: RunEvent) -> None: ...


@dataclass(frozen=True)
class TrialEvents:
    """The events of one trial (a task, its arm and repeat, the worker running it), sent to `sink`."""

    sink: EventSink
    task: str
    arm: str | None = None
    repeat: int | None = None
    worker: str | None = None

    def emit(self, kind: EventKind, phase: Phase | None = None) -> None:
        self.sink.emit(
            RunEvent(
                time=now(),
                event=kind,
                task=self.task,
                arm=self.arm,
                repeat=self.repeat,
                worker=self.worker,
                phase=phase,
            )
        )

    def phase(self, phase: Phase) -> None:
        self.emit(EventKind.TASK_PHASE, phase)

    def ended(self, kind: EventKind, result: TaskResult) -> None:
        """The trial's end, with what the person watching wants to see of its result."""
        message = result.failure_message or result.compilation_error_message or result.correctness_error_message
        self.sink.emit(
            RunEvent(
                time=now(),
                event=kind,
                task=self.task,
                arm=self.arm,
                repeat=self.repeat,
                worker=self.worker,
                status=result.status.value,
                verdict=verdict(result).value,
                score=result.score,
                speedup=result.speedup_ratio,
                message=" ".join(message.split()) if message else None,
            )
        )


class EventsFile:
    """Appends each event to the run's `events.jsonl`."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def emit(self, event: RunEvent) -> None:
        with self.path.open("a", encoding="utf-8") as handle:
            handle.write(event.line() + "\n")


class EventFollower:
    """Reads the events appended to a file since it was made (a parallel run's parent following
    its workers); a line still being written waits for the next read."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.offset = path.stat().st_size if path.exists() else 0
        self.partial = b""

    def poll(self) -> list[RunEvent]:
        try:
            with self.path.open("rb") as handle:
                handle.seek(self.offset)
                data = handle.read()
        except FileNotFoundError:
            return []
        self.offset += len(data)
        data = self.partial + data
        complete, _, self.partial = data.rpartition(b"\n")
        events = []
        for line in complete.splitlines():
            try:
                events.append(RunEvent.model_validate_json(line))
            except ValidationError:
                logger.warning("%s: an event line that is not an event: %r", self.path, line[:200])
        return events


class Broadcast:
    """Sends each event to every sink in turn."""

    def __init__(self, *sinks: EventSink) -> None:
        self.sinks = sinks

    def emit(self, event: RunEvent) -> None:
        for sink in self.sinks:
            sink.emit(event)
