"""The timed step's turn in phases: shared while the judge sets a side up, exclusive while it times.

The judge (aka.harness.phases) asks over a socket of its own for the device alone before it
calibrates or times, and shared again while it sets up the candidate; this side takes the
device's lock that way (`aka.evaluation.device_lock`) and answers once it holds it. Between two
phases it holds nothing, so a timed step of another evaluation may take its turn; the judge has
stopped its candidate's worker by then (SIGSTOP, every process of its tree), as a shared turn
that steps aside stops its steps. The seconds spent waiting between phases extend the step's
limits, as a shared turn's stops do (`paused_s`); on the CPU there is no lock and every request
is granted at once.

Only the judge holds the other end of the socket (no candidate code runs in its process), so
what arrives here is the judge's; anything else than a request ends the phases (the judge then
fails its step as the harness's fault).
"""

from __future__ import annotations

import contextlib
import os
import socket
import threading
import time
from collections.abc import Iterator

from aka.device import DeviceInfo
from aka.evaluation.device_lock import DeviceLock, SharedTurn, Turn, yield_after_s
from aka.evaluation.wire import DRAIN_S, TURN_ALONE, TURN_GO, TURN_SHARED

ENV_PHASED_TURN = "AKA_PHASED_TURN"  # 0: timed steps hold the device alone for their whole turn
# The evaluator's notes after a phased turn (benchmarks/device_holds.py reads them).
PHASED_NOTE = "{} held the device alone {:.3f} s in {} phase(s), waited {:.3f} s between them"
# Each turn alone as `asked+waited+held` (Unix seconds, then seconds): where in time a GPU's timed
# steps waited for shared steps and held it, across every evaluation on that GPU.
TIMELINE_NOTE = "{} turns alone (asked+waited+held, Unix s): {}"


def phased_turns(on_gpu: bool) -> bool:
    """Whether the performance step's turn comes in phases: on a GPU unless `$AKA_PHASED_TURN=0`
    (on the H200 it raised throughput by a tenth with the A/A band unchanged:
    docs/benchmarks/2026-12-04_session38_h200.md); on the CPU, where no lock is held, only with
    `$AKA_PHASED_TURN=1` (tests)."""
    value = os.environ.get(ENV_PHASED_TURN, "").strip()
    return value == "1" or (on_gpu and value != "0")


class _Alone(Turn):
    """The device held exclusive through a lock descriptor of its own."""

    def __init__(self, fd: int) -> None:
        super().__init__(0.0)
        self._fd = fd

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


class PhasedTurn(Turn):
    """Starts shared (`waited` is that first wait); `alone_s` is how long it held the device
    alone, `phase_waits_s` how long it waited between phases, `phases` how many it was granted."""

    def __init__(self, device: DeviceInfo, sock: socket.socket) -> None:
        self._lock = DeviceLock.for_device(device) if device.is_gpu else None
        self._sock = sock
        self._guard = threading.Lock()
        self._done = threading.Event()
        self._pid: int | None = None
        self._stack = contextlib.ExitStack()
        self._stopped_before = 0.0  # stops of shared phases already over
        self._ran_aside: str | None = None  # what ran while a shared phase that is over stood aside
        self._waiting_since: float | None = None
        self._alone_since: float | None = None
        self.alone_s = 0.0
        self.phase_waits_s = 0.0
        self.phases = 1
        self.turns_alone: list[tuple[float, float, float]] = []  # (asked, waited, held): TIMELINE_NOTE
        self._asked_at = 0.0  # wall clock (comparable across processes) of the pending request
        started = time.monotonic()
        self._inner = self._take(exclusive=False)
        super().__init__(time.monotonic() - started)
        self._server = threading.Thread(target=self._serve, name="aka-phased-turn", daemon=True)
        self._server.start()

    def _take(self, exclusive: bool) -> Turn | None:
        if self._lock is None:
            return Turn(0.0)
        fd = self._lock.enter_unless(self._done, exclusive)
        if fd is None:
            return None
        return _Alone(fd) if exclusive else SharedTurn(self._lock, fd, 0.0, yield_after_s())

    @contextlib.contextmanager
    def pausable(self, pid: int) -> Iterator[None]:
        with self._guard:
            self._pid = pid
            if self._inner is not None:
                self._stack.enter_context(self._inner.pausable(pid))
        try:
            yield
        finally:
            with self._guard:
                self._pid = None
                self._stack.close()

    def paused_s(self) -> float:
        with self._guard:
            waiting = time.monotonic() - self._waiting_since if self._waiting_since is not None else 0.0
            inner = self._inner.paused_s() if self._inner is not None else 0.0
            return self._stopped_before + self.phase_waits_s + waiting + inner

    def pausing(self) -> bool:
        with self._guard:
            return self._waiting_since is not None or (self._inner is not None and self._inner.pausing())

    def ran_aside(self) -> str | None:
        with self._guard:
            inner = self._inner.ran_aside() if self._inner is not None else None
            return self._ran_aside or inner

    def alone(self) -> float:
        """Seconds it has held the device alone, the current phase included."""
        with self._guard:
            now = time.monotonic()
            return self.alone_s + (now - self._alone_since if self._alone_since is not None else 0.0)

    def _serve(self) -> None:
        while not self._done.is_set():
            request = self._read_line()
            if request not in (TURN_ALONE, TURN_SHARED) or not self._switch(request == TURN_ALONE):
                break
            try:
                self._sock.sendall(TURN_GO)
            except OSError:
                break
        with contextlib.suppress(OSError):
            self._sock.shutdown(socket.SHUT_RDWR)

    def _read_line(self) -> bytes:
        data = b""
        while not data.endswith(b"\n") and len(data) < 64:
            try:
                chunk = self._sock.recv(1)
            except OSError:
                return b""
            if not chunk:
                return b""
            data += chunk
        return data

    def _switch(self, exclusive: bool) -> bool:
        """Let the current phase's hold go, then take the device the asked way; False once ended."""
        with self._guard:
            old, self._inner = self._inner, None
            self._stack.close()
            now = time.monotonic()
            if old is not None:
                self._stopped_before += old.paused_s()
                self._ran_aside = self._ran_aside or old.ran_aside()
            self._end_alone(now)
            self._waiting_since = now
            self._asked_at = time.time()
        if old is not None:
            if isinstance(old, SharedTurn):
                time.sleep(DRAIN_S)  # what the judge's stopped candidate had queued finishes first
            old.close()
        taken = self._take(exclusive)
        with self._guard:
            now = time.monotonic()
            self.phase_waits_s += now - (self._waiting_since or now)
            self._waiting_since = None
            if taken is None:
                return False
            self._inner = taken
            self.phases += 1
            if exclusive:
                self._alone_since = now
                self.turns_alone.append((self._asked_at, time.time() - self._asked_at, 0.0))
            if self._pid is not None:
                self._stack.enter_context(taken.pausable(self._pid))
        return True

    def close(self) -> None:
        self._done.set()
        with contextlib.suppress(OSError):
            self._sock.shutdown(socket.SHUT_RDWR)
        self._server.join()
        self._sock.close()
        with self._guard:
            self._stack.close()
            inner, self._inner = self._inner, None
            self._end_alone(time.monotonic())
        if inner is not None:
            inner.close()

    def _end_alone(self, now: float) -> None:
        """Count a turn alone that ends now (called with the guard held)."""
        if self._alone_since is None:
            return
        held = now - self._alone_since
        self.alone_s += held
        self._alone_since = None
        asked, waited, _ = self.turns_alone[-1]
        self.turns_alone[-1] = (asked, waited, held)

    def timeline(self) -> str:
        """`turns_alone` as TIMELINE_NOTE writes them."""
        with self._guard:
            return " ".join(f"{asked:.3f}+{waited:.3f}+{held:.3f}" for asked, waited, held in self.turns_alone)


@contextlib.contextmanager
def phased_turn(device: DeviceInfo, sock: socket.socket) -> Iterator[PhasedTurn]:
    turn = PhasedTurn(device, sock)
    try:
        yield turn
    finally:
        turn.close()
