"""Model turns in a CLI's event stream, counted the same way for every CLI as the events arrive.

A CLI's JSON events do not say "model call N" in one common shape, so each CLI names the marks
its events carry (`Mark`). An event with no mark ends a run of model output. The counter then
knows two things: how many responses came (`turns`), and when a response's tool calls have all
returned, which is the moment the CLI asks the model again: where a turn limit the CLI lacks is
enforced.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

JsonEvent = dict[str, Any]


@dataclass(frozen=True)
class Mark:
    """What an event says about the model's turns.

    `model`: model output; with `key` (the response's id) a new key is a new response, without
    one a run of consecutive model output is one response. `call`: a tool call of the current
    response (`key`: the call's id). `step`: a tool call that is a turn of its own, for a CLI whose
    stream shows tool steps rather than responses (model output just before it belongs to it).
    `result`: the call `key` returned. `settle`: the CLI says the response's tools are done.
    A call or step whose id was seen before is not counted again; a result for a call that is
    not pending changes nothing.
    """

    kind: Literal["model", "call", "step", "result", "settle"]
    key: str | None = None


MarkEvent = Callable[[JsonEvent], Iterable[Mark]]


@dataclass
class TurnCounter:
    """Feed it every event in order; `feed` says when the latest turn's tools have all returned."""

    marks: MarkEvent
    turns: int = 0
    _response: str | None = None
    _in_output: bool = False
    _pending: set[str] = field(default_factory=set)
    _seen: set[str] = field(default_factory=set)
    _calls: int = 0

    def feed(self, event: JsonEvent) -> bool:
        settled = False
        marks = list(self.marks(event))
        for mark in marks:
            if mark.kind == "model":
                self._output(
                    new=(mark.key != self._response) if mark.key is not None else not self._in_output, key=mark.key
                )
            elif mark.kind in ("call", "step") and (mark.key is None or mark.key not in self._seen):
                new = not self._in_output or (mark.kind == "step" and self._calls > 0)
                self._output(new, self._response if not new else None)
                call = mark.key or f"call-{self.turns}-{self._calls}"
                self._seen.add(call)
                self._pending.add(call)
                self._calls += 1
            elif mark.kind == "result":
                self._in_output = False
                if mark.key in self._pending:
                    self._pending.discard(mark.key)
                    settled = not self._pending
            elif mark.kind == "settle":
                self._in_output = False
                settled = True
        if not marks:
            self._in_output = False
        return settled

    def _output(self, new: bool, key: str | None) -> None:
        if new:
            self.turns += 1
            self._pending.clear()
            self._calls = 0
            self._response = key
        elif key is not None:
            self._response = key
        self._in_output = True
