"""How much a step may write: a candidate that fills the disk would break the evaluator's own
writes (its result becomes an infrastructure error a trainer drops, a way out of a bad score) and
every other evaluation on the machine. Each file it writes is capped (RLIMIT_FSIZE, in the
sandbox), and this caps what the step's writable folders grow by, checked while it runs, with the
files its processes hold open that no folder names any more (unlinked, or made with O_TMPFILE: a
red team's candidate held 4.5 GiB so, out of every folder's count)."""

from __future__ import annotations

import os
import stat
from collections.abc import Sequence
from pathlib import Path

from aka.process import tree
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


def unlinked_usage(pids: Sequence[int], devices: set[int]) -> int:
    """Bytes on disk of the plain files that `pids` hold open and no folder names (no links left),
    on the file systems `devices` (the writable folders': a memfd or the step's own /dev/shm is
    memory, capped elsewhere), each file once. A process whose descriptors cannot be read (gone,
    or not ours to read) counts nothing."""
    seen: dict[tuple[int, int], int] = {}
    for pid in pids:
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                info = os.stat(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue
            if stat.S_ISREG(info.st_mode) and info.st_nlink == 0 and info.st_dev in devices:
                seen[(info.st_dev, info.st_ino)] = info.st_blocks * 512
    return sum(seen.values())


class DiskQuota:
    """Called while a step runs (`aka.process.StartedCommand.finish`): the reason to stop it once
    its writable folders, with the unlinked files the processes under `root` hold there, grew by
    more than `limit` bytes since it started, else None."""

    def __init__(self, paths: Sequence[Path], limit: int | None = None, root: int | None = None) -> None:
        self.paths = list(dict.fromkeys(paths))
        self.limit = STEP_DISK_QUOTA_BYTES if limit is None else limit
        self.root = root
        self.devices = {os.stat(p).st_dev for p in self.paths if p.exists()}
        self.start = sum(disk_usage(p) for p in self.paths)

    def __call__(self) -> str | None:
        grown = sum(disk_usage(p) for p in self.paths) - self.start
        if self.root is not None and grown <= self.limit:
            grown += unlinked_usage(tree(self.root), self.devices)
        if grown <= self.limit:
            return None
        return (
            f"its writable folders grew by {grown / 2**30:.2f} GiB (with the files its processes hold that no "
            f"folder names), over the {self.limit / 2**30:.2f} GiB a step may write (filling the disk breaks "
            "the evaluation, not the candidate's score)"
        )
