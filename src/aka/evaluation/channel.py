"""A step's private result channel: a pipe whose write end only the step command inherits
(`$AKA_RESULT_FD`), drained by a thread, bounded in size. The one-time token that signs the
report goes to the command on its standard input (`aka.evaluation.step_process`)."""

from __future__ import annotations

import os
import threading

from aka.evaluation.wire import READY_LINE

CHANNEL_LIMIT_BYTES = 16 * 1024 * 1024


class ResultPipe:
    """`ready` is set once the harness says it has loaded (aka.harness writes `ready` before it
    reads its token) or the command is gone."""

    def __init__(self) -> None:
        read_fd, self.write_fd = os.pipe()
        self.chunks: list[bytes] = []
        self.ready = threading.Event()
        self._reader = threading.Thread(target=self._drain, args=(read_fd,), daemon=True)
        self._reader.start()

    def _drain(self, fd: int) -> None:
        total = 0
        with os.fdopen(fd, "rb", buffering=0) as pipe:
            while chunk := pipe.read(65536):
                total += len(chunk)
                if total <= CHANNEL_LIMIT_BYTES:
                    self.chunks.append(chunk)
                if b"".join(self.chunks[:2]).startswith(READY_LINE):
                    self.ready.set()
        self.ready.set()

    def payload(self, wait: float = 30) -> bytes:
        """Everything sent after the `ready` line (the report), once the pipe is closed."""
        self._reader.join(timeout=wait)
        data = b"".join(self.chunks)
        return data[len(READY_LINE) :] if data.startswith(READY_LINE) else data
