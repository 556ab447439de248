"""System calls a worker may not make: a seccomp filter set before any side's code runs, which
every process the worker starts inherits and none can remove.

Why: pausing a worker (SIGSTOP to every process of its tree, `aka.harness.remote`) is what keeps
the candidate from running while the baseline is timed, and a SIGSTOP is absolute except for a
traced process, whose tracer sees the stop and may resume it, and for a SIGCONT. Candidates whose
helper processes traced each other (`PTRACE_SEIZE`), or sent each other SIGCONT in a loop, ran on
through every pause (a walk of the tree stops one before the other). So no process of a worker
may trace, nor send SIGCONT by any signalling call. Also denied: io_uring (its kernel worker
threads carry on with queued work while their process stands stopped), `perf_event_open`, `bpf`
and `userfaultfd` (no kernel's-eye view of other processes, no way to stall a page fault),
`process_vm_readv`/`writev` and `pidfd_getfd` (no other process's memory or descriptors, where a
worker shares the judge's namespaces), the keyring calls (`add_key`, `request_key`, `keyctl`:
state that outlives the evaluation where the evaluator is real root), and any system call of
another ABI than the machine's own (a 64-bit process may still make 32-bit calls, under other
numbers). What the kernel sends on a
process's behalf (a timer's SIGCONT) no filter sees: `aka.stillness` catches what ran.

The judge reads the filter's presence in /proc (`filtered`), not from the worker's word; where
the kernel has no seccomp, the worker runs without it and results lack `worker-syscall-filter`.

A second filter (`close_unix_sockets`), set once the worker's CUDA is up and still before any
side's code, refuses to make a Unix socket (`socket(AF_UNIX, ...)`, EACCES). The step's network
namespace keeps it off every network and abstract socket, and the evaluator masks the machine's
socket files it finds when the step starts (`aka.evaluation.confine`), but a socket bound later,
or reached under another name (a folder bound elsewhere, a hard link), would still connect to its
service: a container runtime's gives the host. No worker needs one once CUDA is up (an MPS client
connects while CUDA starts); the pair it talks to the judge on is made before, and pairs stay
allowed. Results list `worker-no-unix-sockets` where the kernel shows both filters.
"""

from __future__ import annotations

import ctypes
import errno
import platform
import signal
import struct
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

FEATURE = "worker-syscall-filter"
SOCKETS_FEATURE = "worker-no-unix-sockets"
AF_UNIX = 1
PR_SET_NO_NEW_PRIVS = 38
SECCOMP_SET_MODE_FILTER = 1
SECCOMP_FILTER_FLAG_TSYNC = 1
SECCOMP_RET_ALLOW = 0x7FFF0000
SECCOMP_RET_ERRNO = 0x00050000
X32_SYSCALL_BIT = 0x40000000
BPF_LD_W_ABS, BPF_JEQ_K, BPF_JGE_K, BPF_RET_K = 0x20, 0x15, 0x35, 0x06
SECCOMP_DATA_NR, SECCOMP_DATA_ARCH, SECCOMP_DATA_ARGS = 0, 4, 16  # offsets in struct seccomp_data
DENIED = (
    "ptrace",
    "io_uring_setup",
    "io_uring_enter",
    "io_uring_register",
    "perf_event_open",
    "bpf",
    "userfaultfd",
    "process_vm_readv",  # another process's memory (where the worker shares the judge's namespaces)
    "process_vm_writev",
    "pidfd_getfd",  # another process's descriptors
    # the kernel's keyrings: where the evaluator is real root, a candidate's key landed in the host's
    # root keyring and outlived its evaluation, read by the next one (red team, session 48)
    "add_key",
    "request_key",
    "keyctl",
)
_ALLOW, _DENY = "allow", "deny"  # labels of the filter's last two instructions
# Calls that send a signal, and which argument is the signal: none may send SIGCONT, which
# continues a stopped process (a sibling the pause has stopped already).
SIGNALLING = {"kill": 1, "tkill": 1, "tgkill": 2, "rt_sigqueueinfo": 1, "rt_tgsigqueueinfo": 2, "pidfd_send_signal": 1}
# Calls that change how another process is scheduled, and which argument names it: only 0 (the
# caller itself) is allowed. Where a worker shares the judge's namespaces the baseline's worker is
# in reach, and a red team's candidate set it to SCHED_IDLE and nice 19 (127-571x on the CPU).
SCHEDULING = {
    "setpriority": 1,
    "sched_setparam": 0,
    "sched_setscheduler": 0,
    "sched_setattr": 0,
    "sched_setaffinity": 0,
    "ioprio_set": 1,
}


class Machine(NamedTuple):
    """A machine's audit architecture, its `seccomp` call's number, its calls' numbers, x32 or not."""

    arch: int
    seccomp: int
    numbers: dict[str, int]
    x32: bool


SHARED_NUMBERS = {  # the same on both (the calls added since Linux 5.1 are numbered alike)
    "io_uring_setup": 425,
    "io_uring_enter": 426,
    "io_uring_register": 427,
    "pidfd_send_signal": 424,
    "pidfd_getfd": 438,
}
MACHINES = {
    "x86_64": Machine(
        0xC000003E,
        317,
        {
            **SHARED_NUMBERS,
            "socket": 41,
            "add_key": 248,
            "request_key": 249,
            "keyctl": 250,
            "ptrace": 101,
            "perf_event_open": 298,
            "bpf": 321,
            "userfaultfd": 323,
            "process_vm_readv": 310,
            "process_vm_writev": 311,
            "kill": 62,
            "tkill": 200,
            "tgkill": 234,
            "rt_sigqueueinfo": 129,
            "rt_tgsigqueueinfo": 297,
            "setpriority": 141,
            "sched_setparam": 142,
            "sched_setscheduler": 144,
            "sched_setaffinity": 203,
            "ioprio_set": 251,
            "sched_setattr": 314,
        },
        x32=True,
    ),
    "aarch64": Machine(
        0xC00000B7,
        277,
        {
            **SHARED_NUMBERS,
            "socket": 198,
            "add_key": 217,
            "request_key": 218,
            "keyctl": 219,
            "ptrace": 117,
            "perf_event_open": 241,
            "bpf": 280,
            "userfaultfd": 282,
            "process_vm_readv": 270,
            "process_vm_writev": 271,
            "kill": 129,
            "tkill": 130,
            "tgkill": 131,
            "rt_sigqueueinfo": 138,
            "rt_tgsigqueueinfo": 240,
            "ioprio_set": 30,
            "sched_setparam": 118,
            "sched_setscheduler": 119,
            "sched_setaffinity": 122,
            "setpriority": 140,
            "sched_setattr": 274,
        },
        x32=False,
    ),
}


def program(machine: Machine) -> bytes:
    """The classic-BPF filter: another ABI's calls, the denied ones, SIGCONT sent by any signalling
    call and a change to another process's scheduling fail with EPERM; everything else runs."""
    code: list[tuple[int, int, int | str, int | str]] = [  # (op, k, where taken, where not): a label or a skip
        (BPF_LD_W_ABS, SECCOMP_DATA_ARCH, 0, 0),
        (BPF_JEQ_K, machine.arch, 0, _DENY),
        (BPF_LD_W_ABS, SECCOMP_DATA_NR, 0, 0),
    ]
    if machine.x32:
        code.append((BPF_JGE_K, X32_SYSCALL_BIT, _DENY, 0))
    code += [(BPF_JEQ_K, number, _DENY, 0) for number in sorted(machine.numbers[name] for name in DENIED)]
    # each: the call's number, its argument's low word (a signal, a pid: ints), and what is
    # denied; once the argument is loaded the call is decided
    checks = [(name, argument, int(signal.SIGCONT), _DENY, _ALLOW) for name, argument in SIGNALLING.items()]
    checks += [(name, argument, 0, _ALLOW, _DENY) for name, argument in SCHEDULING.items()]
    for name, argument, value, equal, other in checks:
        code.append((BPF_JEQ_K, machine.numbers[name], 0, 2))
        code.append((BPF_LD_W_ABS, SECCOMP_DATA_ARGS + 8 * argument, 0, 0))
        code.append((BPF_JEQ_K, value, equal, other))
    return _assembled(code, errno.EPERM)


def socket_program(machine: Machine) -> bytes:
    """The second filter: `socket(AF_UNIX, ...)` fails with EACCES; everything else runs (a call
    of another ABI goes on to the first filter, which refuses it)."""
    code: list[tuple[int, int, int | str, int | str]] = [
        (BPF_LD_W_ABS, SECCOMP_DATA_ARCH, 0, 0),
        (BPF_JEQ_K, machine.arch, 0, _ALLOW),
        (BPF_LD_W_ABS, SECCOMP_DATA_NR, 0, 0),
        (BPF_JEQ_K, machine.numbers["socket"], 0, _ALLOW),
        (BPF_LD_W_ABS, SECCOMP_DATA_ARGS, 0, 0),  # the domain's low word
        (BPF_JEQ_K, AF_UNIX, _DENY, _ALLOW),
    ]
    return _assembled(code, errno.EACCES)


def _assembled(code: list[tuple[int, int, int | str, int | str]], denied_errno: int) -> bytes:
    """The program's instructions, ending in allow and deny (with `denied_errno`), jumps resolved."""
    code = [*code, (BPF_RET_K, SECCOMP_RET_ALLOW, 0, 0), (BPF_RET_K, SECCOMP_RET_ERRNO | denied_errno, 0, 0)]
    at = {_ALLOW: len(code) - 2, _DENY: len(code) - 1}

    def skip(index: int, target: int | str) -> int:
        return target if isinstance(target, int) else at[target] - index - 1

    return b"".join(
        struct.pack("HBBI", op, skip(index, taken), skip(index, not_taken), k)
        for index, (op, k, taken, not_taken) in enumerate(code)
    )


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def install() -> str | None:
    """Set the filter on this process and all its threads; None, or why it could not be set."""
    return _install(program)


def close_unix_sockets() -> str | None:
    """Set the second filter (no Unix socket made from now on) on this process and all its
    threads; None, or why it could not be set."""
    return _install(socket_program)


def _install(assemble: Callable[[Machine], bytes]) -> str | None:
    machine = MACHINES.get(platform.machine())
    if machine is None:
        return f"no system call filter for {platform.machine()}"
    libc = ctypes.CDLL(None, use_errno=True)
    code = assemble(machine)
    buffer = ctypes.create_string_buffer(code, len(code))
    fprog = _SockFprog(len(code) // 8, ctypes.cast(buffer, ctypes.c_void_p))
    if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        return f"no_new_privs: {errno.errorcode.get(ctypes.get_errno(), ctypes.get_errno())}"
    libc.syscall.restype = ctypes.c_long
    result = libc.syscall(
        ctypes.c_long(machine.seccomp),
        ctypes.c_long(SECCOMP_SET_MODE_FILTER),
        ctypes.c_long(SECCOMP_FILTER_FLAG_TSYNC),
        ctypes.byref(fprog),
    )
    if result != 0:
        return f"seccomp: {errno.errorcode.get(ctypes.get_errno(), ctypes.get_errno())}"
    return None


def _filters(pid: int | str) -> int:
    """How many seccomp filters process `pid` runs under (`Seccomp_filters`, Linux 5.9+; before
    that, 1 for any filter at all)."""
    try:
        status = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines())
    except (OSError, ValueError):
        return 0
    if "Seccomp_filters" in status:
        return int(status["Seccomp_filters"])
    return int(status.get("Seccomp", "0").strip() == "2")


def filtered(pid: int) -> bool:
    """Whether process `pid` runs under a filter more than this process (the judge, which may run
    under its container's own filter): as the kernel says, not the worker."""
    return _filters(pid) > _filters("self")


def closed_to_sockets(pid: int) -> bool:
    """Whether process `pid` runs under both filters beyond this process's own (a kernel before
    Linux 5.9 does not count them: then no)."""
    return _filters(pid) >= _filters("self") + 2
