"""What a person watching a run sees: a live view in a terminal, one plain line per event
elsewhere (a pipe, a log, `--quiet`), or the events themselves as JSON lines (`--json-events`).

Every view takes the run's events (`aka.run.events`) and nothing else, so a serial run, a parallel
run's parent following its workers, and a worker's own log show the same things: trials done of
the total, each running trial with its phase, elapsed time and an estimate of what is left (from
the trials that ran, not those reused on resume), and per arm how many are done and how they went.
"""

from __future__ import annotations

import contextlib
import statistics
import sys
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from types import TracebackType
from typing import IO, Protocol

from rich.console import Console, Group, RenderableType
from rich.live import Live
from rich.markup import escape
from rich.progress_bar import ProgressBar
from rich.status import Status
from rich.table import Table
from rich.text import Text

from aka.evaluation.wire import valid_text
from aka.progress import Phase, phases_to
from aka.results.task_result import STATUS_STYLE
from aka.results.verdict import CORRECT_VERDICTS, SMOKE_TEST_NOTE, VERDICT_BY_WORD, VERDICT_STYLE
from aka.run.events import TRIAL_ENDS, EventKind, RunEvent

LIVE_REFRESHES_PER_SECOND = 4
CORRECT_WORDS = frozenset(v.value for v in CORRECT_VERDICTS)


class ProgressDisplay(Protocol):
    """A console view of a run: entered for the run's duration, fed every event."""

    def emit(self, event: RunEvent) -> None: ...

    def __enter__(self) -> ProgressDisplay: ...

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None: ...


def clock(seconds: float) -> str:
    minutes, secs = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


def trial_name(event: RunEvent) -> str:
    """`task [arm rK]`, as the run's lines have always named a trial."""
    trial = " ".join(p for p in (event.arm, f"r{event.repeat}" if event.repeat is not None else None) if p)
    return f"{event.task} [{trial}]" if trial else event.task or ""


@dataclass
class RunningTrial:
    event: RunEvent
    started: float
    phase: Phase | None = None
    phase_started: float = 0.0


@dataclass
class ProgressState:
    """What the views show, kept from the events alone. A trial that starts again (a parallel
    run retrying an infrastructure failure) is running again, no longer done."""

    total: int | None = None
    arm_trials: dict[str, int] = field(default_factory=dict)
    workers: int = 1
    smoke_test: bool = False
    started: float = field(default_factory=time.monotonic)
    durations: list[float] = field(default_factory=list)
    finished: dict[tuple[str, str | None, int], RunEvent] = field(default_factory=dict)
    running: dict[tuple[str, str | None, int], RunningTrial] = field(default_factory=dict)

    def apply(self, event: RunEvent) -> None:
        at = time.monotonic()
        if event.event is EventKind.RUN_STARTED:
            self.total, self.arm_trials = event.trials, dict(event.arm_trials or {})
            self.workers, self.smoke_test = event.workers or 1, bool(event.smoke_test)
            self.started = at
        elif event.event is EventKind.TASK_STARTED:
            self.finished.pop(event.trial, None)
            self.running[event.trial] = RunningTrial(event, at)
        elif event.event is EventKind.TASK_PHASE and event.trial in self.running:
            running = self.running[event.trial]
            running.phase, running.phase_started = event.phase, at
        elif event.event in TRIAL_ENDS:
            running_trial = self.running.pop(event.trial, None)
            if event.event is EventKind.TASK_FINISHED and running_trial is not None:
                self.durations.append(at - running_trial.started)
            self.finished[event.trial] = event

    @property
    def done(self) -> int:
        return len(self.finished)

    def verdicts(self) -> Counter[str]:
        return Counter(event.verdict or "?" for event in self.finished.values())

    def arm_counts(self, arm: str) -> tuple[int, int]:
        """How many of the arm's trials are done, and how many of those were correct."""
        ended = [e for e in self.finished.values() if e.arm == arm]
        return len(ended), sum(e.verdict in CORRECT_WORDS for e in ended)

    @property
    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def eta(self) -> float | None:
        """Seconds left: the trials left times the mean time of a trial that ran, over the workers."""
        if self.total is None or not self.durations:
            return None
        left = max(self.total - self.done, 0)
        return statistics.fmean(self.durations) * left / max(1, min(self.workers, left or 1))

    def counts(self) -> str:
        total = f"/{self.total}" if self.total is not None else ""
        eta = self.eta()
        return f"{self.done}{total} done, elapsed {clock(self.elapsed)}" + (
            f", ETA {clock(eta)}" if eta is not None and self.total != self.done else ""
        )


def finished_line(event: RunEvent, state: ProgressState) -> str:
    """One trial's end, as rich markup: status, verdict, trial, score, speedup, why, progress."""
    status, verdict = event.status or "INFRA", event.verdict or ""
    style = STATUS_STYLE.get(status, "white")
    known = VERDICT_BY_WORD.get(verdict)
    verdict_style = VERDICT_STYLE[known] if known is not None else "white"
    if event.event is EventKind.TASK_REUSED:
        return (
            f"  [dim]done[/]    {escape(trial_name(event))} (completed earlier, kept: {escape(verdict)})"
            f"  [dim]({state.counts()})[/]"
        )
    speedup = f" speedup={event.speedup:.3f}x" if event.speedup else ""
    if speedup and state.smoke_test:
        speedup += " (smoke test)"
    why = f"  ({escape(valid_text(event.message))})" if event.message and status != "PASS" else ""  # no escapes
    return (
        f"  [{style}]{status:<7}[/] [{verdict_style}]{escape(verdict):<18}[/] {escape(trial_name(event))} "
        f"score={event.score or 0.0:.1f}{speedup}{why}  [dim]({state.counts()})[/]"
    )


def started_line(event: RunEvent) -> str:
    """The run's first line: where it is, who runs, on what, how much; and the smoke-test warning."""
    workers = f"  workers={event.workers}" if event.workers and event.workers > 1 else ""
    dropped = f" ({event.dropped} task(s) dropped by platform_support: see the log)" if event.dropped else ""
    line = (
        f"[bold]run[/] {escape(event.run_dir or '')}  agent={escape(event.agent or '')}  "
        f"device={escape(event.device or '')}  trials={event.trials}{dropped}{workers}"
    )
    return line + (f"\n[yellow]{SMOKE_TEST_NOTE}[/]" if event.smoke_test else "")


class PlainDisplay:
    """One line per event (`quiet`: only the run's first line and each trial's end)."""

    def __init__(self, console: Console, quiet: bool = False) -> None:
        self.console, self.quiet, self.state = console, quiet, ProgressState()

    def __enter__(self) -> PlainDisplay:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        return None

    def emit(self, event: RunEvent) -> None:
        self.state.apply(event)
        worker = f" (worker {escape(event.worker)})" if event.worker else ""
        if event.event is EventKind.RUN_STARTED:
            self._print(started_line(event))
        elif event.event in TRIAL_ENDS:
            self._print(finished_line(event, self.state))
        elif self.quiet:
            return
        elif event.event is EventKind.TASK_STARTED:
            self._print(f"  [dim]{'start':<11}[/] {escape(trial_name(event))}{worker}")
        elif event.event is EventKind.TASK_PHASE and event.phase is not None:
            self._print(f"  [dim]{event.phase.value:<11}[/] {escape(trial_name(event))}{worker}")

    def _print(self, markup: str) -> None:
        self.console.print(markup, highlight=False, soft_wrap=True)


class JsonDisplay:
    """Each event as its JSON line (the `events.jsonl` format) on `stream`, flushed at once."""

    def __init__(self, stream: IO[str] | None = None) -> None:
        self.stream = stream

    def __enter__(self) -> JsonDisplay:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        return None

    def emit(self, event: RunEvent) -> None:
        stream = self.stream or sys.stdout
        stream.write(event.line() + "\n")
        stream.flush()


class LiveDisplay:
    """A terminal view redrawn in place: progress, per-arm counts and the running trials with their
    phases; each trial's end is printed above it as a line that stays."""

    def __init__(self, console: Console) -> None:
        self.console, self.state = console, ProgressState()
        self.header = ""
        self.live = Live(
            console=console, get_renderable=self.render, transient=True, refresh_per_second=LIVE_REFRESHES_PER_SECOND
        )

    def __enter__(self) -> LiveDisplay:
        self.live.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.live.stop()

    def emit(self, event: RunEvent) -> None:
        self.state.apply(event)
        if event.event is EventKind.RUN_STARTED:
            self.header = started_line(event)
            self.console.print(self.header, highlight=False, soft_wrap=True)
        elif event.event in TRIAL_ENDS:
            self.console.print(finished_line(event, self.state), highlight=False, soft_wrap=True)
        self.live.refresh()

    def render(self) -> RenderableType:
        state = self.state
        parts: list[RenderableType] = []
        progress = Table.grid(padding=(0, 1))
        progress.add_row(ProgressBar(total=state.total or None, completed=state.done, width=40), Text(state.counts()))
        parts.append(progress)
        for arm, total in state.arm_trials.items():
            done, correct = state.arm_counts(arm)
            parts.append(Text(f"  arm {arm}: {done}/{total} done, {correct} correct"))
        verdicts = state.verdicts()
        if verdicts:
            parts.append(Text("  " + ", ".join(f"{name} {count}" for name, count in sorted(verdicts.items()))))
        if state.running:
            table = Table("running", "worker", "phase", "in phase", "trial", box=None, padding=(0, 2))
            now = time.monotonic()
            for running in state.running.values():
                phase = running.phase.value if running.phase else "starting"
                in_phase = clock(now - running.phase_started) if running.phase else "-"
                table.add_row(
                    Text(trial_name(running.event)),
                    Text(running.event.worker or "-"),
                    phase,
                    in_phase,
                    clock(now - running.started),
                )
            parts.append(table)
        return Group(*parts)


def make_display(
    err_console: Console, out_console: Console, quiet: bool = False, json_events: bool = False
) -> ProgressDisplay:
    """The view for this invocation: JSON lines, quiet lines, the live view (both streams are a
    terminal) or plain lines."""
    if json_events:
        return JsonDisplay()
    if quiet:
        return PlainDisplay(err_console, quiet=True)
    if err_console.is_terminal and out_console.is_terminal:
        return LiveDisplay(err_console)
    return PlainDisplay(err_console)


@contextlib.contextmanager
def phases_shown(console: Console, what: str) -> Iterator[None]:
    """`aka task check`: the phase it is in, as a spinner in a terminal and one line each elsewhere."""
    started = time.monotonic()
    if not console.is_terminal:

        def line(phase: Phase) -> None:
            console.print(
                f"  [dim]{phase.value}[/] {escape(what)} ({clock(time.monotonic() - started)})",
                highlight=False,
                soft_wrap=True,
            )

        with phases_to(line):
            yield
        return
    status = Status(f"{escape(what)}: starting", console=console)

    def update(phase: Phase) -> None:
        status.update(f"{escape(what)}: {phase.value} (since {clock(time.monotonic() - started)})")

    with status, phases_to(update):
        yield
