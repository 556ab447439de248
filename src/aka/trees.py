"""Folders a candidate wrote: measured and removed whatever their shape.

A candidate controls the trees under its writable folders. `shutil.rmtree` and `os.walk` recurse
in Python (3.11: a chain of 1,500 folders raised RecursionError in the evaluator, an
`infra_error` that drops the reward, and left its files on disk) and build full path strings
(past 4,096 bytes `os.walk` silently skipped everything below: a disk quota that read 0.06 MiB
for 201 MiB). Here every step is one `openat` from a single open folder (`..` to go back up), no
path string grows with depth, nothing recurses, and a folder its owner made unreadable is made
readable again (the judge runs as the same user as its workers).
"""

from __future__ import annotations

import contextlib
import os
import secrets
import stat
from pathlib import Path

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def _open_dir(name: str | Path, dir_fd: int | None = None) -> int:
    """A folder opened without following a link; one its owner closed (mode 000) is opened up."""
    try:
        return os.open(name, _DIR_FLAGS, dir_fd=dir_fd)
    except PermissionError:
        handle = os.open(name, os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dir_fd)
        try:
            os.chmod(f"/proc/self/fd/{handle}", 0o700)
        finally:
            os.close(handle)
        return os.open(name, _DIR_FLAGS, dir_fd=dir_fd)


def _entries(fd: int) -> list[tuple[str, bool, int]]:
    """(name, is a folder, bytes on disk) of each entry of the open folder; vanished ones left out."""
    found = []
    with os.scandir(fd) as listing:
        for entry in listing:
            with contextlib.suppress(OSError):
                info = os.stat(entry.name, dir_fd=fd, follow_symlinks=False)
                found.append((entry.name, stat.S_ISDIR(info.st_mode), info.st_blocks * 512))
    return found


def tree_usage(path: Path) -> int:
    """Bytes the files and folders under `path` take on disk (links not followed; what vanishes
    while it is read is skipped)."""
    try:
        fd = _open_dir(path)
    except OSError:
        return 0
    total = 0
    pending: list[list[str]] = []  # per level entered: the folders in it still to visit

    def enter() -> None:
        nonlocal total
        try:
            entries = _entries(fd)
        except OSError:
            entries = []
        total += sum(size for _, _, size in entries)
        pending.append([name for name, is_dir, _ in entries if is_dir])

    try:
        enter()
        while pending:
            if not pending[-1]:  # this level is done: back up
                pending.pop()
                if pending:
                    parent = os.open("..", _DIR_FLAGS, dir_fd=fd)
                    os.close(fd)
                    fd = parent
                continue
            try:
                child = _open_dir(pending[-1].pop(), fd)
            except OSError:
                continue
            os.close(fd)
            fd = child
            enter()
    except OSError:
        pass
    finally:
        with contextlib.suppress(OSError):
            os.close(fd)
    return total


def remove_tree(path: Path, strict: bool = False) -> bool:
    """Remove `path` and everything under it; False if anything stays (`strict`: OSError then).

    Each folder is emptied in turn: its files unlinked, its subfolders renamed up to the top
    folder (a rename within the file system, by folder handles), so no more than two folders are
    ever open and the depth of the tree never matters."""
    if not _remove(path):
        if strict:
            raise OSError(f"cannot remove everything under {path}")
        return False
    return True


def _remove(path: Path) -> bool:
    try:
        if not stat.S_ISDIR(os.lstat(path).st_mode):
            os.unlink(path)
            return True
    except FileNotFoundError:
        return True
    except OSError:
        return False
    prefix = f".aka-removing-{secrets.token_hex(6)}-"
    moved = 0
    try:
        top = _open_dir(path)
    except OSError:
        return not os.path.lexists(path)
    try:
        with contextlib.suppress(OSError):
            os.fchmod(top, 0o700)
        pending: list[str | None] = [None]  # None: the top folder itself
        while pending:
            name = pending.pop()
            try:
                fd = top if name is None else _open_dir(name, top)
            except OSError:
                continue
            try:
                with contextlib.suppress(OSError):
                    os.fchmod(fd, 0o700)  # its owner may have taken the right to unlink in it
                for entry, is_dir, _ in _entries(fd):
                    with contextlib.suppress(OSError):
                        if not is_dir:
                            os.unlink(entry, dir_fd=fd)
                        elif name is None:
                            pending.append(entry)
                        else:
                            moved += 1
                            os.rename(entry, f"{prefix}{moved}", src_dir_fd=fd, dst_dir_fd=top)
                            pending.append(f"{prefix}{moved}")
            except OSError:
                pass
            finally:
                if fd != top:
                    os.close(fd)
            if name is not None:
                with contextlib.suppress(OSError):
                    os.rmdir(name, dir_fd=top)
    finally:
        os.close(top)
    with contextlib.suppress(OSError):
        os.rmdir(path)
    return not os.path.lexists(path)
