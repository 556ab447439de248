"""A ceiling on the processes and threads of one step: a pids cgroup of its own.

A candidate that forks without end (`while True: os.fork()`, by malice or by a policy's accident)
took the machine's process IDs (32,768 on many hosts) until its step timed out: every other
evaluation, the judge's own threads and the trainer beside it then failed to start anything, and
their candidates were charged with a crash that was not theirs. RLIMIT_NPROC does not bind root,
which steps run as. Each step (and everything it starts: its workers, compilers, threads) is
placed in a group of its own with `pids.max` = `STEP_TASKS_MAX` before any of its code runs: the
step's first process joins it itself (`ResourceLimits.apply`, on both the exec'd and the warm
path), so nothing it forks can be outside. Past the ceiling `fork` and thread creation fail with
EAGAIN inside the step alone.

Works with cgroup v1's pids hierarchy and with cgroup v2 where this process's group may enable
the pids controller for its children (a container's root, a delegated systemd scope); probed
once. Elsewhere steps run without it (a warning; results lack the `pids-limit` feature).
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import time
import uuid
from pathlib import Path

log = logging.getLogger(__name__)

STEP_TASKS_MAX = 2048
"""Tasks (processes and threads) one step may hold at once: a torch step on a 128-core host holds
a few hundred threads; a fork bomb stops here instead of at the machine's `pid_max`."""
PIDS_FEATURE = "pids-limit"
REMOVE_TRIES = 50


def _mounts() -> list[tuple[str, str, str]]:
    """(mount point, root inside the hierarchy, kind) of every cgroup mount: kind `pids` for v1's
    pids hierarchy, `v2` for the unified one."""
    found = []
    try:
        lines = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return []
    for line in lines:
        before, sep, after = line.partition(" - ")
        fields, tail = before.split(), after.split()
        if not sep or len(fields) < 5 or len(tail) < 3:
            continue
        kind, super_options = tail[0], tail[2].split(",")
        if kind == "cgroup" and "pids" in super_options:
            found.append((fields[4], fields[3], "pids"))
        elif kind == "cgroup2":
            found.append((fields[4], fields[3], "v2"))
    return found


def _own_groups() -> dict[str, str]:
    """This process's group per hierarchy: `pids` (v1) and `v2` (the unified one, `0::`)."""
    groups = {}
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            number, controllers, path = line.split(":", 2)
            if number == "0" and controllers == "":
                groups["v2"] = path
            elif "pids" in controllers.split(","):
                groups["pids"] = path
    return groups


def _folder(mount: str, root: str, group: str) -> Path:
    relative = os.path.relpath(group, root) if group.startswith(root) else group
    return Path(mount, relative.lstrip("/").removeprefix("."))


def _candidates() -> list[Path]:
    """Where this process's own group is, v1's pids hierarchy first."""
    groups, places = _own_groups(), []
    for kind in ("pids", "v2"):
        for mount, root, mount_kind in _mounts():
            if mount_kind == kind and kind in groups:
                places.append(_folder(mount, root, groups[kind]))
    return places


def _usable(folder: Path) -> bool:
    """Whether step groups can be made in `folder` and hold a pids ceiling (v2: the controller
    enabled for its children, which fails in a group that holds processes but the root)."""
    if not (folder / "cgroup.procs").is_file():
        return False
    subtree = folder / "cgroup.subtree_control"
    if subtree.is_file() and "pids" not in subtree.read_text().split():
        with contextlib.suppress(OSError):
            subtree.write_text("+pids")
    probe = folder / f"aka-probe-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    try:
        probe.mkdir()
    except OSError:
        return False
    try:
        (probe / "pids.max").write_text("1")
        return True
    except OSError:
        return False
    finally:
        with contextlib.suppress(OSError):
            probe.rmdir()


@functools.cache
def groups_folder() -> Path | None:
    """Where step groups are made here, probed once; None (with a warning) where none can be, or
    with AKA_NO_SANDBOX=1."""
    if os.environ.get("AKA_NO_SANDBOX") == "1":
        return None
    for folder in _candidates():
        try:
            if _usable(folder):
                return folder
        except OSError:
            continue
    log.warning(
        "steps run without a ceiling on their processes (no pids cgroup can be made here): a "
        "candidate that forks without end can take the machine's process IDs until its step's timeout"
    )
    return None


def new_group(limit: int | None = None) -> Path | None:
    """A fresh group holding at most `limit` (default `STEP_TASKS_MAX`) tasks, for one step; None
    where groups cannot be made."""
    folder = groups_folder()
    if folder is None:
        return None
    group = folder / f"aka-step-{os.getpid()}-{uuid.uuid4().hex[:12]}"
    try:
        group.mkdir()
        (group / "pids.max").write_text(str(limit or STEP_TASKS_MAX))
    except OSError as exc:
        log.warning("no pids ceiling for this step: %s", exc)
        remove_group(group)
        return None
    return group


def join_group(group: str) -> None:
    """Put the calling process in `group` (in the step's first process, before anything runs):
    what it starts from then on is in it too. Raises where it cannot: the step fails closed."""
    with open(os.path.join(group, "cgroup.procs"), "w") as procs:
        procs.write("0")


def remove_group(group: Path) -> None:
    """Remove a step's group once its processes are gone (a namespace's end takes a moment to reap
    them; whatever still runs in it is killed first)."""
    for _ in range(REMOVE_TRIES):
        try:
            group.rmdir()
            return
        except FileNotFoundError:
            return
        except OSError:
            with contextlib.suppress(OSError, ValueError):
                for pid in (group / "cgroup.procs").read_text().split():
                    with contextlib.suppress(OSError):
                        os.kill(int(pid), 9)
            time.sleep(0.02)
    log.warning("could not remove the step's pids group %s", group)
