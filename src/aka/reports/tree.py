"""A folder of reports replaced all at once, so a reader (or a run killed while writing them)
never sees the summary of one version of the run beside the breakdown of another.

The new files are written into a hidden staging folder next to the target, which then trades
places with the target in one `renameat2(RENAME_EXCHANGE)` (Linux; elsewhere two renames, with a
moment in which the target is missing but never mixed). Entries of the old folder that the
writer does not own (`aka compare`'s output, a user's notes) move into the new one, and the old
one is removed. A staging folder left by a process killed half-way is cleaned up by the next
write, after its unowned entries are moved back.
"""

from __future__ import annotations

import ctypes
import os
import secrets
import shutil
from collections.abc import Mapping
from pathlib import Path

AT_FDCWD = -100
RENAME_EXCHANGE = 2


def replace_tree(target: Path, files: Mapping[str, str]) -> None:
    """Make `target` hold exactly `files` (relative path -> text) plus the entries it held that no
    path of `files` starts with."""
    target.parent.mkdir(parents=True, exist_ok=True)
    owned = {Path(rel).parts[0] for rel in files}
    _recover(target, owned)
    staging = _new_staging(target)
    for rel, text in files.items():
        path = staging / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
    if not target.exists():
        os.rename(staging, target)
        return
    if not _exchange(staging, target):
        old = staging.with_name(staging.name.replace(".new-", ".old-", 1))
        os.rename(target, old)
        os.rename(staging, target)
        staging = old
    _move_unowned(staging, target, owned)
    shutil.rmtree(staging, ignore_errors=True)


def _new_staging(target: Path) -> Path:
    """A new staging folder made as `mkdir` makes one (0777 less the umask), not `mkdtemp`'s 0700:
    it becomes the reports folder, which the run's group may read when the umask lets it."""
    while True:
        staging = target.parent / f".{target.name}.new-{secrets.token_hex(6)}"
        try:
            staging.mkdir()
            return staging
        except FileExistsError:
            continue


def _exchange(first: Path, second: Path) -> bool:
    try:
        renameat2 = ctypes.CDLL(None, use_errno=True).renameat2
    except AttributeError:
        return False
    return bool(renameat2(AT_FDCWD, os.fsencode(first), AT_FDCWD, os.fsencode(second), RENAME_EXCHANGE) == 0)


def _move_unowned(source: Path, target: Path, owned: set[str]) -> None:
    for entry in source.iterdir():
        if entry.name not in owned and not (target / entry.name).exists():
            os.rename(entry, target / entry.name)


def _recover(target: Path, owned: set[str]) -> None:
    olds = sorted(target.parent.glob(f".{target.name}.old-*"))
    if not target.exists() and olds:  # killed between the two renames of the fallback: the old tree back
        os.rename(olds.pop(), target)
    for leftover in sorted(target.parent.glob(f".{target.name}.new-*")) + olds:
        if target.exists():
            _move_unowned(leftover, target, owned)
        shutil.rmtree(leftover, ignore_errors=True)
