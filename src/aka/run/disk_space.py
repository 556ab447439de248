"""A full disk stops the run; it is never a candidate's failure nor a result.

When the disk holding the run fills, every later write fails: a step's build or cache write
would charge the candidate a compile error, and the evaluator's own records could not be written
anyway. So the run stops with one line, keeps every result already written (each is written
whole, `aka.results.task_result.write_text_atomic`), and resumes once space is freed.
"""

from __future__ import annotations

import errno
import shutil
from pathlib import Path

from aka.errors import AkaError
from aka.run.layout import EVALUATION_DIR
from aka.trees import remove_tree

# Below this much free space a failed evaluation is not believed: its steps could not write.
MIN_FREE_BYTES = 64 * 2**20
DISK_FULL_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT})


class DiskFullError(AkaError):
    """The disk holding the run is full: the run stops, resumable."""


def disk_full(path: Path, detail: str = "") -> DiskFullError:
    where = f" ({detail})" if detail else ""
    return DiskFullError(
        f"{path}: no space left on its disk{where}; the run stopped and keeps every result "
        "written so far: free space, then resume with `aka run CONFIG --resume-latest`"
    )


def is_disk_full(exc: BaseException) -> bool:
    return isinstance(exc, OSError) and exc.errno in DISK_FULL_ERRNOS


def low_on_space(path: Path) -> bool:
    """Whether the disk holding `path` has less than `MIN_FREE_BYTES` free (unknown: no)."""
    try:
        return shutil.disk_usage(path).free < MIN_FREE_BYTES
    except OSError:
        return False


def full_after_evaluation(workspace: Path) -> bool:
    """Whether the disk is still low once the workspace's evaluation folders are removed (they are
    rebuilt from the pristine task for every evaluation, so nothing is lost): files a candidate
    left there must not turn its own failure into one the run refuses to record."""
    if not low_on_space(workspace):
        return False
    for folder in workspace.glob(f"{EVALUATION_DIR}*"):
        if folder.is_dir() and not folder.is_symlink():
            remove_tree(folder)
    return low_on_space(workspace)
