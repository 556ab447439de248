"""Running one shell command in its own process group, with a timeout that kills the whole group."""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

KILL_GRACE_SECONDS = 5.0
TAIL_CHARS = 2000


@dataclass(frozen=True)
class CommandOutcome:
    command: str
    exit_code: int | None
    timed_out: bool
    seconds: float
    output_tail: str

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not self.timed_out

    def describe(self) -> str:
        """One line for error messages: how it ended, plus the last meaningful output line."""
        if self.timed_out:
            head = f"`{self.command}` timed out after {self.seconds:.0f} s and was killed"
        elif self.exit_code is not None and self.exit_code < 0:
            head = f"`{self.command}` was killed by signal {-self.exit_code}"
        else:
            head = f"`{self.command}` exited with status {self.exit_code}"
        lines = [line.strip() for line in self.output_tail.splitlines() if line.strip()]
        return f"{head}: {lines[-1]}" if lines else head


def _kill_group(pgid: int) -> None:
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(pgid, sig)
        except ProcessLookupError:
            return
        if sig == signal.SIGTERM:
            time.sleep(0.2)


def run_command(command: str | list[str], cwd: Path, env: dict[str, str], timeout: float, log_path: Path,
                stdin: bytes | None = None, pass_fds: tuple[int, ...] = (), prefix: tuple[str, ...] = (),
                preexec: Callable[[], None] | None = None) -> CommandOutcome:
    """Run `command` (a bash line, or an argv list run directly) in `cwd`; output goes to `log_path`.

    The command gets a new session, so on timeout, and after it exits, any process it left behind
    in its group is killed: a step can never outlive its budget. `stdin` is fed through a pipe
    (no argv length limit); without it, standard input is closed. `prefix` wraps the command
    (e.g. a namespace sandbox), `pass_fds` are inherited, `preexec` runs in the child (limits).
    """
    log_path.parent.mkdir(parents=True, exist_ok=True)
    argv = [*prefix, *(["/bin/bash", "-c", command] if isinstance(command, str) else command)]
    shown = command if isinstance(command, str) else shlex.join(command)
    start = time.monotonic()
    with log_path.open("ab") as log:
        log.write(f"$ {shown}\n".encode())
        log.flush()
        offset = log.tell()
        proc = subprocess.Popen(
            argv, cwd=cwd, env=env, stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
            stdout=log, stderr=subprocess.STDOUT, start_new_session=True, pass_fds=pass_fds, preexec_fn=preexec,
        )
        timed_out = False
        try:
            proc.communicate(input=stdin, timeout=timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
            _kill_group(proc.pid)
            try:
                proc.wait(timeout=KILL_GRACE_SECONDS)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        else:
            _kill_group(proc.pid)
    seconds = time.monotonic() - start
    with log_path.open("rb") as log:
        log.seek(offset)
        tail = log.read()[-TAIL_CHARS:].decode("utf-8", errors="replace")
    return CommandOutcome(shown, None if timed_out else proc.returncode, timed_out, seconds, tail)
