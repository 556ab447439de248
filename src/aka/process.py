"""Running one shell command in its own process group, with a timeout that kills the whole group."""

from __future__ import annotations

import contextlib
import ctypes
import os
import re
import shlex
import signal
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, NamedTuple, Protocol

KILL_GRACE_SECONDS = 5.0
TAIL_CHARS = 2000
PR_SET_PDEATHSIG = 1


@dataclass(frozen=True)
class CommandOutcome:
    command: str
    exit_code: int | None
    timed_out: bool
    seconds: float
    output_tail: str
    stopped: bool = False  # a process of its group sat stopped (SIGSTOP): killed, not waited for
    breach: str | None = None  # why its `watch` had it killed (e.g. it wrote too much)
    flooded: int | None = None  # the output limit it printed past (bytes): killed

    @property
    def ok(self) -> bool:
        return (
            self.exit_code == 0
            and not self.timed_out
            and not self.stopped
            and self.breach is None
            and self.flooded is None
        )

    def describe(self) -> str:
        """One line for error messages: how it ended, plus the last meaningful output line."""
        if self.flooded is not None:
            return (
                f"`{self.command}` printed more than {self.flooded / 2**20:.0f} MiB (the output limit) and was "
                f"killed after {self.seconds:.0f} s"
            )
        if self.breach is not None:
            return f"`{self.command}` was killed after {self.seconds:.0f} s: {self.breach}"
        if self.stopped:
            head = f"`{self.command}` was stopped by a signal after {self.seconds:.0f} s and was killed"
        elif self.timed_out:
            head = f"`{self.command}` timed out after {self.seconds:.0f} s and was killed"
        elif self.exit_code is not None and self.exit_code < 0:
            head = f"`{self.command}` was killed by signal {-self.exit_code}"
        else:
            head = f"`{self.command}` exited with status {self.exit_code}"
        line = last_meaningful_line(self.output_tail)
        return f"{head}: {line}" if line else head


_EXCEPTION_LINE = re.compile(r"^(?:[A-Za-z_][\w.]*\.)?[A-Z]\w*(?:Error|Exception|Exit|Interrupt)\b")


def last_meaningful_line(output: str) -> str:
    """The last line of a traceback's exception (`torch.AcceleratorError: CUDA error: ...`), not
    the hints torch prints after it (`Compile with TORCH_USE_CUDA_DSA ...`); else the last line."""
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    exceptions = [line for line in lines if _EXCEPTION_LINE.match(line)]
    return exceptions[-1] if exceptions else (lines[-1] if lines else "")


STOP_CHECK_SECONDS = 1.0


def process_table() -> dict[int, tuple[str, int, int]]:
    """(state, parent pid, process group) of every process visible in /proc. Plain `os` calls: a
    pause reads it twice per side and pair, and pathlib's glob took 5x as long (2.6 ms for 68
    processes)."""
    table: dict[int, tuple[str, int, int]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            fd = os.open(f"/proc/{name}/stat", os.O_RDONLY)
            try:
                fields = os.read(fd, 4096).rsplit(b")", 1)[1].split()
            finally:
                os.close(fd)
            table[int(name)] = (fields[0].decode(), int(fields[1]), int(fields[2]))
        except (OSError, IndexError, ValueError):
            continue
    return table


def stopped_in_group(pgid: int) -> bool:
    """Is a process of group `pgid` stopped (state T or t)? Nothing it runs stops on purpose, so
    a stopped one was stopped by someone: waiting for it would wait out the timeout."""
    return any(group == pgid and state in ("T", "t") for state, _, group in process_table().values())


def tree(root: int, table: dict[int, tuple[str, int, int]] | None = None) -> list[int]:
    """`root` and every process below it, parents before their children."""
    table = process_table() if table is None else table
    below, seen, at = [root], {root}, 0
    while at < len(below):
        parent, at = below[at], at + 1
        for pid, (_, ppid, _) in table.items():
            if ppid == parent and pid not in seen:
                seen.add(pid)
                below.append(pid)
    return below


STOPPED = ("T", "t")  # /proc states of a stopped process (by a signal, or under a tracer)


class Stop(NamedTuple):
    signalled: list[int]  # what `stop_trees` stopped, in order (`continue_processes` undoes it)
    seen: list[int]  # every process of the trees at the end, also those stopped before (by someone else)


def stop_trees(roots: Mapping[int, int | None]) -> Stop:
    """SIGSTOP every process of the trees under `roots` (pid -> its pidfd, or None), parents
    first (a parent never sees a child stopped while it runs); look again for processes forked
    meanwhile. A root already stopped is left out: someone else stopped it, and continuing it is
    not the caller's to do. The trees are read before the first stop, so the processes known
    then are stopped within a few system calls of each other (a child that watches its parent
    gets no time to act between their stops)."""
    stopped: list[int] = []
    table = process_table()
    for pid, pidfd in roots.items():
        if table.get(pid, ("?",))[0] in STOPPED:
            continue
        try:  # through its pidfd: a root that has ended is never confused with a new process
            if pidfd is not None:
                signal.pidfd_send_signal(pidfd, signal.SIGSTOP)
            else:
                os.kill(pid, signal.SIGSTOP)
            stopped.append(pid)
        except (ProcessLookupError, PermissionError):
            continue
        for child in tree(pid, table)[1:]:
            if table[child][0] not in STOPPED and child not in stopped:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(child, signal.SIGSTOP)
                    stopped.append(child)
    for _ in range(3):
        table = process_table()
        below = [p for root in list(stopped) if root in roots for p in tree(root, table)]
        fresh = [p for p in below if p not in stopped and table.get(p, ("?",))[0] not in STOPPED]
        if not fresh:
            break
        for pid in fresh:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGSTOP)
        stopped += fresh
    seen = {p for root in roots if root in table for p in tree(root, table)}
    return Stop(stopped, sorted(seen | set(stopped)))


def continue_processes(stopped: Sequence[int]) -> None:
    """SIGCONT what `stop_trees` stopped, children first: a parent never sees a child stopped."""
    for pid in reversed(stopped):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGCONT)


def descendants(root: int, table: dict[int, tuple[str, int, int]] | None = None) -> set[int]:
    """`root` and every process below it."""
    return set(tree(root, table))


def stopped_descendant(root: int) -> bool:
    """Is `root` or any process below it stopped?"""
    table = process_table()
    return any(table[pid][0] in ("T", "t") for pid in descendants(root, table) if pid in table)


def kill_descendants(root: int) -> None:
    """SIGKILL every process below `root` (not `root` itself): what threads of an exiting process
    started, which no unwinding of theirs would reach in time."""
    for pid in descendants(root) - {root}:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)


def _kill_group(pgid: int) -> None:
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(pgid, sig)
        except ProcessLookupError:
            return
        if sig == signal.SIGTERM:
            time.sleep(0.2)


def run_command(
    command: str | list[str],
    cwd: Path,
    env: dict[str, str],
    timeout: float,
    log_path: Path,
    stdin: bytes | None = None,
    pass_fds: tuple[int, ...] = (),
    prefix: tuple[str, ...] = (),
    preexec: Callable[[], None] | None = None,
) -> CommandOutcome:
    """Run `command` (a bash line, or an argv list run directly) in `cwd`; output goes to `log_path`.

    The command gets a new session, so on timeout, and after it exits, any process it left behind
    in its group is killed: a step can never outlive its budget. It is also killed when the
    thread that started it dies (`aka` killed with -9). `stdin` is fed through a pipe
    (no argv length limit); without it, standard input is closed. `prefix` wraps the command
    (e.g. a namespace sandbox), `pass_fds` are inherited, `preexec` runs in the child (limits).
    """
    started = StartedCommand(command, cwd, env, log_path, stdin is not None, pass_fds, prefix, preexec)
    return started.finish(stdin, timeout)


def _dies_with(parent: int, preexec: Callable[[], None] | None) -> Callable[[], None]:
    """In the child: killed when the thread that started it is gone (aka killed with -9 cannot
    kill the group itself; a sandbox's PID namespace then takes everything in it along), then
    `preexec`."""

    def start() -> None:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if os.getppid() != parent:  # the parent died before the request took effect
            os._exit(1)
        if preexec is not None:
            preexec()

    return start


class RunningProcess(Protocol):
    """What `StartedCommand` needs of a started process: a `subprocess.Popen`, or a step forked
    by the warm parent (`aka.evaluation.warm_parent.ForkedProcess`)."""

    @property
    def pid(self) -> int: ...
    @property
    def returncode(self) -> int | Any: ...
    @property
    def stdin(self) -> IO[bytes] | Any: ...
    def poll(self) -> int | None: ...
    def wait(self, timeout: float | None = None) -> int: ...
    def communicate(self, input: bytes | None = None, timeout: float | None = None) -> tuple[Any, Any]: ...
    def kill(self) -> None: ...


class PauseClock(Protocol):
    """Who may stop a running command for a while on purpose (aka.evaluation.device_lock's shared
    turns step aside for a timed step): the time it was stopped does not count against its
    timeout, and it is not a command stopped by someone else (tampering) while it lasts."""

    def paused_s(self) -> float: ...  # seconds stopped so far, the current pause included

    def pausing(self) -> bool: ...  # being stopped, stopped, or being continued right now


class StartedCommand:
    """A command started now and finished later: `finish` feeds its stdin and enforces the timeout.

    Starting early lets a step command pay its start-up (Python, torch) while earlier commands
    run; it blocks on its standard input until `finish` (see aka.evaluation.step_process).
    """

    def __init__(
        self,
        command: str | list[str],
        cwd: Path,
        env: dict[str, str],
        log_path: Path,
        with_stdin: bool = True,
        pass_fds: tuple[int, ...] = (),
        prefix: tuple[str, ...] = (),
        preexec: Callable[[], None] | None = None,
        fork: Callable[[int], RunningProcess] | None = None,
    ) -> None:
        """`fork`, where given, starts the command instead of an exec (`aka.evaluation.warm_parent`):
        called with the log's descriptor, it returns the started process."""
        log_path.parent.mkdir(parents=True, exist_ok=True)
        argv = [*prefix, *(["/bin/bash", "-c", command] if isinstance(command, str) else command)]
        self.shown = command if isinstance(command, str) else shlex.join(command)
        self.log_path = log_path
        with log_path.open("ab") as log:
            log.write(f"$ {self.shown}\n".encode())
            log.flush()
            self.offset = log.tell()
            if fork is not None:
                try:
                    self.proc: RunningProcess = fork(log.fileno())
                    return
                except OSError as exc:  # the warm parent is gone: exec it as every other command
                    log.write(f"(the warm parent could not start it: {exc}; exec'd instead)\n".encode())
                    log.flush()
            self.proc = subprocess.Popen(
                argv,
                cwd=cwd,
                env=env,
                stdin=subprocess.PIPE if with_stdin else subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                pass_fds=pass_fds,
                preexec_fn=_dies_with(os.getpid(), preexec),
            )

    def finish(
        self,
        stdin: bytes | None,
        timeout: float,
        watch: Callable[[], str | None] | None = None,
        output_limit: int | None = None,
        pauses: PauseClock | None = None,
        not_after: float | None = None,
    ) -> CommandOutcome:
        """Feed `stdin`, wait at most `timeout` seconds, then kill whatever is left in the group.
        A group whose process stays stopped for two checks in a row is killed at once, and so is
        one whose `watch` (called every check, and once more when it ends) names a reason, and one
        that printed more than `output_limit` bytes (its log would fill the disk; only its tail is
        ever read back).
        Time stopped by `pauses` extends the timeout, but never past `not_after` (monotonic)."""
        start = time.monotonic()
        timed_out = stopped = flooded = False
        breach: str | None = None
        pending, seen_stopped = stdin, 0
        seen_paused = 0.0

        def remaining() -> float:
            now = time.monotonic()
            left = timeout - (now - start - (pauses.paused_s() if pauses is not None else 0.0))
            return left if not_after is None else min(left, not_after - now)

        try:
            while True:
                try:
                    self.proc.communicate(input=pending, timeout=max(0.0, min(remaining(), STOP_CHECK_SECONDS)))
                    break
                except subprocess.TimeoutExpired:
                    pending = None
                    paused = pauses.paused_s() if pauses is not None else 0.0
                    if pauses is not None and (pauses.pausing() or paused != seen_paused):
                        seen_stopped, seen_paused = 0, paused  # stopped on purpose, just now
                    else:
                        seen_stopped = seen_stopped + 1 if stopped_in_group(self.proc.pid) else 0
                    stopped = seen_stopped >= 2
                    timed_out = remaining() <= 0
                    breach = watch() if watch is not None and not (stopped or timed_out) else None
                    flooded = output_limit is not None and self.printed() > output_limit
                    if stopped or timed_out or breach or flooded:
                        break
        except BaseException:  # interrupted (SIGTERM, Ctrl-C): the command never outlives its waiter
            self.abandon()
            raise
        if watch is not None and not (stopped or timed_out or breach or flooded):
            breach = watch()  # it ended between checks: what it did meanwhile (or what killed it) still counts
        if not (stopped or timed_out or breach or flooded):
            flooded = output_limit is not None and self.printed() > output_limit  # so does a flood
        _kill_group(self.proc.pid)
        if stopped or timed_out or breach or flooded:
            try:
                self.proc.wait(timeout=KILL_GRACE_SECONDS)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        seconds = time.monotonic() - start
        with self.log_path.open("rb") as log:  # only its end: a command may have printed gigabytes
            end = log.seek(0, os.SEEK_END)
            log.seek(max(self.offset, end - 4 * TAIL_CHARS))
            tail = log.read().decode("utf-8", errors="replace")[-TAIL_CHARS:]
        ended = None if timed_out or stopped or breach or flooded else self.proc.returncode
        return CommandOutcome(
            self.shown,
            ended,
            timed_out and not stopped,
            seconds,
            tail,
            stopped,
            breach,
            output_limit if flooded else None,
        )

    def printed(self) -> int:
        """Bytes the command has written to its log so far."""
        try:
            return self.log_path.stat().st_size - self.offset
        except OSError:
            return 0

    def abandon(self) -> None:
        """Kill a started command that will never get its turn (an earlier step failed)."""
        _kill_group(self.proc.pid)
        try:
            self.proc.wait(timeout=KILL_GRACE_SECONDS)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        if self.proc.stdin is not None:
            self.proc.stdin.close()
