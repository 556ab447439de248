"""The result channel: a pipe and a one-time token, claimed before any candidate code runs.

The evaluator passes the pipe's write end as `$AKA_RESULT_FD` and the token as the first line of
standard input. `claim()` removes the variable, reads the token, closes standard input and moves
the pipe to a random close-on-exec descriptor, so a candidate imported later finds neither a path
to write to nor the token to sign with; the evaluator rejects any message without the token, and
more than one message. Before reading the token it writes `ready` on the pipe: the harness is
loaded, so an evaluator that started this step early (while earlier steps ran) knows the harness
was read before any candidate code ran. Without `$AKA_RESULT_FD` (an author running a step by
hand) the report goes to standard output instead.
"""

from __future__ import annotations

import fcntl
import json
import os
import secrets
import sys
from dataclasses import dataclass

from aka.evaluation.wire import ENV_RESULT_FD, READY_LINE

_HIDDEN_FD_RANGE = (300, 1000)


def hide(fd: int) -> int:
    """Move an inherited descriptor of the evaluator's to a random close-on-exec number: code
    started later neither inherits it nor finds it at the number the environment named."""
    low, high = _HIDDEN_FD_RANGE
    hidden = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, low + secrets.randbelow(high - low))
    os.close(fd)
    return hidden


@dataclass
class ReportChannel:
    fd: int | None
    token: str | None

    @classmethod
    def claim(cls) -> ReportChannel:
        raw = os.environ.pop(ENV_RESULT_FD, None)
        if raw is None:
            return cls(None, None)
        os.write(int(raw), READY_LINE)  # loaded; an evaluator that started us early now sends the token
        token = sys.stdin.readline().strip()
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)
        os.close(devnull)
        return cls(hide(int(raw)), token)

    def send(self, report: dict[str, object]) -> None:
        """Send the one report; the channel is closed afterwards."""
        if self.fd is None:
            sys.stdout.write(json.dumps(report, indent=2, allow_nan=False) + "\n")
            sys.stdout.flush()
            return
        data = (json.dumps({"token": self.token, "report": report}, allow_nan=False) + "\n").encode()
        view = memoryview(data)
        while view:
            view = view[os.write(self.fd, view) :]
        os.close(self.fd)
        self.fd = None
