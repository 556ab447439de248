"""How much a step may write: a candidate that fills the disk would break the evaluator's own
writes (its result becomes an infrastructure error a trainer drops, a way out of a bad score) and
every other evaluation on the machine. Each file it writes is capped (RLIMIT_FSIZE, in the
sandbox), and this caps what the step's writable folders grow by, checked while it runs."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from aka.trees import tree_usage

STEP_DISK_QUOTA_BYTES = 4 * 2**30  # far beyond builds and caches; one step's files, not the machine's
STEP_FILE_BYTES = 2**30  # one file a step writes (RLIMIT_FSIZE: its log too); a build's largest is far less
# What a step may print (its log): a judge prints a few lines a case, a worker's prints go to the
# same log; past it the step is killed (a crash: a candidate that floods its output, 2 GB in one
# trial, filled the disk with logs and took the evaluator's memory).
STEP_OUTPUT_LIMIT_BYTES = 64 * 2**20


def disk_usage(path: Path) -> int:
    """Bytes the files under `path` take on disk, however deep or long-named (`aka.trees`)."""
    return tree_usage(path)


class DiskQuota:
    """Called while a step runs (`aka.process.StartedCommand.finish`): the reason to stop it once
    its writable folders grew by more than `limit` bytes since it started, else None."""

    def __init__(self, paths: Sequence[Path], limit: int | None = None) -> None:
        self.paths = list(dict.fromkeys(paths))
        self.limit = STEP_DISK_QUOTA_BYTES if limit is None else limit
        self.start = sum(disk_usage(p) for p in self.paths)

    def __call__(self) -> str | None:
        grown = sum(disk_usage(p) for p in self.paths) - self.start
        if grown <= self.limit:
            return None
        return (
            f"its writable folders grew by {grown / 2**30:.2f} GiB, over the {self.limit / 2**30:.2f} GiB a "
            "step may write (filling the disk breaks the evaluation, not the candidate's score)"
        )
