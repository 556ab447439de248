"""The worker's system call filter (`aka.harness.syscall_filter`), set in a child interpreter:
what it refuses, what it lets through, and that the processes it starts inherit it."""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

import pytest

from aka.harness import syscall_filter

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.skipif(platform.machine() not in syscall_filter.MACHINES, reason="no filter for this machine")

PROBE = """
import ctypes, json, os, signal, subprocess, sys
from aka.harness import syscall_filter
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
numbers = syscall_filter.MACHINES[__import__("platform").machine()].numbers
seen = {"before": syscall_filter._filters(os.getpid()), "install": syscall_filter.install()}
seen["after"] = syscall_filter._filters(os.getpid())

def errno_of(result):
    return 0 if result >= 0 else ctypes.get_errno()

child = subprocess.Popen(["sleep", "30"])
seen["child_filters"] = syscall_filter._filters(child.pid)
seen["denied"] = {  # arguments that would fail otherwise with another error, or succeed harmlessly
    "ptrace": errno_of(libc.syscall(numbers["ptrace"], 0, 0, 0, 0)),  # PTRACE_TRACEME
    "io_uring_setup": errno_of(libc.syscall(numbers["io_uring_setup"], 1, None)),
    "perf_event_open": errno_of(libc.syscall(numbers["perf_event_open"], None, 0, -1, -1, 0)),
    "bpf": errno_of(libc.syscall(numbers["bpf"], 0, None, 0)),
    "userfaultfd": errno_of(libc.syscall(numbers["userfaultfd"], 0)),
    "process_vm_readv": errno_of(libc.syscall(numbers["process_vm_readv"], os.getpid(), None, 0, None, 0, 0)),
    "pidfd_getfd": errno_of(libc.syscall(numbers["pidfd_getfd"], os.pidfd_open(child.pid), 0, 0)),
    "add_key": errno_of(libc.syscall(numbers["add_key"], b"user", b"aka-test", b"x", 1, -4)),  # session keyring
    "request_key": errno_of(libc.syscall(numbers["request_key"], b"user", b"aka-test", None, 0)),
    "keyctl": errno_of(libc.syscall(numbers["keyctl"], 0, -4, 0, 0, 0)),  # KEYCTL_GET_KEYRING_ID
}
pid, cont, winch = child.pid, int(signal.SIGCONT), int(signal.SIGWINCH)
calls = {
    "kill": lambda sig: libc.syscall(numbers["kill"], pid, sig),
    "tkill": lambda sig: libc.syscall(numbers["tkill"], pid, sig),
    "tgkill": lambda sig: libc.syscall(numbers["tgkill"], pid, pid, sig),
    "rt_sigqueueinfo": lambda sig: libc.syscall(numbers["rt_sigqueueinfo"], pid, sig, None),
    "pidfd_send_signal": lambda sig: libc.syscall(numbers["pidfd_send_signal"], os.pidfd_open(pid), sig, None, 0),
}
seen["sigcont"] = {name: errno_of(call(cont)) for name, call in calls.items()}
seen["sigwinch"] = {name: errno_of(call(winch)) for name, call in calls.items() if name != "rt_sigqueueinfo"}
seen["sched_other"] = {  # another process's scheduling: refused; the caller's own (pid 0): allowed
    "setpriority": errno_of(libc.syscall(numbers["setpriority"], 0, pid, 19)),
    "sched_setscheduler": errno_of(libc.syscall(numbers["sched_setscheduler"], pid, 5, ctypes.byref(ctypes.c_int(0)))),
    "sched_setaffinity": errno_of(libc.syscall(numbers["sched_setaffinity"], pid, 8, ctypes.byref(ctypes.c_ulong(1)))),
}
seen["sched_self"] = {
    "setpriority": errno_of(libc.syscall(numbers["setpriority"], 0, 0, 1)),
    "sched_setaffinity": errno_of(libc.syscall(numbers["sched_setaffinity"], 0, 8, ctypes.byref(ctypes.c_ulong(1)))),
}
child.terminate()
seen["terminated"] = child.wait()
import torch
seen["torch"] = float(torch.arange(4.0).sum())
print(json.dumps(seen))
"""


def test_a_worker_is_filtered_by_the_judges_reading_and_the_judge_is_not() -> None:
    """`filtered` counts the filters beyond the judge's own (a container may filter the judge too)."""
    assert syscall_filter.filtered(os.getpid()) is False
    child = subprocess.Popen(
        [sys.executable, "-c", "from aka.harness import syscall_filter; syscall_filter.install(); input()"],
        env={**os.environ, "PYTHONPATH": str(REPO / "src")},
        stdin=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 30
        while not syscall_filter.filtered(child.pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert syscall_filter.filtered(child.pid)
    finally:
        child.kill()
        child.wait()


def test_the_filter_refuses_tracing_io_uring_and_sigcont_and_nothing_else_a_worker_needs() -> None:
    done = subprocess.run(
        [sys.executable, "-c", PROBE],
        env={**os.environ, "PYTHONPATH": str(REPO / "src")},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["install"] is None and seen["after"] == seen["before"] + 1, seen
    assert seen["child_filters"] == seen["after"], seen  # what it starts inherits the filter
    eperm = 1
    assert seen["denied"] == dict.fromkeys(seen["denied"], eperm), seen
    assert seen["sigcont"] == dict.fromkeys(seen["sigcont"], eperm), seen
    assert seen["sigwinch"] == dict.fromkeys(seen["sigwinch"], 0), seen  # other signals go through
    assert seen["sched_other"] == dict.fromkeys(seen["sched_other"], eperm), seen
    assert seen["sched_self"] == dict.fromkeys(seen["sched_self"], 0), seen
    assert seen["terminated"] == -15 and seen["torch"] == 6.0, seen


INT80 = """
import ctypes, json, mmap, os
from aka.harness import syscall_filter
# getpid by the 32-bit entry (number 20 there): mov eax, 20; int 0x80; ret
code = bytes([0xB8, 20, 0, 0, 0, 0xCD, 0x80, 0xC3])
page = mmap.mmap(-1, mmap.PAGESIZE, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
page.write(code)
getpid32 = ctypes.CFUNCTYPE(ctypes.c_int)(ctypes.addressof(ctypes.c_char.from_buffer(page)))
seen = {"pid": os.getpid(), "before": getpid32()}
seen["install"] = syscall_filter.install()
seen["after"] = getpid32()
print(json.dumps(seen))
"""


def test_a_32_bit_system_call_is_refused_on_x86_64() -> None:
    """A 64-bit process may still make 32-bit calls (`int 0x80`), under other numbers: the
    filter's architecture check refuses every one, whatever its number."""
    if platform.machine() != "x86_64":
        pytest.skip("x86_64 only")
    done = subprocess.run(
        [sys.executable, "-c", INT80],
        env={**os.environ, "PYTHONPATH": str(REPO / "src")},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    if seen["before"] == -38:  # ENOSYS: this kernel runs no 32-bit calls at all
        pytest.skip("no 32-bit system calls on this kernel")
    assert seen["before"] == seen["pid"] and seen["install"] is None, seen
    assert seen["after"] == -1, seen  # -EPERM


def test_a_worker_whose_cuda_fails_under_the_filter_runs_without_it(tmp_path: Path, monkeypatch) -> None:
    """Not yet tried on a GPU: should CUDA need a call the filter refuses, setting up a worker
    tries a plain one, then one without the filter (decided before any side's code runs)."""
    from aka.harness import remote
    from aka.harness.link import Reply

    side = remote.RemoteSide.__new__(remote.RemoteSide)
    side.directory, side.role = tmp_path / "w", "candidate"
    started: list[tuple[bool, bool]] = []
    replies = iter(
        [Reply({"ok": False, "kind": "cuda_unavailable", "error": "e"})] * 2 + [Reply({"ok": True, "isolated": False})]
    )
    monkeypatch.setattr(side, "request", lambda *_: next(replies), raising=False)
    monkeypatch.setattr(side, "close_process", lambda: None, raising=False)
    monkeypatch.setattr(side, "_start", lambda forked, filtered=True: started.append((forked, filtered)), raising=False)
    (tmp_path / "task").mkdir()
    side.setup(tmp_path / "task", "harness.py", "t", "cuda", "off", [], [], [], 10.0)
    assert started == [(False, True), (False, False)]  # plain and filtered, then plain without the filter


SOCKETS = """
import json, os, socket
from aka.harness import syscall_filter
seen = {"before": syscall_filter._filters(os.getpid())}

def made(family):
    try:
        socket.socket(family).close()
        return 0
    except OSError as exc:
        return exc.errno

seen["unix_before"] = made(socket.AF_UNIX)
seen["install"], seen["close"] = syscall_filter.install(), syscall_filter.close_unix_sockets()
seen["after"] = syscall_filter._filters(os.getpid())
seen["unix"], seen["inet"] = made(socket.AF_UNIX), made(socket.AF_INET)
left, right = socket.socketpair()
left.send(b"x")
seen["pair"] = right.recv(1).decode()
print(json.dumps(seen))
"""


def test_the_second_filter_refuses_unix_sockets_only() -> None:
    """After `close_unix_sockets` a process makes no Unix socket (EACCES), whatever path it would
    connect to; other families and socket pairs (which reach nothing outside) still work."""
    import errno

    done = subprocess.run(
        [sys.executable, "-c", SOCKETS],
        env={**os.environ, "PYTHONPATH": str(REPO / "src")},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["install"] is None and seen["close"] is None and seen["after"] == seen["before"] + 2, seen
    assert (seen["unix_before"], seen["unix"], seen["inet"], seen["pair"]) == (0, errno.EACCES, 0, "x"), seen
