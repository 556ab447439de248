"""Proof that a paused candidate stayed paused: the kernel's CPU clock of each of its processes,
read once every thread of theirs stands stopped, and read again before anything of it resumes.

Why: a pause (SIGSTOP to every process of the worker, `aka.harness.remote`) keeps the candidate
from running while the baseline is timed only as long as nothing continues it, and a stopped
process is continued by more than the judge: a tracer, a SIGCONT from a process of its own that
has not been stopped yet, or one the kernel sends on its behalf (a POSIX timer armed with
SIGCONT resumes its own process a millisecond after every stop; a child's exit signal; a file's
owner signal). `aka.harness.syscall_filter` takes away the system calls that do it directly;
rather than list every other way, the judge checks the one thing none can hide: a stopped process
runs for no time at all, so its scheduler clock (all its threads, living or ended, in
nanoseconds: `clock_getcpuclockid`) stands still. A clock that moved, a process that ended, or
a thread that would not stop within `STOP_WAIT_S` means it ran while the other side was timed
(`tampering`). Honest workers stop within milliseconds: they wait for the judge's next request.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable
from dataclasses import dataclass, field

STOP_WAIT_S = 2.0  # how long a paused process's threads may take to stand stopped
LATE_NS = 1_000_000  # CPU time a process not yet stopped after that may take to stop (`lenient`)
POLL_S = 0.0002
STILL = ("T", "t", "Z", "X")  # /proc states of a thread that cannot run: stopped, traced, dead


def cpu_ns(pid: int) -> int | None:
    """The CPU time process `pid` has run, all its threads together (ns); None once it is gone."""
    try:
        return time.clock_gettime_ns((~pid << 3) | 2)  # its CPUCLOCK_SCHED process clock
    except OSError:
        return None


def _state(path: str) -> str | None:
    try:
        fd = os.open(path, os.O_RDONLY)
        try:
            return os.read(fd, 4096).rsplit(b")", 1)[1].split()[0].decode()
        finally:
            os.close(fd)
    except (OSError, IndexError):
        return None  # ended meanwhile


def _moving_threads(pid: int) -> list[str]:
    """The threads of `pid` that may still run (none where the process is gone)."""
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return []
    return [task for task in tasks if (_state(f"/proc/{pid}/task/{task}/stat") or "X") not in STILL]


def _described(pid: int, threads: list[str]) -> list[str]:
    """Threads as `tid:state:wait channel` (where the kernel has it): why one did not stop is then
    in the verdict's message (an unchanged candidate was once judged so on an H100, session 51)."""
    described = []
    for task in threads[:5]:
        try:
            with open(f"/proc/{pid}/task/{task}/wchan") as channel:
                wchan = channel.read().strip() or "-"
        except OSError:
            wchan = "?"
        described.append(f"{task}:{_state(f'/proc/{pid}/task/{task}/stat') or 'gone'}:{wchan}")
    return described


def _dead(pid: int) -> bool:
    """Every thread of `pid` has ended. Not its leader's state alone: a process whose main thread
    exits reads `Z` while its other threads run on (a red team's helpers hid from the clocks so)."""
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return True
    return all((_state(f"/proc/{pid}/task/{task}/stat") or "X") in ("Z", "X") for task in tasks)


@dataclass
class Stillness:
    """The clocks of stopped processes (`take`), to compare before they are continued (`broken`,
    `lenient`)."""

    clocks: dict[int, int] = field(default_factory=dict)
    unstopped: dict[int, list[str]] = field(default_factory=dict)  # pid -> threads still running

    @classmethod
    def take(cls, pids: Iterable[int], wait_s: float = STOP_WAIT_S) -> Stillness:
        """Wait (at most `wait_s`) for every thread of `pids` to stand stopped, then read their clocks."""
        pids = list(pids)
        waiting, deadline = set(pids), time.monotonic() + wait_s
        moving: dict[int, list[str]] = {}
        while True:
            moving = {pid: threads for pid in waiting if (threads := _moving_threads(pid))}
            if not moving or time.monotonic() > deadline:
                break
            waiting = set(moving)
            time.sleep(POLL_S)
        still = cls(unstopped=moving)
        for pid in pids:  # a process that ended (a zombie) runs no more: nothing to measure
            if not _dead(pid) and (clock := cpu_ns(pid)) is not None:
                still.clocks[pid] = clock
        return still

    def broken(self) -> str | None:
        """Why the paused processes did not stay still, or None where none ran: the judge's pause
        of the candidate's worker, whose honest processes all wait for its next request."""
        for pid, threads in self.unstopped.items():  # still running when it was to stand still
            described = _described(pid, threads)
            return f"process {pid} did not stop within {STOP_WAIT_S:.0f} s of its pause (threads {described})"
        return self._running() or self._moved(0)

    def lenient(self) -> str | None:
        """`broken`, for a step's whole tree (compilers among them): a process still finishing a
        system call that blocks uninterruptibly when the stop came (disk I/O) may take a while and
        some CPU time (`LATE_NS`) to stand stopped; one still running now is not stopped at all."""
        for pid in self.unstopped:
            if threads := _moving_threads(pid):
                return f"process {pid} did not stop while it was paused (threads {_described(pid, threads)})"
        return self._running() or self._moved(LATE_NS)

    def moved_so_far(self) -> str | None:
        """`lenient` while the pause still runs: a thread still in uninterruptible sleep is not
        yet a sign (it runs nothing of its own; `lenient` at the pause's end still counts it)."""
        return self.escaped() or self._running() or self._moved(LATE_NS)

    def escaped(self) -> str | None:
        """A process with a thread that did not stand stopped and could run its own code: any
        state but uninterruptible sleep (disk I/O, a slow network file system), which stops as it
        returns from the kernel and runs nothing of its own meanwhile (`lenient` sees it later)."""
        for pid in self.unstopped:
            for task in _moving_threads(pid):
                if _state(f"/proc/{pid}/task/{task}/stat") not in (None, "D"):
                    return f"process {pid} did not stop while it was paused (thread {_described(pid, [task])[0]})"
        return None

    def _running(self) -> str | None:
        """A process seen stopped whose threads run now (continued, and not yet stopped again)."""
        for pid in self.clocks:
            if pid not in self.unstopped and (threads := _moving_threads(pid)):
                return f"process {pid} ran while it was paused (threads {_described(pid, threads)} running)"
        return None

    def _moved(self, late_ns: int) -> str | None:
        for pid, before in self.clocks.items():
            now = cpu_ns(pid)
            if now is None:
                return f"process {pid} ended while it was paused"
            if now - before > (late_ns if pid in self.unstopped else 0):
                return f"process {pid} ran for {(now - before) / 1e3:.0f} us while it was paused"
        return None
