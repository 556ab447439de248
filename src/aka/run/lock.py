"""One process per run directory. Two `aka run` processes on the same run (two resumes at once)
both ran every unfinished task and overwrote each other's reports; the second is now refused.

The lock is an advisory `flock` (through filelock) held for the whole run: the kernel drops it
when the process dies, however it dies, so a crashed run never leaves a stale lock behind. Who
holds it is written beside it, for the refusal's message.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path

from filelock import FileLock, Timeout

from aka.errors import ConfigError
from aka.results.task_result import write_text_atomic

LOCK_NAME = ".aka-run.lock"
OWNER_NAME = ".aka-run.owner"


@contextlib.contextmanager
def holding_run(run_dir: Path) -> Iterator[None]:
    """Hold `run_dir` for this process, or raise `ConfigError` naming the process that holds it."""
    lock = FileLock(run_dir / LOCK_NAME)
    try:
        lock.acquire(timeout=0)
    except Timeout:
        raise ConfigError(
            f"{run_dir}: another aka process ({_owner(run_dir)}) is running this run; wait for it to "
            "finish or stop it, then resume"
        ) from None
    try:
        owner = {
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "since": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        }
        write_text_atomic(run_dir / OWNER_NAME, json.dumps(owner))
        yield
    finally:
        lock.release()


def _owner(run_dir: Path) -> str:
    try:
        owner = json.loads((run_dir / OWNER_NAME).read_text(encoding="utf-8"))
        return f"pid {owner['pid']} on {owner['host']}, since {owner['since']}"
    except (OSError, ValueError, KeyError, TypeError):
        return "its owner not recorded yet"
