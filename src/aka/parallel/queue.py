"""The shared trial queue of a parallel run: `RUN/.parallel/{pending,running,done,failed}/<index>.json`.

Every state change happens under one `filelock` (`queue.lock`), so a trial is claimed by one
worker only. A claim is a lease (worker id, host, pid and the pid's start time, heartbeat time,
a claim id): a trial whose holder died (its pid gone from this host) or went silent (no heartbeat
within `lease_seconds`) goes back to pending, where another worker runs it again in a new
workspace. The original's queue had no lease, so a crashed worker's task stayed "running" forever.

An infrastructure failure (the holder died, or the trial's result was INFRA) costs one of the
trial's `max_attempts`; the last one moves it to failed/ with the reason. A report from a worker
that lost its lease is refused, so each trial ends in done/ or failed/ exactly once.
"""

from __future__ import annotations

import os
import secrets
import shutil
import socket
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from filelock import FileLock
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from aka.errors import ConfigError
from aka.results.task_result import write_text_atomic
from aka.run.schedule import Trial

QUEUE_DIR = ".parallel"
STATES = ("pending", "running", "done", "failed")
SETTINGS_NAME = "queue.json"
LOCK_NAME = "queue.lock"
WORKERS_DIR = "workers"
LAPSED_DIR = "lapsed"  # leases reclaimed from their workers, for the parent to kill them
DEFAULT_LEASE_SECONDS = 60.0
DEFAULT_MAX_ATTEMPTS = 3
LOCK_POLL_SECONDS = 0.002  # filelock's default 0.05 s made a contended claim wait 50 ms per retry


class QueueSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")

    schema_version: int = 1
    trials: int
    lease_seconds: float = Field(default=DEFAULT_LEASE_SECONDS, gt=0)
    max_attempts: int = Field(default=DEFAULT_MAX_ATTEMPTS, ge=1)


class Lease(BaseModel):
    model_config = ConfigDict(extra="forbid")

    claim_id: str
    worker_id: str
    host: str
    pid: int
    pid_started: str | None
    claimed_at: float
    heartbeat_at: float


class TrialEntry(BaseModel):
    """One trial's record; the folder it is in is its state."""

    model_config = ConfigDict(extra="forbid")

    index: int
    task: str
    arm: str | None
    repeat: int
    attempts: int = 0
    history: list[str] = Field(default_factory=list)
    lease: Lease | None = None
    workspace: str | None = None
    status: str | None = None
    reason: str | None = None

    @property
    def key(self) -> str:
        return f"{self.index:06d}"

    @property
    def trial(self) -> Trial:
        return Trial(self.task, self.arm, self.repeat)


@dataclass(frozen=True)
class WorkerIdentity:
    worker_id: str
    host: str
    pid: int
    pid_started: str | None

    @classmethod
    def this_process(cls, worker_id: str) -> WorkerIdentity:
        return cls(worker_id, socket.gethostname(), os.getpid(), pid_start_time(os.getpid()))


def pid_start_time(pid: int) -> str | None:
    """The process's start time in clock ticks since boot (field 22 of /proc/PID/stat): a pid
    reused by another process after the holder died has another one. None for a process that is
    gone, or dead but not yet reaped (a zombie keeps its stat: where nothing reaps orphans, as in
    some containers, a killed worker stays one)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return None if fields[0] in ("Z", "X") else fields[19]
    except (OSError, IndexError):
        return None


def lease_problem(lease: Lease, now: float, lease_seconds: float) -> str | None:
    """Why the lease no longer holds (holder dead or silent), or None while it does."""
    holder = f"worker {lease.worker_id} (pid {lease.pid} on {lease.host})"
    gone = False
    if lease.host == socket.gethostname():
        started = pid_start_time(lease.pid)
        gone = started is None or (lease.pid_started is not None and started != lease.pid_started)
    silent = now - lease.heartbeat_at > lease_seconds
    if silent:
        # A silent holder is killed by the supervisor, often before the trial is reclaimed:
        # the reason kept is the first one, its silence.
        quiet = f"{holder} sent no heartbeat for {now - lease.heartbeat_at:.0f} s (lease {lease_seconds:.0f} s)"
        return f"{quiet} and is gone" if gone else quiet
    return f"{holder} died holding it" if gone else None


class TrialQueue:
    """The queue in `run_dir/.parallel`; every method takes the queue's lock for its change."""

    def __init__(self, run_dir: Path) -> None:
        self.root = run_dir / QUEUE_DIR
        self._lock = FileLock(self.root / LOCK_NAME, poll_interval=LOCK_POLL_SECONDS)

    @property
    def exists(self) -> bool:
        return (self.root / SETTINGS_NAME).is_file()

    def settings(self) -> QueueSettings:
        return QueueSettings.model_validate_json((self.root / SETTINGS_NAME).read_text(encoding="utf-8"))

    @contextmanager
    def locked(self) -> Iterator[None]:
        with self._lock:
            yield

    def fill(
        self,
        trials: list[Trial],
        lease_seconds: float = DEFAULT_LEASE_SECONDS,
        max_attempts: int = DEFAULT_MAX_ATTEMPTS,
    ) -> None:
        """Every trial pending, nothing else: a new run, or a resume (trials completed earlier are
        reused by the worker that claims them, through their completion records, as a serial resume
        does). Refused while a live worker holds a trial."""
        self.root.mkdir(parents=True, exist_ok=True)
        (self.root / WORKERS_DIR).mkdir(exist_ok=True)
        with self.locked():
            if self.exists:
                live = [
                    e
                    for e in self._in("running")
                    if e.lease is not None
                    and lease_problem(e.lease, time.time(), self.settings().lease_seconds) is None
                ]
                if live:
                    lease = live[0].lease
                    assert lease is not None
                    raise QueueBusy(
                        f"{self.root}: worker {lease.worker_id} (pid {lease.pid} on {lease.host}) "
                        f"still holds trial {live[0].task}; stop the run's workers first"
                    )
            for state in STATES:
                shutil.rmtree(self.root / state, ignore_errors=True)
                (self.root / state).mkdir()
            for index, trial in enumerate(trials):
                entry = TrialEntry(index=index, task=trial.task, arm=trial.arm, repeat=trial.repeat)
                self._write("pending", entry)
            settings = QueueSettings(trials=len(trials), lease_seconds=lease_seconds, max_attempts=max_attempts)
            write_text_atomic(self.root / SETTINGS_NAME, settings.model_dump_json(indent=2))

    def claim(self, worker: WorkerIdentity) -> TrialEntry | None:
        """The first pending trial, leased to `worker`; stale leases are reclaimed first."""
        with self.locked():
            self._reclaim_stale()
            pending = sorted((self.root / "pending").glob("*.json"))
            if not pending:
                return None
            entry = self._read(pending[0])
            now = time.time()
            entry.lease = Lease(
                claim_id=secrets.token_hex(8),
                worker_id=worker.worker_id,
                host=worker.host,
                pid=worker.pid,
                pid_started=worker.pid_started,
                claimed_at=now,
                heartbeat_at=now,
            )
            self._move(entry, "pending", "running")
            return entry

    def heartbeat(self, entry: TrialEntry) -> bool:
        """Renew the lease; False when it was lost (reclaimed after the worker went silent)."""
        with self.locked():
            current = self._held(entry)
            if current is None or current.lease is None:
                return False
            current.lease.heartbeat_at = time.time()
            self._write("running", current)
            return True

    def report(self, entry: TrialEntry, workspace: Path, status: str, reason: str | None) -> str | None:
        """The trial's end: done/, or for an infrastructure failure (`reason` set) pending again
        until its attempts are spent, then failed/. Returns the new state, None when the lease was
        lost (the trial is someone else's now; this result is not counted)."""
        with self.locked():
            current = self._held(entry)
            if current is None:
                return None
            current.workspace, current.status, current.lease = str(workspace), status, None
            if reason is None:
                self._move(current, "running", "done")
                return "done"
            return self._spend_attempt(current, f"attempt {current.attempts + 1}: {reason}")

    def _note_lapsed(self, lease: Lease) -> None:
        """Keep a reclaimed lease for the parent, which kills its worker (a stopped one still holds
        its locks: a baseline's, say, that the trial's next holder waits on)."""
        path = self.root / LAPSED_DIR / f"{lease.worker_id}-{lease.pid}.json"
        path.parent.mkdir(exist_ok=True)
        path.write_text(lease.model_dump_json(), encoding="utf-8")

    def take_lapsed(self) -> list[Lease]:
        """The leases reclaimed since the last call (each returned once)."""
        found = []
        for path in sorted((self.root / LAPSED_DIR).glob("*.json")):
            try:
                found.append(Lease.model_validate_json(path.read_text(encoding="utf-8")))
                path.unlink()
            except (OSError, ValidationError):
                continue
        return found

    def lapsed_leases(self) -> list[Lease]:
        """Leases of running trials that no longer hold, read without the lock: a worker stopped
        while holding the lock (or another one, such as a baseline's) must not stop the one who
        reads this to kill it."""
        lease_seconds, now, found = self.settings().lease_seconds, time.time(), []
        for path in (self.root / "running").glob("*.json"):
            try:
                entry = TrialEntry.model_validate_json(path.read_text(encoding="utf-8"))
            except (OSError, ValidationError):
                continue
            if entry.lease is not None and lease_problem(entry.lease, now, lease_seconds) is not None:
                found.append(entry.lease)
        return found

    def reclaim_stale(self) -> list[TrialEntry]:
        with self.locked():
            return self._reclaim_stale()

    def entries(self) -> dict[str, list[TrialEntry]]:
        with self.locked():
            return {state: self._in(state) for state in STATES}

    def counts(self) -> dict[str, int]:
        """Trials per state (files counted, not read: the parent polls this while workers claim)."""
        with self.locked():
            return {state: sum(1 for _ in (self.root / state).glob("*.json")) for state in STATES}

    def drained(self) -> bool:
        with self.locked():
            return not any(next((self.root / state).glob("*.json"), None) for state in ("pending", "running"))

    def fail_remaining(self, reason: str) -> None:
        """Move every pending or running trial to failed/ (no worker is left to run them)."""
        with self.locked():
            for state in ("pending", "running"):
                for entry in self._in(state):
                    entry.reason, entry.lease = reason, None
                    self._move(entry, state, "failed")

    def release(self, held_by: Callable[[Lease], bool], why: str) -> list[TrialEntry]:
        """Return the trials whose lease `held_by` names to pending (or failed/, attempts spent):
        their holders are known to be gone (a cancelled Slurm job's workers), which from another
        host the lease alone would tell only after `lease_seconds`."""
        with self.locked():
            released = []
            for entry in self._in("running"):
                if entry.lease is not None and held_by(entry.lease):
                    entry.lease = None
                    self._spend_attempt(entry, f"attempt {entry.attempts + 1}: {why}")
                    released.append(entry)
            return released

    def _reclaim_stale(self) -> list[TrialEntry]:
        lease_seconds = self.settings().lease_seconds
        now, reclaimed = time.time(), []
        for entry in self._in("running"):
            problem = lease_problem(entry.lease, now, lease_seconds) if entry.lease else "no lease recorded"
            if problem is not None:
                if entry.lease is not None:
                    self._note_lapsed(entry.lease)
                entry.lease, entry.workspace, entry.status = None, None, None
                self._spend_attempt(entry, f"attempt {entry.attempts + 1}: {problem}")
                reclaimed.append(entry)
        return reclaimed

    def _spend_attempt(self, entry: TrialEntry, why: str) -> str:
        entry.attempts += 1
        entry.history.append(why)
        if entry.attempts >= self.settings().max_attempts:
            entry.reason = f"infrastructure failure in all {entry.attempts} attempt(s); last: {why}"
            self._move(entry, "running", "failed")
            return "failed"
        entry.workspace = entry.status = None
        self._move(entry, "running", "pending")
        return "pending"

    def _held(self, entry: TrialEntry) -> TrialEntry | None:
        path = self.root / "running" / f"{entry.key}.json"
        if not path.is_file() or entry.lease is None:
            return None
        current = self._read(path)
        if current.lease is None or current.lease.claim_id != entry.lease.claim_id:
            return None
        return current

    def _in(self, state: str) -> list[TrialEntry]:
        return [self._read(path) for path in sorted((self.root / state).glob("*.json"))]

    def _read(self, path: Path) -> TrialEntry:
        try:
            return TrialEntry.model_validate_json(path.read_text(encoding="utf-8"))
        except (OSError, ValidationError) as exc:
            raise QueueCorrupt(
                f"{path}: not a valid queue entry ({type(exc).__name__}); resume the run to rebuild its queue"
            ) from None

    def _write(self, state: str, entry: TrialEntry) -> None:
        """Atomic (a reader sees the old entry or the new) but not synced: the queue is rebuilt
        from the completion records on resume, and an fsync per claim was most of its cost."""
        path = self.root / state / f"{entry.key}.json"
        temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        temporary.write_text(entry.model_dump_json(indent=1), encoding="utf-8")
        os.replace(temporary, path)

    def _move(self, entry: TrialEntry, source: str, target: str) -> None:
        """Write the entry in `target`, then remove it from `source` (a crash in between leaves it
        in both; `fill` on resume starts over from the completion records)."""
        self._write(target, entry)
        (self.root / source / f"{entry.key}.json").unlink(missing_ok=True)


class QueueBusy(ConfigError):
    """A live worker still holds a trial of the queue being refilled."""


class QueueCorrupt(ConfigError):
    """A queue entry that cannot be read."""
