"""The evaluation directory: the pristine task with only the declared sources of the candidate, so
nothing else an agent wrote (a rewritten harness, a planted module) is ever run by the evaluator."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

from aka.config.tasks import IGNORED_NAMES, Task
from aka.evaluation.wire import BASELINE_SOURCES_DIR, HELDOUT_FILE
from aka.trees import UnusableFileError, read_agent_file, remove_tree


def build_eval_dir(task: Task, dest: Path, candidate_dir: Path | None, heldout: bool = False) -> list[str]:
    """Copy the pristine task to `dest`, then only the declared sources from `candidate_dir`.
    The task's held-out cases only for a held-out evaluation (`heldout`): the evaluation folder is
    the step's own, and a candidate read them there and put them in its failure message, which
    an agent or a trainer's policy reads (red team, session 48).

    The pristine editable files also go to `.aka_baseline/`, so a step can time the original
    next to the candidate in one process. Returns the editable files the candidate does not hand
    over usably, each with why (deleted; behind a link; not a plain file; too big: see
    `aka.trees.read_agent_file`); those keep no copy at all, so a deleted kernel fails instead of
    silently falling back to the original.
    """
    _clear_in_place(dest)
    left_out = (*IGNORED_NAMES, "*.pyc", *([] if heldout else [HELDOUT_FILE]))
    shutil.copytree(task.directory, dest, ignore=_top_level(task.directory, left_out), dirs_exist_ok=True)
    copy_original_sources(task, dest)
    unusable: list[str] = []
    if candidate_dir is not None:
        for rel in task.config.source_file_path:
            target = dest / rel
            try:
                data, why = read_agent_file(candidate_dir, rel), f"{rel}: missing"
            except UnusableFileError as exc:
                data, why = None, str(exc)
            if data is None:
                target.unlink(missing_ok=True)
                unusable.append(why)
            else:
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(data)
    return unusable


def _top_level(root: Path, names: tuple[str, ...]) -> Callable[[str, list[str]], set[str]]:
    """`shutil.ignore_patterns(*names)`, but the held-out file only at the task's top (a folder of
    the task may hold a module of that name it needs)."""
    everywhere = shutil.ignore_patterns(*(n for n in names if n != HELDOUT_FILE))

    def ignored(folder: str, entries: list[str]) -> set[str]:
        left = set(everywhere(folder, entries))
        if HELDOUT_FILE in names and Path(folder) == root:
            left |= {HELDOUT_FILE} & set(entries)
        return left

    return ignored


def copy_original_sources(task: Task, dest: Path) -> None:
    """The pristine editable files into `dest/.aka_baseline/`, where the performance step loads
    the baseline from (in the evaluation directory, and in the agent's workspace for self-checks)."""
    for rel in task.config.source_file_path:
        pristine = dest / BASELINE_SOURCES_DIR / rel
        pristine.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(task.directory / rel, pristine)


def _clear_in_place(directory: Path) -> None:
    """Empty `directory` but keep it (its inode): step processes started early have it as their cwd."""
    if not directory.is_dir() or directory.is_symlink():
        if directory.is_symlink() or directory.exists():
            directory.unlink()
        return
    for entry in directory.iterdir():
        if entry.is_dir() and not entry.is_symlink():
            remove_tree(entry, strict=True)
        else:
            entry.unlink()
