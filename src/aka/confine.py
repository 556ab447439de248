"""Read-only file system for a step command, except the paths it must write.

    python3 -m aka.confine --writable PATH [--writable PATH ...] -- CMD ARGS...

Why: a step process imports and runs untrusted candidate code. Without this, that code could
write wherever the evaluator's user can: the pristine task directory, the aka sources,
site-packages (e.g. patch torch's timing on disk) or the run's frozen baseline builds, and so
poison every LATER evaluation. The evaluator runs this as root of the `unshare` sandbox
(aka.isolation); it

1. moves into a private mount namespace of its own, so it can never change the caller's mounts;
2. bind-mounts each existing writable PATH onto itself (a read-write mount of its own);
3. remounts every other mount read-only ("/" included; failing there exits 126: fail closed),
   except the kernel and device file systems under /proc, /sys and /dev (CUDA and torch need
   /dev and /dev/shm);
4. drops the capabilities that could undo that (mount and remount, kernel modules, device
   nodes) from the bounding and inheritable sets, so not even root regains them on exec;
5. execs the command.

Standard library only (no torch: it runs before every step). The evaluator starts it as
`python3 -I -S .../aka/confine.py`, so nothing in the working directory or in `PYTHON*`
variables can shadow the modules it imports while it still holds every capability.
"""

from __future__ import annotations

import ctypes
import os
import sys
from collections.abc import Sequence

MS_RDONLY = 1
MS_NOSUID = 2
MS_NODEV = 4
MS_NOEXEC = 8
MS_REMOUNT = 32
MS_BIND = 4096
MS_REC = 16384
MS_PRIVATE = 1 << 18
CLONE_NEWNS = 0x00020000
PR_CAPBSET_DROP = 24
PR_CAP_AMBIENT = 47
PR_CAP_AMBIENT_CLEAR_ALL = 4
CAP_SYS_MODULE = 16
CAP_SYS_ADMIN = 21
CAP_MKNOD = 27
DROPPED_CAPABILITIES = (CAP_SYS_ADMIN, CAP_SYS_MODULE, CAP_MKNOD)
_CAPABILITY_VERSION_3 = 0x20080522
# Per-mount flags a remount must repeat (in a user namespace they are locked: leaving one out is EPERM).
_KEPT_FLAGS = {b"nosuid": MS_NOSUID, b"nodev": MS_NODEV, b"noexec": MS_NOEXEC}
KERNEL_TREES = ("/proc", "/sys", "/dev")
EXIT_NOT_CONFINED = 126
USAGE = "usage: python3 -m aka.confine [--writable PATH]... -- CMD ARGS..."

_libc = ctypes.CDLL(None, use_errno=True)
_libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_void_p]
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


def _mount(source: str | None, target: str, flags: int) -> None:
    _check(_libc.mount(os.fsencode(source) if source else None, os.fsencode(target), None, flags, None),
           f"mount {target}")


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


def _under(path: str, tree: str) -> bool:
    return path == tree or path.startswith(tree.rstrip("/") + "/")


def _drop_capabilities() -> None:
    for capability in DROPPED_CAPABILITIES:
        _check(_libc.prctl(PR_CAPBSET_DROP, capability, 0, 0, 0), f"drop capability {capability}")
    _libc.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)  # absent before Linux 4.3: nothing to clear
    header, data = _CapHeader(_CAPABILITY_VERSION_3, 0), (_CapData * 2)()
    _check(_libc.capget(ctypes.byref(header), data), "capget")
    data[0].inheritable &= ~sum(1 << c for c in DROPPED_CAPABILITIES) & 0xFFFFFFFF
    _check(_libc.capset(ctypes.byref(header), data), "capset")


def confine(writable: Sequence[str]) -> list[str]:
    """Make everything but `writable` read-only here; returns warnings (mounts left writable)."""
    _check(_libc.unshare(CLONE_NEWNS), "unshare a mount namespace")
    _mount(None, "/", MS_REC | MS_PRIVATE)
    keep = [os.path.realpath(p) for p in writable if os.path.exists(p)]
    for path in keep:
        _mount(path, path, MS_BIND | MS_REC)
    try:
        os.chdir(os.getcwd())  # a working directory under a writable path: onto its new mount
    except OSError:
        pass
    warnings: list[str] = []
    with open("/proc/self/mountinfo", "rb") as info:
        flags_of = dict(parse_mountinfo(info.read()))  # the last mount at a point is the visible one
    _mount(None, "/", MS_REMOUNT | MS_BIND | MS_RDONLY | flags_of.get("/", 0))
    for point, flags in flags_of.items():
        if point == "/" or any(_under(point, tree) for tree in (*keep, *KERNEL_TREES)):
            continue
        try:
            _mount(None, point, MS_REMOUNT | MS_BIND | MS_RDONLY | flags)
        except ConfineError as exc:
            warnings.append(f"aka.confine: warning: {point} stays writable: {exc}")
    _drop_capabilities()
    return warnings


def parse_args(args: Sequence[str]) -> tuple[list[str], list[str]] | None:
    """(writable paths, command) from `[--writable PATH]... -- CMD ARGS...`; None when malformed.
    By hand, not argparse: its imports would double this module's start-up."""
    if "--" not in args:
        return None
    split = list(args).index("--")
    options, command = list(args[:split]), list(args[split + 1:])
    if not command or len(options) % 2 or any(flag != "--writable" for flag in options[::2]):
        return None
    return options[1::2], command


def main(argv: Sequence[str] | None = None) -> int:
    parsed = parse_args(sys.argv[1:] if argv is None else argv)
    if parsed is None:
        print(USAGE, file=sys.stderr)
        return 2
    writable, command = parsed
    try:
        for warning in confine(writable):
            print(warning, file=sys.stderr)
    except ConfineError as exc:
        print(f"aka.confine: cannot confine the file system: {exc}", file=sys.stderr)
        return EXIT_NOT_CONFINED
    sys.stderr.flush()
    try:
        os.execvp(command[0], command)
    except OSError as exc:
        print(f"aka.confine: cannot run {command[0]}: {exc}", file=sys.stderr)
    return 127


if __name__ == "__main__":
    raise SystemExit(main())
