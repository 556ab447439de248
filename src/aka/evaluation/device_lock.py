"""Who may use a device now, across every aka process on this machine.

Timing is only honest on a device that nothing else uses: another process's kernels time-slice
with the timed calls. But most of an evaluation does not time anything (starting Python,
compiling, checking outputs), so several evaluations may share a device as long as a timed step
has it alone. Steps that use the device without timing hold it *shared* (any number at once);
a timed step holds it *exclusive*. Writers are preferred: a timed step that waits lets no new
shared holder in (a turnstile), so checks cannot starve the timing.

One pair of `flock` files per physical GPU (its UUID) in a machine-wide folder (`AKA_DEVICE_LOCK_DIR`, default
`<tmp>/aka-device-locks`, sticky and world-writable so that several users' runs coordinate). A
lock held by a process that dies is released by the kernel. On the CPU steps do not wait for
each other (`device_turn`): its timings are a smoke test, and on a machine of two cores the waits
would cost more than they keep out.

A shared holder steps aside (`SharedTurn`): a candidate that hangs in a shared step (it sleeps,
or spins on the CPU) would otherwise keep every timed step on its GPU waiting until its step's
timeout (on the H200, five minutes in which no evaluation was timed). Once a timed step has waited
`YIELD_AFTER_S` for it (`$AKA_DEVICE_YIELD_AFTER_S`), the shared holder stops its steps'
processes (SIGSTOP, parents first), gives what they queued `DRAIN_S` to finish, lets the lock go,
waits its turn again and continues them (SIGCONT, children first). It lets the lock go only once
every thread of theirs stands stopped (at most `STOP_WAIT_S`), and watches them while the timed
step runs: a process that does not stop, or stood stopped and then ran (its scheduler clock
moved: `aka.stillness`; continued by candidate code, a timer's SIGCONT or a helper that escaped
the stop), is killed at once with its step's whole tree, and the step is `tampering`
(`Turn.ran_aside`). Before session 47 such helpers ran beside the timed step to its end, and an
honest evaluation timed then failed (its baseline late in every pair, on an H100). The stopped
time counts neither against the step's timeout nor as a stopped step (`aka.process.PauseClock`).
A stopped process keeps its GPU memory and cannot launch kernels; kernels it had already queued
still run, and the timed step's interference check is what guards against them.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from aka.device import DeviceInfo
from aka.errors import ConfigError
from aka.evaluation.wire import DRAIN_S
from aka.process import continue_processes, process_table, stop_trees, tree
from aka.stillness import Stillness

ENV_LOCK_DIR = "AKA_DEVICE_LOCK_DIR"
ENV_YIELD_AFTER = "AKA_DEVICE_YIELD_AFTER_S"  # overrides YIELD_AFTER_S (seconds, > 0)
YIELD_AFTER_S = 5.0  # how long a timed step waits for a shared holder before it steps aside
WATCH_S = 0.25  # how often a shared holder looks for a waiting timed step
RETRY_S = 0.01  # how often a turn that stepped aside tries for the lock again
MOVE_WATCH_S = 0.05  # how often a turn that stepped aside checks that its stopped processes stand still


def yield_after_s() -> float:
    """`YIELD_AFTER_S`, or `$AKA_DEVICE_YIELD_AFTER_S`: lower gives timed steps the device sooner
    (shared steps stand stopped more often); 5 s is what the H200 has been measured with."""
    raw = os.environ.get(ENV_YIELD_AFTER)
    if raw is None or not raw.strip():
        return YIELD_AFTER_S
    try:
        seconds = float(raw)
    except ValueError:
        seconds = -1.0
    if not 0 < seconds < float("inf"):
        raise ConfigError(f"{ENV_YIELD_AFTER}={raw!r}: expected seconds greater than 0 (e.g. 5); unset it for 5 s")
    return seconds


def lock_dir() -> Path:
    configured = os.environ.get(ENV_LOCK_DIR)
    path = Path(configured) if configured else Path(tempfile.gettempdir()) / "aka-device-locks"
    if not path.is_dir():
        path.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(OSError):
            path.chmod(0o1777)
    return path


def device_key(device: DeviceInfo) -> str:
    """The physical device: its UUID where known (masks renumber devices), else its name."""
    raw = device.uuid or device.name
    return re.sub(r"[^A-Za-z0-9_.-]", "_", raw)


def _open(path: Path) -> int:
    """The lock file, never through a link (the folder is shared by every user of the machine); a
    folder or link planted in its place is named, with the fix, instead of failing each task."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o666)
    except OSError as exc:
        raise ConfigError(
            f"{path}: cannot open the device lock ({exc.strerror}); remove it, or set {ENV_LOCK_DIR} "
            "to a folder that every evaluation on this machine shares and nobody else can write"
        ) from exc
    return fd


@contextlib.contextmanager
def _flock(path: Path, mode: int) -> Iterator[None]:
    fd = _open(path)
    try:
        fcntl.flock(fd, mode)
        yield
    finally:
        os.close(fd)  # closing the descriptor releases its lock


@dataclass(frozen=True)
class DeviceLock:
    """The device's lock; `hold(exclusive)` waits for it and returns the seconds waited."""

    key: str
    directory: Path

    @property
    def turnstile(self) -> Path:
        return self.directory / f"{self.key}.turnstile"

    @property
    def lock(self) -> Path:
        return self.directory / f"{self.key}.lock"

    @classmethod
    def for_device(cls, device: DeviceInfo) -> DeviceLock:
        return cls(device_key(device), lock_dir())

    @contextlib.contextmanager
    def hold(self, exclusive: bool) -> Iterator[float]:
        """The lock (exclusive or shared) for as long as the block runs; yields the seconds waited."""
        started = time.monotonic()
        fd = self.enter(exclusive)
        try:
            yield time.monotonic() - started
        finally:
            os.close(fd)  # closing the descriptor releases its lock

    def enter(self, exclusive: bool) -> int:
        """Through the turnstile, then the lock: a descriptor that holds it until closed. The
        turnstile is kept only while waiting, so a waiting exclusive holder stops new shared
        holders at the turnstile."""
        with _flock(self.turnstile, fcntl.LOCK_EX):
            fd = _open(self.lock)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
            except BaseException:
                os.close(fd)
                raise
            return fd

    def enter_unless(self, cancelled: threading.Event, exclusive: bool = False) -> int | None:
        """`enter(exclusive)`, given up once `cancelled` is set (None then): a turn that stepped
        aside, or a timed step between its phases (`aka.evaluation.phased_turn`), that is ended
        meanwhile (its step killed at a request's hard end) must not wait out another evaluation's
        timed step first."""
        mode = fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH
        while not cancelled.is_set():
            turnstile = _open(self.turnstile)
            try:
                try:
                    fcntl.flock(turnstile, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    cancelled.wait(RETRY_S)
                    continue
                fd = _open(self.lock)
                while not cancelled.is_set():
                    try:
                        fcntl.flock(fd, mode | fcntl.LOCK_NB)
                        return fd
                    except BlockingIOError:
                        cancelled.wait(RETRY_S)
                os.close(fd)
            finally:
                os.close(turnstile)
        return None

    def someone_waits(self) -> bool:
        """Is a holder waiting at the turnstile? Seen by a shared holder, that is a timed step
        (a shared one passes straight through while the lock is shared)."""
        fd = _open(self.turnstile)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return False
        except BlockingIOError:
            return True
        finally:
            os.close(fd)


class Turn:
    """A step's turn on the device: how long it waited for it, and what stopping it for a while
    did (`SharedTurn`; other turns are never stopped). An `aka.process.PauseClock`."""

    def __init__(self, waited: float) -> None:
        self.waited = waited
        self.pauses = 0

    @contextlib.contextmanager
    def pausable(self, pid: int) -> Iterator[None]:
        """The process `pid` and its descendants may be stopped while the block runs."""
        yield

    def close(self) -> None:
        """Let the device go (a turn that holds a lock descriptor of its own)."""

    def paused_s(self) -> float:
        return 0.0

    def pausing(self) -> bool:
        return False

    def ran_aside(self) -> str | None:
        """Why a process stopped for a timed step ran meanwhile (`SharedTurn`), or None."""
        return None


class SharedTurn(Turn):
    """A shared turn that steps aside for a timed step that waited `YIELD_AFTER_S` (module doc)."""

    def __init__(self, lock: DeviceLock, fd: int, waited: float, yield_after: float) -> None:
        super().__init__(waited)
        self._lock, self._fd = lock, fd
        self._guard = threading.Lock()
        self._roots: dict[int, int | None] = {}  # pid -> its pidfd (a reused pid is never signalled)
        self._paused, self._since = 0.0, 0.0
        self._pausing = False
        self._ran_aside: str | None = None
        self._done = threading.Event()
        self._yield_after = yield_after
        self._watcher = threading.Thread(target=self._watch, name="aka-device-turn", daemon=True)
        self._watcher.start()

    @contextlib.contextmanager
    def pausable(self, pid: int) -> Iterator[None]:
        try:
            pidfd: int | None = os.pidfd_open(pid)
        except (AttributeError, OSError):  # gone already, or no pidfds here
            pidfd = None
        with self._guard:
            self._roots[pid] = pidfd
        try:
            yield
        finally:
            with self._guard:
                del self._roots[pid]
                if pidfd is not None:
                    os.close(pidfd)

    def paused_s(self) -> float:
        with self._guard:
            return self._paused + (time.monotonic() - self._since if self._pausing else 0.0)

    def pausing(self) -> bool:
        return self._pausing

    def close(self) -> None:
        self._done.set()
        self._watcher.join()
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def _watch(self) -> None:
        waiting_since: float | None = None
        while not self._done.wait(WATCH_S):
            if not self._lock.someone_waits():
                waiting_since = None
                continue
            now = time.monotonic()
            waiting_since = now if waiting_since is None else waiting_since
            if now - waiting_since >= self._yield_after and self._roots:
                self._step_aside()
                waiting_since = None

    def ran_aside(self) -> str | None:
        return self._ran_aside

    def _step_aside(self) -> None:
        with self._guard:
            self._pausing, self._since = True, time.monotonic()
            stop = stop_trees(self._roots)
        try:
            time.sleep(DRAIN_S)
            # the device goes only once every thread stands stopped: a process that does not
            # (helpers that continue each other) is killed first, never left beside the timed step
            still = Stillness.take(stop.seen)
            escaped = still.escaped()
            if escaped is not None:
                self._kill(stop.seen, escaped)
            os.close(self._fd)
            self._fd = -1
            fd = self._enter_watching(still, stop.seen)
            self._fd = -1 if fd is None else fd
            moved = still.lenient()  # one that moved in the last watch's interval
            if moved is not None:
                self._kill(stop.seen, moved)
        finally:
            continue_processes(stop.signalled)
            with self._guard:
                self._paused += time.monotonic() - self._since
                self._pausing = False
                self.pauses += 1

    def _enter_watching(self, still: Stillness, pids: Sequence[int]) -> int | None:
        """The lock again, once the timed step is done; meanwhile a stopped process that moves
        (continued by candidate code: a timer's SIGCONT, a helper that escaped the stop) is
        killed within `MOVE_WATCH_S` instead of running beside the timed step to its end."""
        entered = threading.Event()

        def watch() -> None:
            while not entered.wait(MOVE_WATCH_S):
                moved = still.moved_so_far()
                if moved is not None:
                    self._kill(pids, moved)
                    return

        watcher = threading.Thread(target=watch, name="aka-device-turn-watch", daemon=True)
        watcher.start()
        try:
            return self._lock.enter_unless(self._done)
        finally:
            entered.set()
            watcher.join()

    def _kill(self, pids: Sequence[int], why: str) -> None:
        """Record why (the step is `tampering`: `ran_aside`), then SIGKILL `pids` and whatever
        the trees under this turn's roots hold now."""
        with self._guard:
            if self._ran_aside is None:
                self._ran_aside = f"stopped for another evaluation's timed step, its {why}"
            roots = dict(self._roots)
        table = process_table()
        for pid in dict.fromkeys([*pids, *(p for root in roots if root in table for p in tree(root, table))]):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)


@contextlib.contextmanager
def device_turn(device: DeviceInfo, exclusive: bool) -> Iterator[Turn]:
    """A step's turn on `device`: its `DeviceLock` on a GPU, none on the CPU. A shared turn on a
    GPU steps aside for a timed step that waits (`SharedTurn`)."""
    if not device.is_gpu:
        yield Turn(0.0)
        return
    lock = DeviceLock.for_device(device)
    if exclusive:
        with lock.hold(exclusive=True) as waited:
            yield Turn(waited)
        return
    yield_after, started = yield_after_s(), time.monotonic()
    turn = SharedTurn(lock, lock.enter(exclusive=False), time.monotonic() - started, yield_after)
    try:
        yield turn
    finally:
        turn.close()


def run_sharing_device(
    device: DeviceInfo, argv: Sequence[str], cwd: Path, env: Mapping[str, str], timeout: float
) -> subprocess.CompletedProcess[str]:
    """`subprocess.run` (text, output captured) of a command that runs task code on `device`
    outside an evaluation step (the validator's probe, held-out generation): it holds the device
    shared, so it never runs beside a timed step, and is stopped for one that waits
    (`SharedTurn`). Unlocked, such GPU work slowed other tasks' timed turns under
    `aka validate --parallel` (A/A readings of 0.70x and 6.5x on the H200). Raises
    `subprocess.TimeoutExpired` after `timeout` seconds (the time it stood stopped not counted),
    its process group killed."""
    with device_turn(device, exclusive=False) as turn:
        proc = subprocess.Popen(
            list(argv),
            cwd=cwd,
            env=dict(env),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        try:
            with turn.pausable(proc.pid):
                deadline = time.monotonic() + timeout
                while True:
                    try:
                        stdout, stderr = proc.communicate(
                            timeout=max(0.0, min(1.0, deadline + turn.paused_s() - time.monotonic()))
                        )
                        return subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr)
                    except subprocess.TimeoutExpired as exc:
                        if time.monotonic() < deadline + turn.paused_s():
                            continue
                        raise subprocess.TimeoutExpired(proc.args, timeout, exc.output, exc.stderr) from None
        except BaseException:  # its timeout, SIGTERM's SystemExit, Ctrl-C: its own session would outlive the caller
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            raise
