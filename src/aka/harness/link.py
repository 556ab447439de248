"""The wire between the judge and a worker: one UNIX socket pair, one message per packet.

The judge sends pickled requests (it is the trusted side, so a worker may unpickle what it
gets); a worker answers in JSON only, which the judge parses as data and checks field by field
(`Reply`): nothing a worker sends can run code in the judge, and a malformed, oversized or
non-finite answer is the worker's fault (`ProtocolError`, judged as tampering). File descriptors
(the CPU's shared memory) travel with a request, never towards the judge. A receive may spin for
a while before it blocks: waking a blocked process costs far more than a short timed call.
"""

from __future__ import annotations

import array
import json
import math
import os
import pickle
import select
import socket
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from aka.evaluation.wire import valid_text

MAX_MESSAGE = 1 << 20
MAX_FDS = 32  # a CPU arena's memfds, one per GiB (aka.harness.shared), within a CPU step's 16 GiB


class LinkClosed(Exception):
    """The other end is gone (the worker died, or was killed)."""


class LinkTimeout(Exception):
    """No message within the deadline."""


class WorkerFailure(Exception):
    """A worker that died, hung or broke the protocol; `kind` is the failure kind it earns, `side`
    whose worker it was (`candidate`, `baseline` or `reference`)."""

    def __init__(self, kind: str, message: str, side: str = "candidate") -> None:
        super().__init__(message)
        self.kind = kind
        self.side = side


class ProtocolError(WorkerFailure):
    """A worker's answer that no honest worker sends (tampering)."""

    def __init__(self, message: str, side: str = "candidate") -> None:
        super().__init__("tampering", message, side)


class Link:
    """One end of the socket pair."""

    def __init__(self, sock: socket.socket, spin_s: float = 0.0) -> None:
        self.sock = sock
        self.spin_s = spin_s
        sock.setblocking(False)

    @classmethod
    def pair(cls, spin_s: float = 0.0) -> tuple[Link, socket.socket]:
        """The judge's end, and the socket the worker inherits."""
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        theirs.set_inheritable(True)
        return cls(ours, spin_s), theirs

    def send_bytes(self, data: bytes, fds: Sequence[int] = ()) -> None:
        if len(data) > MAX_MESSAGE:
            raise ValueError(f"message of {len(data)} bytes is over {MAX_MESSAGE}")
        ancillary = [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))] if fds else []
        while True:
            try:
                self.sock.sendmsg([data], ancillary)
                return
            except BlockingIOError:
                select.select([], [self.sock], [], 1.0)
            except (BrokenPipeError, ConnectionResetError) as exc:
                raise LinkClosed(str(exc)) from exc

    def receive_bytes(self, timeout: float | None) -> tuple[bytes, list[int]]:
        """The next message and the descriptors that came with it."""
        started = time.perf_counter()
        deadline = None if timeout is None else started + timeout
        while True:
            try:
                data, ancillary, flags, _ = self.sock.recvmsg(MAX_MESSAGE + 1, socket.CMSG_SPACE(MAX_FDS * 4))
            except BlockingIOError:
                now = time.perf_counter()
                if now - started < self.spin_s and (deadline is None or now < deadline):
                    continue
                wait = None if deadline is None else max(0.0, deadline - now)
                if not select.select([self.sock], [], [], wait)[0]:
                    raise LinkTimeout(f"no message within {timeout:.1f} s") from None
                continue
            except ConnectionResetError as exc:
                raise LinkClosed(str(exc)) from exc
            fds = _descriptors(ancillary)
            if not data and not fds:
                raise LinkClosed("the other end closed the link")
            if flags & socket.MSG_TRUNC or len(data) > MAX_MESSAGE:
                _close_all(fds)
                raise ProtocolError(f"a message over {MAX_MESSAGE} bytes")
            return data, fds

    def send(self, request: dict[str, Any], fds: Sequence[int] = ()) -> None:
        """Judge to worker."""
        self.send_bytes(pickle.dumps(request, protocol=pickle.HIGHEST_PROTOCOL), fds)

    def receive_request(self) -> tuple[dict[str, Any], list[int]]:
        """Worker side: the judge's next request."""
        data, fds = self.receive_bytes(None)
        request = pickle.loads(data)
        if not isinstance(request, dict):
            raise ProtocolError("a request is a dict")
        return request, fds

    def answer(self, reply: dict[str, Any]) -> None:
        """Worker to judge: JSON, finite numbers only."""
        self.send_bytes(json.dumps(reply, allow_nan=False).encode())

    def receive_reply(self, timeout: float | None, side: str = "candidate") -> Reply:
        """Judge side: a worker's answer, parsed as data only (an answer without a boolean `ok`
        is no answer)."""
        try:
            data, fds = self.receive_bytes(timeout)
        except ProtocolError as exc:
            raise ProtocolError(f"the {side}'s worker broke the protocol: {exc}", side) from None
        _close_all(fds)
        if fds:
            raise ProtocolError(f"the {side}'s worker sent file descriptors", side)
        try:
            value = json.loads(data, parse_constant=_reject_constant)
        except (UnicodeDecodeError, json.JSONDecodeError, ValueError, RecursionError) as exc:
            raise ProtocolError(  # RecursionError: JSON nested deeper than the parser goes
                f"the {side}'s worker answered with something that is not JSON: {exc!r}"[:300], side
            ) from None
        if not isinstance(value, dict):
            raise ProtocolError(f"the {side}'s worker's answer is not an object", side)
        reply = Reply(valid_text(value), side)
        reply.boolean("ok")
        return reply

    def close(self) -> None:
        self.sock.close()


def _reject_constant(name: str) -> None:
    raise ValueError(f"{name} is not a number a worker may send")


def _descriptors(ancillary: list[tuple[int, int, bytes]]) -> list[int]:
    fds: list[int] = []
    for level, kind, data in ancillary:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            received = array.array("i")
            received.frombytes(data[: len(data) - len(data) % received.itemsize])
            fds.extend(received)
    return fds


def _close_all(fds: list[int]) -> None:
    for fd in fds:
        os.close(fd)


@dataclass(frozen=True)
class Reply:
    """A worker's answer; every accessor checks the type (and numbers: finite) or raises
    `ProtocolError`."""

    raw: dict[str, Any]
    side: str = "candidate"

    def _broken(self, what: str) -> ProtocolError:
        return ProtocolError(f"the {self.side}'s worker broke the protocol: {what}", self.side)

    @property
    def ok(self) -> bool:
        return self.boolean("ok")

    def boolean(self, key: str, default: bool | None = None) -> bool:
        value = self.raw.get(key, default)
        if not isinstance(value, bool):
            raise self._broken(f"'{key}' is not a boolean")
        return value

    def number(self, key: str) -> float:
        value = self.raw.get(key)
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
            raise self._broken(f"'{key}' is not a finite number: {value!r}"[:200])
        return float(value)

    def text(self, key: str, limit: int = 2000) -> str | None:
        value = self.raw.get(key)
        if value is None:
            return None
        if not isinstance(value, str):
            raise self._broken(f"'{key}' is not a string")
        return value[:limit]

    def texts(self, key: str, limit: int = 64) -> list[str]:
        value = self.raw.get(key, [])
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value) or len(value) > limit:
            raise self._broken(f"'{key}' is not a list of at most {limit} strings")
        return [v[:500] for v in value]

    def records(self, key: str, limit: int = 64) -> list[dict[str, Any]]:
        value = self.raw.get(key, [])
        if not isinstance(value, list) or len(value) > limit or not all(isinstance(v, dict) for v in value):
            raise self._broken(f"'{key}' is not a list of at most {limit} objects")
        return value
