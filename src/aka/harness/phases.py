"""The timed step's turn in phases: the device alone only while something is timed.

Only timed calls need the GPU alone. A side's set-up (its kernels' first calls, which load or
compile them, its inputs and references) only uses it, and on the H200 that set-up was a third
of the timed step's exclusive turn (docs/benchmarks/2026-12-04_session37_h200.md): time in which
no other evaluation could even check a candidate. So the evaluator starts the performance step
holding the device *shared* and passes a socket (`$AKA_TURN_FD`); the judge asks for the device
alone before it times anything and shares it again while it sets up the candidate
(`aka.harness.perf`), and the evaluator answers once it holds the lock that way
(`aka.evaluation.phased_turn.PhasedTurn`). The order that keeps the baseline's calibration out
of the candidate's reach is unchanged: the candidate's code is loaded only after it.

The socket is the judge's (no candidate code runs in this process): it is taken from the
environment at once and moved to a random close-on-exec descriptor, as the result channel is.
Without `$AKA_TURN_FD` (an older evaluator, a step run by hand, `judge_step`) the step is taken
to hold whatever it was given for its whole run, and `want` does nothing.
"""

from __future__ import annotations

import logging
import os
import socket
import time
from dataclasses import dataclass

from aka.evaluation.wire import ENV_TURN_FD, TURN_ALONE, TURN_GO, TURN_SHARED
from aka.harness import stall
from aka.harness.channel import hide
from aka.harness.task import HarnessError

log = logging.getLogger(__name__)

ALONE, SHARED = "alone", "shared"


@dataclass
class Phases:
    sock: socket.socket | None
    mode: str = SHARED
    broken: str | None = None  # the evaluator passed a socket this step cannot use

    @classmethod
    def claim(cls) -> Phases:
        """Never raises (it runs before the judge's error handling): a socket that cannot be used
        fails the step when it first asks for the device alone, so nothing is timed while shared."""
        raw = os.environ.pop(ENV_TURN_FD, None)
        if raw is None:
            return cls.none()
        try:
            return cls(socket.socket(fileno=hide(int(raw))))
        except (OSError, ValueError) as exc:
            return cls(None, SHARED, f"${ENV_TURN_FD}={raw!r}: {exc}")

    @classmethod
    def none(cls) -> Phases:
        """No evaluator to ask: the step holds what it was given throughout."""
        return cls(None, ALONE)

    @property
    def active(self) -> bool:
        """An evaluator to ask: set-up made apart while the device is shared is worth its cost."""
        return self.sock is not None

    def want(self, mode: str) -> None:
        """Hold the device `mode` (ALONE or SHARED) from now on; waits for the evaluator."""
        if self.broken is not None:
            raise HarnessError(f"the evaluator's turn socket cannot be used: {self.broken}")
        if self.sock is None or mode == self.mode:
            return
        started = time.perf_counter()
        try:
            self.sock.sendall(TURN_ALONE if mode == ALONE else TURN_SHARED)
            reply = self._line()
        except OSError as exc:
            reply = str(exc).encode()
        if reply != TURN_GO:
            raise HarnessError(f"the evaluator did not give the device {mode}: {reply!r}")
        self.mode = mode
        if mode == ALONE:  # every other evaluation on this device waits while it is ours
            stall.hold()
        else:
            stall.release()
        log.info("the device came %s after %.3f s", mode, time.perf_counter() - started)

    def _line(self) -> bytes:
        data = b""
        while not data.endswith(b"\n"):
            chunk = self.sock.recv(1) if self.sock is not None else b""
            if not chunk:
                break
            data += chunk
        return data

    def close(self) -> None:
        stall.release()
        if self.sock is not None:
            self.sock.close()
            self.sock = None
