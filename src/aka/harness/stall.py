"""A judge that holds the device alone and stops making progress ends itself, with its stacks.

While a performance step holds the GPU alone, every other evaluation on that GPU waits for it
(`aka.evaluation.device_lock`). Every wait of the judge's own is bounded (a worker's request by
its timeout, a timed call's GPU work by `turns._wait`), so a judge that makes no progress for
longer is stuck in a wait nobody bounded. On an H100 (session 52) an unchanged candidate's
evaluation stopped making progress and three other tasks' evaluations waited with it for over
eight minutes; its log was lost, so where it stood is unknown. A judge stuck while it holds the
device alone leaves the GPU without an evaluation up to the step's timeout (900 s on most tasks).

So, while the device is the judge's alone (`hold`), `faulthandler`'s watchdog runs: each worker
request restarts it with its own timeout plus `MARGIN_S` (`expect`), each wait for a timed call's
GPU work likewise. If it fires, it writes every thread's stack into the step log and ends the
process (`_exit(1)`); its thread is C and needs no interpreter lock, so a judge stuck inside a
CUDA call that holds the lock still ends. A signal would not do: the judge is its PID
namespace's first process, which ignores a signal it has no handler for. The step fails like a
crash (as `StepExit.HARNESS_BUG`: a candidate must not turn a failure into an `infra_error` that
a trainer drops), and the device's lock goes at once. No candidate code runs in the judge.
"""

from __future__ import annotations

import faulthandler
import sys

MARGIN_S = 60.0  # far more than any unbounded stretch of an honest judge's work between requests

_held = False


def hold() -> None:
    """The device is the judge's alone from now on: the watchdog runs."""
    global _held
    _held = True
    _arm(MARGIN_S)


def release() -> None:
    """The device is shared again (or the step ends): no watchdog."""
    global _held
    if _held:
        faulthandler.cancel_dump_traceback_later()
        _held = False


def expect(seconds: float) -> None:
    """Something bounded by `seconds` starts now (a worker's request and its timeout)."""
    if _held:
        _arm(seconds + MARGIN_S)


def _arm(seconds: float) -> None:
    """Into the process's own standard error (the step log); never fails the step: a judge whose
    standard error is no file (one run inside pytest's capture) goes without."""
    stream = sys.__stderr__
    try:
        faulthandler.dump_traceback_later(seconds, exit=True, file=stream if stream is not None else sys.stderr)
    except (AttributeError, OSError, ValueError, RuntimeError):  # io.UnsupportedOperation is an OSError
        faulthandler.cancel_dump_traceback_later()
