"""Read-only file system for a step command, except the paths it must write, and no way to the kernel's
raw interfaces.

    python3 -m aka.evaluation.confine [--host-dev] [--keep-admin] --writable PATH [--writable PATH ...]
        [--mask-file FILE] [--view-file FILE] [--hide DIR ...] -- CMD ARGS...

Why: a step process imports and runs untrusted candidate code. Without this, that code could
write wherever the evaluator's user can: the pristine task directory, the aka sources,
site-packages (e.g. patch torch's timing on disk) or the run's frozen baseline builds, and so
poison every LATER evaluation. The evaluator runs this as root of the `unshare` sandbox
(aka.evaluation.sandbox); it

1. moves into a private mount namespace of its own, so it can never change the caller's mounts;
2. bind-mounts each existing writable PATH onto itself (a read-write mount of its own); given a
   `--view-file` (one path a line), covers every folder at the root outside `SYSTEM_FOLDERS`
   (home folders, /tmp, /work, /mnt, ...), /var/tmp and, inside the system's folders, the
   application folders of the writable paths, the masked files and aka (`platform_folders`:
   /opt/app, /var/lib/aka) with an empty tmpfs holding only those paths and the writable ones
   (`_narrow`): other tasks and runs, held-out cases wherever they
   were copied, git objects, caches and lock files are not there (red team, session 48); then
   /dev/null over each path listed in `--mask-file` (one a line) that is a Unix socket or a plain
   file: the machine's bound sockets (`bound_sockets`, read outside the step's network namespace;
   in a file, not the command line, which every `ps` shows), and the task suite's held-out cases
   (a candidate read them and put them in the message its evaluation returns: red team, session
   48). A read-only mount does not stop `connect`, and a socket file reaches its service from
   any network namespace: a Docker or container runtime's socket would give the candidate the
   host. An empty read-only tmpfs goes over each `--hide` folder that holds no writable path: the
   machine's device locks (a candidate that took a GPU's lock file with `flock`, which a
   read-only descriptor allows, stalled every timed step on that GPU: red team, session 48);
3. replaces /dev with a private one (a read-only tmpfs) holding only the character devices a
   step needs: null, zero, full, random, urandom, tty and the accelerators' nodes (nvidia*, as
   NVIDIA's container toolkit passes them; dri and kfd for ROCm), plus a private /dev/shm. No
   disk, memory or port device is reachable, and the host's /dev cannot be changed. With
   `--host-dev` (the evaluator's fallback where the accelerator fails behind a private /dev)
   the host's /dev stays, as before;
4. remounts every other mount read-only ("/" included; failing there exits 126: fail closed),
   except /proc and /dev, /sys included; in the step's own /proc, the kernel's tunables
   (/proc/sys, /proc/sysrq-trigger, /proc/irq, /proc/bus, /proc/fs) are bound read-only (where
   that fails, with a warning, like any mount other than "/");
5. drops every capability outside Docker's default set, and CAP_MKNOD too, from the bounding,
   inheritable, permitted and effective sets (mount, kernel modules, raw I/O, ptrace, ...), so
   not even root regains them on exec, and sets no_new_privs (setuid binaries gain nothing);
6. execs the command.

Where the evaluator is real root (no user namespace), candidate code is root here: steps 3-5 are
what keeps it off the host's disks, sysctls and devices.

Standard library only (no torch: it runs before every step). The evaluator starts it as
`python3 -I -S .../aka/evaluation/confine.py`, so nothing in the working directory or in `PYTHON*`
variables can shadow the modules it imports while it still holds every capability.
"""

from __future__ import annotations

import ctypes
import os
import stat
import sys
from collections.abc import Sequence
from typing import NamedTuple

MS_RDONLY = 1
MS_NOSUID = 2
MS_NODEV = 4
MS_NOEXEC = 8
MS_REMOUNT = 32
MS_BIND = 4096
MS_REC = 16384
MS_PRIVATE = 1 << 18
CLONE_NEWNS = 0x00020000
O_PATH = 0o10000000
PR_CAPBSET_DROP = 24
PR_SET_NO_NEW_PRIVS = 38
PR_CAP_AMBIENT = 47
PR_CAP_AMBIENT_CLEAR_ALL = 4
# Docker's default set (chown, dac_override, fowner, fsetid, kill, setgid, setuid, setpcap,
# net_bind_service, net_raw, sys_chroot, audit_write, setfcap) without mknod: all that is kept.
KEPT_CAPABILITIES = frozenset((0, 1, 3, 4, 5, 6, 7, 8, 10, 13, 18, 29, 31))
CAP_SYS_ADMIN = 21
_LAST_CAPABILITY_FALLBACK = 40
_CAPABILITY_VERSION_3 = 0x20080522
DEVICE_NODES = ("null", "zero", "full", "random", "urandom", "tty")
ACCELERATOR_NODES = ("nvidia*", "dri", "kfd")
PROC_READ_ONLY = ("/proc/sys", "/proc/sysrq-trigger", "/proc/irq", "/proc/bus", "/proc/fs")
DEV_LINKS = (
    ("fd", "/proc/self/fd"),
    ("stdin", "/proc/self/fd/0"),
    ("stdout", "/proc/self/fd/1"),
    ("stderr", "/proc/self/fd/2"),
)
# Per-mount flags a remount must repeat (in a user namespace they are locked: leaving one out is EPERM).
_KEPT_FLAGS = {b"nosuid": MS_NOSUID, b"nodev": MS_NODEV, b"noexec": MS_NOEXEC}
KERNEL_TREES = ("/proc", "/dev")  # handled on their own (/sys is remounted read-only like the rest)
# The folders at the root a narrowed step still sees whole: the system's programs, libraries and
# settings (FHS), the kernel's trees. Everything else at the root (home folders, /tmp, /work, /mnt,
# /srv, ...) holds only what the step is shown (`--view-file`); /var/tmp is emptied too.
SYSTEM_FOLDERS = frozenset(
    ("usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32", "etc", "opt", "var", "run", "proc", "sys", "dev")
    + ("nix", "gnu", "snap")
)
NARROWED_INSIDE = ("/var/tmp",)
# In a system folder, folders that many programs share (FHS): an application's own is one further
# down (/var/lib/aka, /usr/local/aka, /opt/app).
SHARED_SYSTEM_FOLDERS = frozenset(("lib", "lib32", "lib64", "local", "share", "cache", "opt", "spool", "src", "www"))
_OWN_SOURCES = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # aka's src/
EXIT_NOT_CONFINED = 126
USAGE = (
    "usage: python3 -m aka.evaluation.confine [--host-dev] [--keep-admin] [--writable PATH]... [--mask-file FILE] "
    "[--view-file FILE] [--hide DIR]... "
    "-- CMD ARGS..."
)
ENV_GPU_UUID = "AKA_GPU_UUID"  # the step's GPU (`GPU-...`), set by the evaluator: its /dev keeps only that one
MAX_MASKED_SOCKETS = 4096  # a step's masks travel in its argv or the warm parent's request
# The accelerator's own services, which CUDA may connect to like it opens /dev/nvidia*: never masked.
ACCELERATOR_SOCKET_FOLDERS = ("/tmp/nvidia-mps", "/run/nvidia-persistenced", "/var/run/nvidia-persistenced")

_libc = ctypes.CDLL(None, use_errno=True)
_libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p]
_libc.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]


class ConfineError(Exception):
    """A mount or capability call failed; the message names it and the error."""


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]


def _check(result: int, what: str) -> None:
    if result != 0:
        errno = ctypes.get_errno()
        raise ConfineError(f"{what}: {os.strerror(errno)} (errno {errno})")


def _mount(source: str | None, target: str, flags: int, fstype: str | None = None, data: str | None = None) -> None:
    _check(
        _libc.mount(
            os.fsencode(source) if source else None,
            os.fsencode(target),
            fstype.encode() if fstype else None,
            flags,
            data.encode() if data else None,
        ),
        f"mount {target}",
    )


def parse_mountinfo(info: bytes) -> list[tuple[str, int]]:
    """Every mount point of a /proc/PID/mountinfo text (octal escapes such as `\\040` undone), with
    the per-mount flags a remount must keep."""
    found: list[tuple[str, int]] = []
    for line in info.splitlines():
        fields = line.split()
        if len(fields) < 6:
            continue
        head, *escaped = fields[4].split(b"\\")  # a backslash is escaped too (\134)
        point = os.fsdecode(head + b"".join(bytes([int(e[:3], 8)]) + e[3:] for e in escaped))
        options = fields[5].split(b",")
        found.append((point, sum(flag for name, flag in _KEPT_FLAGS.items() if name in options)))
    return found


def inside(path: str, tree: str) -> bool:
    """Whether `path` is `tree` or lies under it (by name: neither is resolved)."""
    return path == tree or path.startswith(tree.rstrip("/") + "/")


def _last_capability() -> int:
    try:
        with open("/proc/sys/kernel/cap_last_cap") as text:
            return int(text.read())
    except (OSError, ValueError):
        return _LAST_CAPABILITY_FALLBACK


def dropped_capabilities(keep_admin: bool = False) -> list[int]:
    """Every capability this kernel knows, except Docker's defaults (less mknod); with
    `keep_admin`, CAP_SYS_ADMIN stays too (see `confine`)."""
    kept = KEPT_CAPABILITIES | ({CAP_SYS_ADMIN} if keep_admin else set())
    return [c for c in range(_last_capability() + 1) if c not in kept]


def _drop_capabilities(keep_admin: bool = False) -> None:
    dropped = dropped_capabilities(keep_admin)
    for capability in dropped:
        _check(_libc.prctl(PR_CAPBSET_DROP, capability, 0, 0, 0), f"drop capability {capability}")
    _libc.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)  # absent before Linux 4.3: nothing to clear
    header, data = _CapHeader(_CAPABILITY_VERSION_3, 0), (_CapData * 2)()
    _check(_libc.capget(ctypes.byref(header), data), "capget")
    for word in range(2):
        mask = ~sum(1 << (c - 32 * word) for c in dropped if c // 32 == word) & 0xFFFFFFFF
        data[word].effective &= mask
        data[word].permitted &= mask
        data[word].inheritable &= mask
    _check(_libc.capset(ctypes.byref(header), data), "capset")
    _check(_libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "set no_new_privs")


def gpu_minor(uuid: str, driver_folder: str = "/proc/driver/nvidia/gpus") -> int | None:
    """The minor number (`/dev/nvidiaN`) of the NVIDIA GPU with `uuid` (`GPU-...`), from the
    driver's own table; None where it does not say (no table, a MIG instance's UUID)."""
    try:
        buses = os.listdir(driver_folder)
    except OSError:
        return None
    for bus in buses:
        try:
            with open(os.path.join(driver_folder, bus, "information")) as text:
                fields = dict(line.split(":", 1) for line in text.read().splitlines() if ":" in line)
        except (OSError, ValueError):
            continue
        if fields.get("GPU UUID", "").strip() == uuid:
            try:
                return int(fields.get("Device Minor", ""))
            except ValueError:
                return None
    return None


def device_nodes(gpu_uuid: str | None = None, dev: str = "/dev", gpus: str = "/proc/driver/nvidia/gpus") -> list[str]:
    """Names under the host's /dev that a private /dev keeps: the plain character devices and the
    accelerators'. Given the step's GPU (`gpu_uuid`, whose minor the driver names), of the NVIDIA
    GPUs' own nodes (`nvidiaN`) only its own, as NVIDIA's container toolkit passes one GPU: the
    others' stay out of reach of code that would unset `CUDA_VISIBLE_DEVICES` and run on them
    beside other evaluations' timed steps. Every GPU's where the driver does not say."""
    import glob  # only here: the module stays quick to start

    names = [n for n in DEVICE_NODES if os.path.exists(f"{dev}/{n}")]
    for pattern in ACCELERATOR_NODES:
        names += sorted(os.path.basename(p) for p in glob.glob(f"{dev}/{pattern}"))
    minor = gpu_minor(gpu_uuid, gpus) if gpu_uuid else None
    if minor is not None:
        names = [n for n in names if not (n.startswith("nvidia") and n[6:].isdigit()) or _minor(dev, n) == minor]
    return [n for n in names if not os.path.islink(f"{dev}/{n}")]


def _minor(dev: str, name: str) -> int:
    """A GPU node's minor number: its device number's (a container may name a node otherwise),
    else its name's."""
    try:
        found = os.stat(f"{dev}/{name}")
    except OSError:
        return -1
    return os.minor(found.st_rdev) if stat.S_ISCHR(found.st_mode) else int(name[6:])


def _private_dev(gpu_uuid: str | None) -> None:
    """A read-only tmpfs over /dev with only `device_nodes(gpu_uuid)` (bound from the host's) and its own /dev/shm."""
    kept = {name: os.open(f"/dev/{name}", O_PATH | os.O_NOFOLLOW) for name in device_nodes(gpu_uuid)}
    try:
        _mount("tmpfs", "/dev", MS_NOSUID | MS_NOEXEC, "tmpfs", "mode=0755,size=64k")
        for name, fd in kept.items():
            target = f"/dev/{name}"
            if os.path.isdir(f"/proc/self/fd/{fd}"):
                os.mkdir(target)
            else:
                os.close(os.open(target, os.O_CREAT | os.O_WRONLY, 0o600))
            _mount(f"/proc/self/fd/{fd}", target, MS_BIND | MS_REC)
    finally:
        for fd in kept.values():
            os.close(fd)
    for name, to in DEV_LINKS:
        os.symlink(to, f"/dev/{name}")
    os.mkdir("/dev/shm")
    _mount("tmpfs", "/dev/shm", MS_NOSUID | MS_NODEV, "tmpfs", "mode=1777")
    _mount(None, "/dev", MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NOEXEC)


def bound_sockets(table: str = "/proc/net/unix") -> list[str]:
    """The file system paths of the Unix sockets bound in the caller's network namespace (the
    machine's services: a runtime's, a cluster's, a desktop's), absolute and outside the
    accelerator's own folders. Read before a step's network namespace is made: inside it the table
    lists only the step's."""
    folders = (*ACCELERATOR_SOCKET_FOLDERS, os.environ.get("CUDA_MPS_PIPE_DIRECTORY") or "/tmp/nvidia-mps")
    try:
        with open(table, "rb") as rows:
            lines = rows.read().splitlines()[1:]
    except OSError:
        return []
    found: dict[str, None] = {}
    for line in lines:
        fields = line.split(maxsplit=7)  # Num RefCount Protocol Flags Type St Inode Path
        if len(fields) == 8 and fields[7].startswith(b"/"):
            path = os.fsdecode(fields[7])
            if not any(inside(path, folder) for folder in folders):
                found[path] = None
    return list(found)[:MAX_MASKED_SOCKETS]


def _mask(paths: Sequence[str]) -> list[str]:
    """/dev/null bound over each of `paths` that is a Unix socket here (`connect` to it is then
    refused) or a plain file (the suite's held-out cases: read, it is empty); returns warnings for
    those that stay."""
    warnings = []
    null = os.open("/dev/null", O_PATH)
    try:
        for path in paths:
            try:
                mode = os.lstat(path).st_mode
                if not (stat.S_ISSOCK(mode) or stat.S_ISREG(mode)):
                    continue
                _mount(f"/proc/self/fd/{null}", path, MS_BIND)
            except (OSError, ConfineError) as exc:
                if not isinstance(exc, FileNotFoundError):
                    warnings.append(f"aka.evaluation.confine: warning: {path} stays reachable: {exc}")
    finally:
        os.close(null)
    return warnings


def _hide(folders: Sequence[str], keep: Sequence[str]) -> list[str]:
    """An empty read-only tmpfs over each of `folders` that is a folder and holds none of `keep`
    (the writable paths, already bound); returns warnings for those left visible."""
    warnings = []
    for folder in folders:
        path = os.path.realpath(folder)
        if not os.path.isdir(path):
            continue
        if path == "/" or any(inside(kept, path) for kept in keep):
            warnings.append(f"aka.evaluation.confine: warning: {path} stays visible: it holds a writable path")
            continue
        try:
            _mount("tmpfs", path, MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, "tmpfs", "mode=0555,size=4k")
        except ConfineError as exc:
            warnings.append(f"aka.evaluation.confine: warning: {path} stays visible: {exc}")
    return warnings


def narrowed_folders(root: str = "/") -> list[str]:
    """The folders a narrowed step sees only its view of: every folder at `root` outside
    `SYSTEM_FOLDERS` (links left as they are: they lead into one of these or into the system's),
    and `NARROWED_INSIDE`."""
    found = []
    for name in sorted(os.listdir(root)):
        path = os.path.join(root, name)
        if name not in SYSTEM_FOLDERS and os.path.isdir(path) and not os.path.islink(path):
            found.append(path)
    return found + [p for p in NARROWED_INSIDE if os.path.isdir(p) and not os.path.islink(p)]


def application_folder(path: str) -> str | None:
    """The folder of the application that `path` (absolute, resolved) belongs to where it lies in a
    system folder a narrowed step otherwise sees whole: `/opt/app` for `/opt/app/runs/x`,
    `/var/lib/aka` for `/var/lib/aka/runs/x`; None elsewhere (a folder at the root outside the
    system's is narrowed whole already) and in the kernel's trees."""
    parts = path.split("/")  # ["", "opt", "app", ...]
    if len(parts) < 3 or parts[0] or parts[1] not in SYSTEM_FOLDERS or parts[1] in ("proc", "sys", "dev"):
        return None
    depth = 2
    while depth < len(parts) - 1 and parts[depth] in SHARED_SYSTEM_FOLDERS:
        depth += 1
    if not parts[depth] or parts[depth] in SHARED_SYSTEM_FOLDERS:
        return None
    return "/".join(parts[: depth + 1])


def platform_folders(writable: Sequence[str], concealed: Sequence[str] = ()) -> list[str]:
    """The folders in the system's folders that hold the platform's own data, narrowed too: the
    application folders (`application_folder`) of the writable paths (an evaluation's run, the
    reward evaluator's cache), of the files concealed from the step (the suite's held-out cases:
    its checkout's git objects hold them too) and of aka's sources. A deployment under /opt or
    /var (a container image's /opt/app) otherwise showed a step the other runs, caches and lock
    files there (session 49's known gap)."""
    paths = [os.path.realpath(p) for p in (*writable, *concealed, _OWN_SOURCES) if os.path.isabs(p)]
    found = dict.fromkeys(f for f in map(application_folder, paths) if f is not None)
    return [f for f in found if os.path.isdir(f) and not os.path.islink(f)]


def shown_paths(view: Sequence[str], folders: Sequence[str]) -> tuple[list[str], list[tuple[str, str]]]:
    """Of `folders`, those to narrow (a view path at or above one shows it whole), and where each
    existing path of `view` inside them is bound from: at its own name and, where a link leads
    elsewhere, at its real one too; a path inside another shown one comes with it."""
    targets: dict[str, str] = {}
    for path in view:
        if not os.path.isabs(path) or not os.path.exists(path):
            continue
        real = os.path.realpath(path)
        for where in dict.fromkeys((os.path.normpath(path), real)):
            targets.setdefault(where, real)
    narrowed = [f for f in folders if not any(inside(f, where) for where in targets)]
    shown: list[tuple[str, str]] = []
    for where in sorted(targets):
        covered = any(inside(where, folder) for folder in narrowed)
        if covered and not any(inside(where, done) for done, _ in shown):
            shown.append((where, targets[where]))
    return narrowed, shown


def _narrow(view: Sequence[str], writable: Sequence[str], concealed: Sequence[str]) -> None:
    """An empty tmpfs over each of `narrowed_folders()` and `platform_folders` holding
    only the paths of `view` and `writable` inside it, each bound from the original (submounts
    included, so a writable path already bound stays writable): what lies beside them (other
    tasks' and runs' folders, held-out cases, the evaluator's caches and lock files, git objects)
    is not there to read. Every source is opened before any folder is covered."""
    folders = narrowed_folders()
    own = platform_folders(writable, concealed)
    folders += [f for f in own if not any(inside(f, done) for done in folders)]
    narrowed, shown = shown_paths([*view, *writable], folders)
    sources = {where: os.open(source, O_PATH) for where, source in shown}
    try:
        for folder in narrowed:
            _mount("tmpfs", folder, MS_NOSUID | MS_NODEV, "tmpfs", "mode=0755,size=1m")
        for where, fd in sources.items():
            if os.path.isdir(f"/proc/self/fd/{fd}"):
                os.makedirs(where, mode=0o755, exist_ok=True)
            else:
                os.makedirs(os.path.dirname(where), mode=0o755, exist_ok=True)
                os.close(os.open(where, os.O_CREAT | os.O_WRONLY, 0o600))
            _mount(f"/proc/self/fd/{fd}", where, MS_BIND | MS_REC)
    finally:
        for fd in sources.values():
            os.close(fd)


def _read_only_kernel_tunables() -> list[str]:
    """The step's own /proc (a PID namespace's) still reaches the host's sysctls: bind those
    read-only. Returns warnings: where that fails (a container's /proc usually has them read-only
    already), the rest of the confinement still holds."""
    warnings = []
    for path in PROC_READ_ONLY:
        if not os.path.exists(path):
            continue
        try:
            _mount(path, path, MS_BIND | MS_REC)
            _mount(None, path, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC)
        except ConfineError as exc:
            warnings.append(f"aka.evaluation.confine: warning: {path} stays as it was: {exc}")
    return warnings


# A worker's own /dev/shm: a tmpfs of its mount namespace, so what it holds there is freed with the
# worker (the step's /dev/shm outlives it: memory the judge would read as taken by others) and is
# capped (an unsized tmpfs may grow to half the machine's memory). Nothing of ours uses it.
WORKER_SHM_BYTES = 256 * 2**20


def private_shm(size: int = WORKER_SHM_BYTES) -> str | None:
    """Mount a fresh tmpfs of `size` bytes on /dev/shm (in a mount namespace of one's own, before
    `confine`, which must then keep it writable); a warning where it cannot."""
    if not os.path.isdir("/dev/shm"):
        return "aka.evaluation.confine: warning: no /dev/shm to replace"
    try:
        _mount("tmpfs", "/dev/shm", MS_NOSUID | MS_NODEV, "tmpfs", f"mode=1777,size={size}")
    except ConfineError as exc:
        return f"aka.evaluation.confine: warning: /dev/shm stays the step's: {exc}"
    return None


def confine(
    writable: Sequence[str],
    host_dev: bool = False,
    keep_admin: bool = False,
    masked: Sequence[str] = (),
    gpu_uuid: str | None = None,
    hidden: Sequence[str] = (),
    view: Sequence[str] | None = None,
) -> list[str]:
    """Make everything but `writable` read-only here, the sockets and files of `masked` unreachable
    (/dev/null over each) and the folders of `hidden` empty, and of the GPUs' nodes keep only
    `gpu_uuid`'s where it is given (the step's `ENV_GPU_UUID`); returns warnings (mounts left
    writable, paths left reachable or visible). Given a `view`, outside the system's folders only
    it and `writable` are there at all (`_narrow`).

    `keep_admin` keeps CAP_SYS_ADMIN, for an aka.harness judge only: it runs no candidate code,
    and it needs the capability to start each worker in fresh PID and mount namespaces with a
    /proc of their own (CUDA does not initialize in a PID namespace without one); each worker is
    confined again behind its own `confine`, which drops it."""
    _check(_libc.unshare(CLONE_NEWNS), "unshare a mount namespace")
    _mount(None, "/", MS_REC | MS_PRIVATE)
    keep = [os.path.realpath(p) for p in writable if os.path.exists(p)]
    for path in keep:
        _mount(path, path, MS_BIND | MS_REC)
    if view is not None:
        _narrow(view, writable, [p for p in masked if os.path.isfile(p)])  # held-out cases, not sockets
        keep += [os.path.normpath(p) for p in writable if os.path.isabs(p) and os.path.normpath(p) not in keep]
    warnings = _mask(masked)
    warnings += _hide(hidden, keep)
    if not host_dev:
        try:
            _private_dev(gpu_uuid)
        except OSError as exc:
            raise ConfineError(f"private /dev: {exc}") from exc
    warnings += _read_only_kernel_tunables()
    try:
        os.chdir(os.getcwd())  # a working directory under a writable path: onto its new mount
    except OSError:
        if view is not None:  # outside the view: its old folder would still reach what the view hides
            os.chdir("/")
    with open("/proc/self/mountinfo", "rb") as info:
        flags_of = dict(parse_mountinfo(info.read()))  # the last mount at a point is the visible one
    _mount(None, "/", MS_REMOUNT | MS_BIND | MS_RDONLY | flags_of.get("/", 0))
    for point, flags in flags_of.items():
        if point == "/" or any(inside(point, tree) for tree in (*keep, *KERNEL_TREES)):
            continue
        if not os.path.lexists(point):  # covered by a narrowed folder: nothing reaches it
            continue
        try:
            _mount(None, point, MS_REMOUNT | MS_BIND | MS_RDONLY | flags)
        except ConfineError as exc:
            warnings.append(f"aka.evaluation.confine: warning: {point} stays writable: {exc}")
    _drop_capabilities(keep_admin)
    return warnings


class Arguments(NamedTuple):
    writable: list[str]
    host_dev: bool
    command: list[str]
    keep_admin: bool = False
    mask_file: str | None = None
    hidden: tuple[str, ...] = ()
    view_file: str | None = None


def parse_args(args: Sequence[str]) -> Arguments | None:
    """`[--host-dev] [--keep-admin] [--writable PATH]... [--mask-file FILE] [--view-file FILE]
    [--hide DIR]... -- CMD ARGS...`; None when malformed. By hand, not argparse: its imports would
    double this module's start-up."""
    if "--" not in args:
        return None
    split = list(args).index("--")
    options, command = list(args[:split]), list(args[split + 1 :])
    flags = {flag: flag in options for flag in ("--host-dev", "--keep-admin")}
    options = [option for option in options if option not in flags]
    known = ("--writable", "--mask-file", "--view-file", "--hide")
    if not command or len(options) % 2 or any(flag not in known for flag in options[::2]):
        return None
    pairs = list(zip(options[::2], options[1::2], strict=True))
    writable = [path for flag, path in pairs if flag == "--writable"]
    mask_files = [path for flag, path in pairs if flag == "--mask-file"]
    view_files = [path for flag, path in pairs if flag == "--view-file"]
    hidden = tuple(path for flag, path in pairs if flag == "--hide")
    if len(mask_files) > 1 or len(view_files) > 1:
        return None
    return Arguments(
        writable,
        flags["--host-dev"],
        command,
        flags["--keep-admin"],
        next(iter(mask_files), None),
        hidden,
        next(iter(view_files), None),
    )


def _lines(path: str) -> list[str]:
    with open(path, "rb") as lines:
        return [os.fsdecode(line) for line in lines.read().splitlines() if line]


def main(argv: Sequence[str] | None = None) -> int:
    parsed = parse_args(sys.argv[1:] if argv is None else argv)
    if parsed is None:
        print(USAGE, file=sys.stderr)
        return 2
    writable, host_dev, command, keep_admin, mask_file, hidden, view_file = parsed
    try:
        masked = _lines(mask_file) if mask_file is not None else []
        view = _lines(view_file) if view_file is not None else None
        gpu = os.environ.get(ENV_GPU_UUID)
        for warning in confine(writable, host_dev, keep_admin, masked, gpu, hidden, view):
            print(warning, file=sys.stderr)
    except (ConfineError, OSError) as exc:
        print(f"aka.evaluation.confine: cannot confine the file system: {exc}", file=sys.stderr)
        return EXIT_NOT_CONFINED
    sys.stderr.flush()
    try:
        os.execvp(command[0], command)
    except OSError as exc:
        print(f"aka.evaluation.confine: cannot run {command[0]}: {exc}", file=sys.stderr)
    return 127


if __name__ == "__main__":
    raise SystemExit(main())
