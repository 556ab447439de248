"""A CLI's standard output, its JSON event stream, read as it arrives.

The stream goes through a pipe to a reader thread that keeps every byte in the transcript, parses
each line and feeds the turn counter. For a CLI without a turn limit of its own, the reader ends
the CLI's whole process group (SIGKILL) the moment the `turn_limit`-th model turn's tool calls have
all returned, which is when the CLI would ask the model again, or at once when a turn past the
limit shows up (a CLI that handed a still-running tool back to the model); whatever the killed
CLI had left in the pipe is still read and kept.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import select
import signal
import threading
from pathlib import Path

from aka.agents.cli_turns import JsonEvent, TurnCounter
from aka.evaluation.wire import valid_text

logger = logging.getLogger(__name__)

READ_BYTES = 1 << 16
POLL_SECONDS = 0.2


def parse_line(line: bytes) -> JsonEvent | None:
    """A JSON object, or None for anything else a CLI prints (banners, warnings)."""
    try:
        event = valid_text(json.loads(line))  # a lone surrogate would fail the run's JSON reports
    except (json.JSONDecodeError, UnicodeDecodeError, RecursionError):
        return None
    return event if isinstance(event, dict) else None


class EventStream:
    """Create it, start the CLI with `write_fd` as its standard output, then `watch(pgid)`."""

    def __init__(self, transcript: Path, counter: TurnCounter, turn_limit: int | None) -> None:
        self.transcript, self.counter, self.turn_limit = transcript, counter, turn_limit
        self.read_fd, self.write_fd = os.pipe()
        self.events: list[JsonEvent] = []
        self.stopped_at_limit = False
        self._pgid: int | None = None
        self._closing = threading.Event()
        self._thread = threading.Thread(target=self._read, name="aka-agent-stream", daemon=True)

    def watch(self, pgid: int) -> None:
        """The CLI has started (it holds the write end now): read its stream until it closes."""
        os.close(self.write_fd)
        self._pgid = pgid
        self._thread.start()

    def close(self, grace_seconds: float = 5.0) -> list[JsonEvent]:
        """Wait for the stream's end (every writer gone), at most `grace_seconds`: a process that
        escaped every kill may still hold the pipe, and may keep printing. Returns the events read."""
        self._thread.join(grace_seconds)
        self._closing.set()
        self._thread.join()
        os.close(self.read_fd)
        return self.events

    def abandon(self) -> None:
        """The CLI never started: close both ends."""
        os.close(self.write_fd)
        os.close(self.read_fd)

    def _read(self) -> None:
        pending = b""
        with self.transcript.open("wb") as out:
            while True:
                ready, _, _ = select.select([self.read_fd], [], [], POLL_SECONDS)
                if self._closing.is_set():  # even while a writer that escaped keeps printing
                    if ready:
                        out.write(os.read(self.read_fd, READ_BYTES))  # what was waiting is kept
                    break
                if not ready:
                    continue
                chunk = os.read(self.read_fd, READ_BYTES)
                if not chunk:
                    break
                out.write(chunk)
                out.flush()
                *lines, pending = (pending + chunk).split(b"\n")
                for line in lines:
                    self._event(line)
            if pending.strip():
                self._event(pending)

    def _event(self, line: bytes) -> None:
        event = parse_line(line)
        if event is None:
            return
        self.events.append(event)
        settled = self.counter.feed(event)
        limit, turns = self.turn_limit, self.counter.turns
        if (
            limit is not None
            and (turns > limit or (settled and turns >= limit))
            and not self.stopped_at_limit
            and self._pgid is not None
        ):
            self.stopped_at_limit = True
            logger.info("turn limit %d reached: ending the agent's process group %d", self.turn_limit, self._pgid)
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self._pgid, signal.SIGKILL)
