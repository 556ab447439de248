"""A full disk stops the run; it is never a candidate's failure nor a result.

When the disk holding the run fills, every later write fails: a step's build or cache write
would charge the candidate a compile error, and the evaluator's own records could not be written
anyway. So the run stops with one line, keeps every result already written (each is written
whole, `aka.results.task_result.write_text_atomic`), and resumes once space is freed.

What an agent or a candidate filled the disk with goes first, so that it cannot turn its own
failure into one the run refuses to record on every resume: the evaluation folders (rebuilt for
every evaluation) and, once the agent's step is over, everything in its workspace the judge does
not read (its scratch files and CLI home; its copy of the task and its declared sources stay).
"""

from __future__ import annotations

import errno
import logging
import os
import shutil
from collections.abc import Iterable
from pathlib import Path

from aka.errors import AkaError
from aka.run.layout import AGENT_HOME_DIR, AGENT_WORK_DIR, EVALUATION_DIR
from aka.trees import remove_tree, tree_usage

logger = logging.getLogger(__name__)

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


def full_after_evaluation(workspace: Path, kept: Iterable[str]) -> bool:
    """Whether the disk is still low once the workspace's evaluation folders (rebuilt from the
    pristine task for every evaluation, so nothing is lost) and the agent's scratch (`kept`: see
    `free_agent_scratch`) are removed."""
    if not low_on_space(workspace):
        return False
    for folder in workspace.glob(f"{EVALUATION_DIR}*"):
        if folder.is_dir() and not folder.is_symlink():
            remove_tree(folder)
    free_agent_scratch(workspace, kept)
    return low_on_space(workspace)


def free_agent_scratch(workspace: Path, kept: Iterable[str]) -> int:
    """Remove what the agent left in `workspace` that the judge never reads: its CLI home, and every
    file or folder under `work/` that is not on the way to a path in `kept` (the task's files and
    the declared sources, relative to `work/`). Only once its step is over. Returns the bytes freed."""
    keep = {Path(rel).parts for rel in kept}
    on_the_way = {parts[:depth] for parts in keep for depth in range(1, len(parts))}
    doomed = [workspace / AGENT_HOME_DIR]
    pending: list[tuple[str, ...]] = [()]
    while pending:  # as deep as the kept paths go, no deeper
        parts = pending.pop()
        try:
            names = os.listdir(workspace / AGENT_WORK_DIR / Path(*parts))
        except OSError:
            continue
        for name in names:
            entry = (*parts, name)
            path = workspace / AGENT_WORK_DIR / Path(*entry)
            if entry in on_the_way and path.is_dir() and not path.is_symlink():
                pending.append(entry)
            elif entry not in keep:
                doomed.append(path)
    freed = sum(tree_usage(path) for path in doomed)
    for path in doomed:
        remove_tree(path)
    if freed:
        logger.warning("the disk is low: removed %.1f MiB of agent scratch in %s", freed / 2**20, workspace)
    return freed
