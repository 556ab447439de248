"""Which phase a trial is in (baseline, agent, compile, correctness, performance, held-out, export),
told to whoever listens, without a reporter passed through every call on the way down.

The task pipeline and the step orchestration announce phases; a run (or `aka task check`) listens
for the block it runs with `phases_to`. A phase entered with `phase()` holds: the steps run inside
it (the baseline's measurement, an agent that evaluates its own candidates, the held-out cases)
do not announce themselves, so the phase shown is the one the trial is in. Nothing listens by
default, and a listener is per thread (a context variable), so parallel evaluations never mix.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from enum import Enum


class Phase(str, Enum):
    BASELINE = "baseline"
    AGENT = "agent"
    COMPILE = "compile"
    CORRECTNESS = "correctness"
    PERFORMANCE = "performance"
    HELDOUT = "held-out"
    EXPORT = "export"


STEP_PHASES = {p.value: p for p in (Phase.COMPILE, Phase.CORRECTNESS, Phase.PERFORMANCE)}
PhaseListener = Callable[[Phase], None]
_listener: ContextVar[PhaseListener | None] = ContextVar("aka_phase_listener", default=None)
_holding: ContextVar[bool] = ContextVar("aka_phase_holding", default=False)


@contextlib.contextmanager
def phases_to(listener: PhaseListener) -> Iterator[None]:
    """Send the phases announced in this block to `listener`."""
    token = _listener.set(listener)
    held = _holding.set(False)
    try:
        yield
    finally:
        _holding.reset(held)
        _listener.reset(token)


@contextlib.contextmanager
def phase(name: Phase) -> Iterator[None]:
    """Announce `name` for the block; the steps run inside it stay quiet."""
    _announce(name)
    token = _holding.set(True)
    try:
        yield
    finally:
        _holding.reset(token)


def step_started(name: str) -> None:
    """An evaluation step starts (`compile`, `correctness`, `performance`): announced unless an
    enclosing `phase()` holds."""
    if name in STEP_PHASES:
        _announce(STEP_PHASES[name])


def _announce(name: Phase) -> None:
    listener = _listener.get()
    if listener is not None and not _holding.get():
        listener(name)
