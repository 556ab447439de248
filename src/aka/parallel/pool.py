"""A parallel run: the parent's supervision loop, a worker's claim loop, and the results in order.

The parent (`aka run` with several slots) holds the run lock, fills the queue, starts one worker
per slot through an `Executor`, reclaims the trials of workers that died, restarts a worker that
ended while trials are left, and once the queue is drained stops them and reads every trial's
result from done/ and failed/: each trial counted once, the reports written once, by the parent.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from pathlib import Path

from aka.parallel.executor import DeviceSlot, Executor
from aka.parallel.queue import TrialEntry, TrialQueue, WorkerIdentity
from aka.results.task_result import (
    RESULT_FILE_NAME,
    FailureKind,
    TaskResult,
    TaskStatus,
    read_task_result,
)
from aka.results.verdict import Verdict
from aka.run.events import EventFollower, EventKind, EventSink, RunEvent, now
from aka.run.schedule import Trial

logger = logging.getLogger(__name__)
SUPERVISE_SECONDS = 0.5
IDLE_POLL_SECONDS = 0.25
RESTARTS_PER_SLOT = 3
WORKER_USAGE_EXIT = 2  # a worker that exits 2 was refused its run (config error): restarting it cannot help

RunTrial = Callable[[Trial, str], tuple[Path, TaskResult]]


def supervise(queue: TrialQueue, executor: Executor, slots: list[DeviceSlot], display: EventSink, events: Path) -> None:
    """Run the queue to the end with one worker per slot; on any exit (SIGTERM included) the
    workers are stopped before this returns. The workers' trial events (appended to `events`) go
    to `display`, and a trial the queue gave up on without a result is shown as its end."""
    restarts = dict.fromkeys(slots, 0)
    shown = _WorkersShown(queue, events, display)
    try:
        for slot in slots:
            executor.start(slot)
        live = set(slots)
        while not queue.drained():
            for lease in queue.lapsed_leases() + queue.take_lapsed():
                logger.warning("worker %s (pid %d) lost its lease; killing it", lease.worker_id, lease.pid)
                executor.kill(lease.worker_id, lease.pid)
            for entry in queue.reclaim_stale():
                logger.warning("trial %d (%s) reclaimed: %s", entry.index, entry.task, entry.history[-1])
            for slot, code in executor.exited().items():
                live.discard(slot)
                if queue.drained():
                    continue
                if code == WORKER_USAGE_EXIT or restarts[slot] >= RESTARTS_PER_SLOT:
                    logger.error("worker %s exited with %d; not restarted", slot.worker_id, code)
                    continue
                restarts[slot] += 1
                logger.warning("worker %s exited with %d; restarting it", slot.worker_id, code)
                executor.start(slot)
                live.add(slot)
            if not live:
                queue.fail_remaining("every worker exited before the queue drained (see .parallel/workers/*.log)")
                break
            shown.update()
            time.sleep(SUPERVISE_SECONDS)
        shown.update()
    finally:
        executor.stop()


class _WorkersShown:
    """The parallel run's trials as the parent shows them: the workers' events, read from the
    events file, then an end for each trial that failed/ holds whose last event is not an end
    (its holders died). The queue is read before the file: a worker appends its trial's end before
    it reports the trial, so an end already written is always read with it."""

    def __init__(self, queue: TrialQueue, events: Path, display: EventSink) -> None:
        self.queue, self.follower, self.display = queue, EventFollower(events), display
        self.last: dict[tuple[str, str | None, int], EventKind] = {}
        self.shown: set[int] = set()

    def update(self) -> None:
        failed = self.queue.entries()["failed"]
        for event in self.follower.poll():
            self.display.emit(event)
            self.last[event.trial] = event.event
        for entry in failed:
            if entry.index in self.shown:
                continue
            self.shown.add(entry.index)
            if self.last.get((entry.task, entry.arm, entry.repeat)) is EventKind.TASK_FINISHED:
                continue
            self.display.emit(
                RunEvent(
                    time=now(),
                    event=EventKind.TASK_FINISHED,
                    task=entry.task,
                    arm=entry.arm,
                    repeat=entry.repeat if entry.arm or entry.repeat > 1 else None,
                    status=TaskStatus.INFRA.value,
                    verdict=Verdict.INFRASTRUCTURE.value,
                    message=entry.reason or "; ".join(entry.history) or "not run",
                )
            )


class _Heartbeat:
    """Renews a lease from a thread while the trial runs (a stopped or hung process sends none)."""

    def __init__(self, queue: TrialQueue, entry: TrialEntry, interval: float) -> None:
        self.queue, self.entry, self.interval = queue, entry, interval
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._beat, name="aka-heartbeat", daemon=True)

    def __enter__(self) -> _Heartbeat:
        self.thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self.stopped.set()
        self.thread.join()

    def _beat(self) -> None:
        while not self.stopped.wait(self.interval):
            if not self.queue.heartbeat(self.entry):
                logger.warning("lost the lease of trial %d (%s)", self.entry.index, self.entry.task)
                return


def work_queue(queue: TrialQueue, worker: WorkerIdentity, run_trial: RunTrial) -> int:
    """Claim, run and report trials until none is pending or running; returns how many were reported."""
    interval = max(0.2, min(5.0, queue.settings().lease_seconds / 4))
    reported = 0
    while True:
        entry = queue.claim(worker)
        if entry is None:
            if queue.drained():
                return reported
            time.sleep(IDLE_POLL_SECONDS)
            continue
        with _Heartbeat(queue, entry, interval):
            workspace, result = run_trial(entry.trial, worker.worker_id)
        reason = result.failure_message or "infrastructure error" if result.status is TaskStatus.INFRA else None
        state = queue.report(entry, workspace, result.status.value, reason)
        if state is None:
            logger.warning(
                "trial %d (%s) finished after its lease was lost; result not counted", entry.index, entry.task
            )
        else:
            reported += 1


def queue_results(queue: TrialQueue, task_types: dict[str, str], repeated: bool) -> list[TaskResult]:
    """Every trial's result in schedule order: done/ from its workspace, failed/ from its
    workspace's INFRA result or, where its holder died each time, an INFRA result with the reason."""
    entries = queue.entries()
    if entries["pending"] or entries["running"]:
        raise ValueError("the queue is not drained")
    results = []
    for entry in sorted(entries["done"] + entries["failed"], key=lambda e: e.index):
        path = Path(entry.workspace) / RESULT_FILE_NAME if entry.workspace else None
        if path is not None and path.is_file():
            results.append(read_task_result(path))
            continue
        results.append(
            TaskResult(
                task_name=entry.task,
                task_type=task_types.get(entry.task, ""),
                arm=entry.arm,
                repeat=entry.repeat if repeated else None,
                failure_kind=FailureKind.INFRA_ERROR,
                status=TaskStatus.INFRA,
                failure_message=entry.reason or "; ".join(entry.history) or "not run",
                optimization_summary="Not evaluated: infrastructure error (not the agent's failure).",
            )
        )
    return results
