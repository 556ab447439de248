"""Folders and files a candidate wrote: measured, read and removed whatever their shape.

A candidate controls the trees under its writable folders. `shutil.rmtree` and `os.walk` recurse
in Python (3.11: a chain of 1,500 folders raised RecursionError in the evaluator, an
`infra_error` that drops the reward, and left its files on disk) and build full path strings
(past 4,096 bytes `os.walk` silently skipped everything below: a disk quota that read 0.06 MiB
for 201 MiB). Here every step is one `openat` from a single open folder (`..` to go back up), no
path string grows with depth, nothing recurses, and a folder its owner made unreadable is made
readable again (the judge runs as the same user as its workers).

A file an agent left for the judge is read the same way: every folder on its path opened without
following a link (checking only the last component let a linked parent folder lead the judge
elsewhere), only a plain file, and no more than a limit (a 1 TiB sparse `kernel.py` read whole
raised MemoryError in the judge: an `infra_error`, where an unusable source is the agent's fault).
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import secrets
import stat
from pathlib import Path

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC  # a FIFO must not block the open

SOURCE_LIMIT_BYTES = 16 * 2**20
"""The most a declared source may hold: kernels take kilobytes, and the judge reads sources whole."""


class UnusableFileError(Exception):
    """A file an agent left that the judge will not read: behind a link, not a plain file, unreadable
    or too big. The message says which, for the failure the agent is shown."""


def read_agent_file(root: Path, rel: str, limit: int = SOURCE_LIMIT_BYTES) -> bytes | None:
    """The bytes of `root/rel`, or None where it (or a folder on its way) does not exist.

    Raises UnusableFileError where `root`, a folder on the way or the file itself is a link, the
    file is not a plain file or cannot be opened, or it holds more than `limit` bytes."""
    *folders, name = Path(rel).parts
    try:
        fd = _open_dir(root)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise UnusableFileError(f"{rel}: its folder {_why(exc, root)}") from exc
    try:
        for folder in folders:
            try:
                child = _open_dir(folder, fd)
            except FileNotFoundError:
                return None
            except OSError as exc:
                raise UnusableFileError(f"{rel}: {folder} {_why(exc, folder, fd)}") from exc
            os.close(fd)
            fd = child
        try:
            handle = os.open(name, _FILE_FLAGS, dir_fd=fd)
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise UnusableFileError(f"{rel}: {_why(exc)}") from exc
        info = os.fstat(handle)
        if not stat.S_ISREG(info.st_mode):
            os.close(handle)
            raise UnusableFileError(f"{rel}: not a plain file")
        with os.fdopen(handle, "rb") as file:
            data = file.read(limit + 1) if info.st_size <= limit else b""
            if info.st_size > limit or len(data) > limit:
                raise UnusableFileError(f"{rel}: {max(info.st_size, len(data))} bytes, more than the {limit} allowed")
            return data
    finally:
        os.close(fd)


def _why(exc: OSError, name: str | Path = "", dir_fd: int | None = None) -> str:
    """In words, why an entry did not open (a link opened as a folder reads "not a folder")."""
    with contextlib.suppress(OSError):
        if name and stat.S_ISLNK(os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode):
            return "is a symbolic link"
    if exc.errno == errno.ELOOP:
        return "is a symbolic link"
    if exc.errno == errno.ENOTDIR:
        return "is not a folder"
    return f"cannot be opened ({exc.strerror})"


def agent_file_digest(root: Path, rel: str) -> str | None:
    """sha256 of an agent's file as `read_agent_file` reads it; an unusable one is named by why."""
    try:
        data = read_agent_file(root, rel)
    except UnusableFileError as exc:
        return f"unusable: {exc}"
    return None if data is None else hashlib.sha256(data).hexdigest()


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
    """Bytes the files and folders under `path` take on disk, or `path`'s own where it is not a
    folder (links not followed; what vanishes while it is read is skipped)."""
    try:
        fd = _open_dir(path)
    except OSError:
        with contextlib.suppress(OSError):
            info = os.lstat(path)
            if not stat.S_ISDIR(info.st_mode):
                return info.st_blocks * 512
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
