"""Starting a worker process: forked from the judge into namespaces of its own, or a fresh interpreter.

Why fork: a fresh interpreter imports torch again (about 3 s of CPU each, and a step has up to two
workers), while a child forked from the judge has it already; the judge forks before it has
touched CUDA (a forked child could not initialize it otherwise) and before it reads its token.
The child then leaves everything of the judge behind that it must not have: every file
descriptor but its socket (the judge's result pipe and standard input, the token's way in,
included), the judge's environment, its signal handlers. Then it enters fresh PID and mount
namespaces (as root of this namespace, else through a user namespace), forks once more to be the
first process of its PID namespace, mounts a /proc of its own (CUDA does not initialize in a PID
namespace without one), confines its file system with `aka.evaluation.confine` (read-only but its own
folders, capabilities cut) and serves. Where the namespaces cannot be had, it serves in the
judge's; where CUDA does not initialize inside them, the judge starts a fresh interpreter
without them instead (`start_plain`).
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import os
import signal
import subprocess
import sys
import traceback
from collections.abc import Mapping, Sequence
from pathlib import Path

from aka.evaluation.wire import HELDOUT_FILE
from aka.harness import syscall_filter

CLONE_NEWNS, CLONE_NEWPID, CLONE_NEWUSER, CLONE_NEWIPC = 0x00020000, 0x20000000, 0x10000000, 0x08000000
MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REC, MS_PRIVATE = 2, 4, 8, 16384, 1 << 18
PR_SET_PDEATHSIG = 1
MAX_FD = 65536
EXIT_FAILED = 70
# No file a worker writes grows past this (its output log included: past it, writes fail with
# EFBIG, SIGXFSZ being ignored as Python ignores it, and the candidate's call with them); builds
# stay far below it.
MAX_FILE_BYTES = 256 * 2**20


class WorkerProcess:
    """A started worker: its pid (the leader of its own process group) and how it ended."""

    def __init__(self, pid: int, popen: subprocess.Popen[bytes] | None = None) -> None:
        self.pid, self.popen = pid, popen
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None:
            if self.popen is not None:
                self.returncode = self.popen.poll()
            else:
                with contextlib.suppress(ChildProcessError):
                    pid, status = os.waitpid(self.pid, os.WNOHANG)
                    if pid:
                        self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def wait(self, timeout: float) -> int:
        """The exit status, waiting at most `timeout` seconds (`TimeoutError` after that)."""
        import time

        deadline = time.monotonic() + timeout
        while self.poll() is None:
            if time.monotonic() > deadline:
                raise TimeoutError(f"worker {self.pid} still running")
            time.sleep(0.01)
        assert self.returncode is not None
        return self.returncode


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def _write(path: str, text: str) -> None:
    with open(path, "w") as handle:
        handle.write(text)


def enter_namespaces(writable: Sequence[Path]) -> bool:
    """In a forked, single-threaded child: fresh PID and mount namespaces, this process the first
    of its PID namespace with a /proc of its own, the file system confined. False: none could be
    had (nothing changed)."""
    libc = _libc()
    uid, gid = os.getuid(), os.getgid()
    # its own System V IPC too: a red team's segments outlived the worker and the evaluation
    if libc.unshare(CLONE_NEWPID | CLONE_NEWNS | CLONE_NEWIPC) != 0:
        if libc.unshare(CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNS | CLONE_NEWIPC) != 0:
            return False
        map_root_user(uid, gid)
    if not first_process_of_namespace():
        os._exit(EXIT_FAILED)  # half in: no way back to the judge's namespaces
    from aka.evaluation.confine import ConfineError, confine, private_shm

    try:
        shm = private_shm()  # the worker's own, freed with it and capped
        if shm is not None:
            print(shm, file=sys.stderr)
        kept = [str(p) for p in writable] + (["/dev/shm"] if shm is None else [])
        for warning in confine(kept, host_dev=True, masked=judges_heldout_file(), hidden=judges_folder(kept)):
            print(warning, file=sys.stderr)
    except ConfineError as exc:
        print(f"aka worker: cannot confine the file system: {exc}", file=sys.stderr)
        os._exit(EXIT_FAILED)
    return True


def judges_folder(kept: Sequence[str]) -> list[str]:
    """The judge's evaluation directory (its working directory), hidden from the worker: the
    judge copies the worker's own folder from it (`RemoteSide.setup`), without the held-out
    cases that a held-out evaluation puts there, and a red team's candidate walked up from its
    own folder and read them there (session 50). Left where it holds what the worker runs from
    or writes (a judge started by hand in a checkout holding its Python and aka)."""
    import aka
    from aka.evaluation.confine import inside

    here = os.getcwd()
    runs_from = (sys.prefix, sys.exec_prefix, sys.base_prefix, sys.base_exec_prefix, os.path.dirname(aka.__path__[0]))
    packages = [p for p in sys.path if os.path.basename(p) in ("site-packages", "dist-packages")]
    needed = [os.path.realpath(path) for path in (*runs_from, *packages, *kept)]
    return [] if here == "/" or any(inside(path, here) for path in needed) else [here]


def judges_heldout_file() -> list[str]:
    """The held-out cases in the judge's evaluation directory, /dev/null in the worker where its
    folder stays in sight (`judges_folder`): as found now (a rebuild that replaces the file
    detaches the mask; the folder's cover stays)."""
    path = os.path.join(os.getcwd(), HELDOUT_FILE)
    return [path] if os.path.isfile(path) else []


def map_root_user(uid: int, gid: int) -> None:
    """Just after `unshare(CLONE_NEWUSER ...)`: this process is root of the new user namespace,
    as `unshare --map-root-user` makes it, and `uid`/`gid` outside."""
    with contextlib.suppress(OSError):
        _write("/proc/self/setgroups", "deny")
    _write("/proc/self/uid_map", f"0 {uid} 1")
    _write("/proc/self/gid_map", f"0 {gid} 1")


def first_process_of_namespace() -> bool:
    """Just after `unshare(CLONE_NEWPID | CLONE_NEWNS ...)`: fork; the parent stays outside, as
    `unshare --fork` does, and ends as the namespace's first process ends; the child (that first
    process) dies with it and gets a private mount tree and a /proc of its own. False: the mounts
    failed (the caller is half in and must exit)."""
    child = os.fork()
    if child:
        _, status = os.waitpid(child, 0)
        _end_as(status)
    libc = _libc()
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    return bool(
        libc.mount(None, b"/", None, MS_REC | MS_PRIVATE, None) == 0
        and libc.mount(b"proc", b"/proc", b"proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, None) == 0
    )


def _end_as(status: int) -> None:
    """Leave as the namespace's first process left: killed by the same signal (a segfault reads as
    signal 11 to the judge, not as an exit status), or with its exit status."""
    if os.WIFSIGNALED(status):
        import resource

        number = os.WTERMSIG(status)
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        signal.signal(number, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, [number])
        os.kill(os.getpid(), number)
    os._exit(os.waitstatus_to_exitcode(status) & 0xFF)


def _limit_files() -> None:
    import resource

    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (MAX_FILE_BYTES, MAX_FILE_BYTES))


def _filter_system_calls() -> bool:
    """Before any side's code: the calls that would let its processes dodge a pause (module
    `aka.harness.syscall_filter`); where the kernel refuses, the worker runs on without them."""
    problem = syscall_filter.install()
    if problem is not None:
        print(f"aka worker: no system call filter: {problem}", file=sys.stderr, flush=True)
    return problem is None


def _limit_files_and_calls() -> None:
    _limit_files()
    _filter_system_calls()


def _leave_the_judge_behind(socket_fd: int, output_fd: int, env: Mapping[str, str]) -> None:
    os.setsid()
    _libc().prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    for number in (signal.SIGINT, signal.SIGTERM, signal.SIGPIPE):
        signal.signal(number, signal.SIG_DFL)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.dup2(output_fd, 1)  # its own log, never the judge's streams (aka.harness.remote reads it back)
    os.dup2(output_fd, 2)
    _limit_files()
    os.closerange(3, socket_fd)
    os.closerange(socket_fd + 1, MAX_FD)
    sys.stdout = open(1, "w", buffering=1, closefd=False)  # noqa: SIM115 - the process's own streams, for good
    sys.stderr = open(2, "w", buffering=1, closefd=False)  # noqa: SIM115
    os.environ.clear()
    os.environ.update(env)
    import tempfile

    tempfile.tempdir = None  # the judge's, if it asked: the worker's own comes from its TMPDIR


def fork_worker(
    socket_fd: int,
    output_fd: int,
    directory: Path,
    writable: Sequence[Path],
    env: Mapping[str, str],
    device: str,
    namespaces: bool = True,
) -> WorkerProcess:
    """Fork a worker that serves on `socket_fd` (see the module docstring)."""
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid:
        return WorkerProcess(pid)
    code = EXIT_FAILED
    try:
        _leave_the_judge_behind(socket_fd, output_fd, env)
        filtered = _filter_system_calls()  # this process and the worker under it: the judge reads it here
        isolated = namespaces and enter_namespaces(writable)
        os.chdir(directory)
        from aka.harness.worker import serve

        code = serve(socket_fd, device, isolated, filtered)
    except BaseException:  # noqa: BLE001 - nothing may return into the judge's code from here
        traceback.print_exc()
    finally:
        sys.stderr.flush()
        os._exit(code)


def start_plain(
    socket_fd: int, output_fd: int, directory: Path, env: Mapping[str, str], device: str, filtered: bool = True
) -> WorkerProcess:
    """A fresh interpreter in the judge's namespaces (where CUDA failed inside the worker's own), under
    the system call filter unless `filtered` is False (where CUDA failed under it too)."""
    popen = subprocess.Popen(
        [sys.executable, "-m", "aka.harness.worker", "--fd", str(socket_fd), "--device", device]
        + ["--filtered"] * filtered,
        cwd=directory,
        env=dict(env),
        pass_fds=(socket_fd,),
        stdin=subprocess.DEVNULL,
        stdout=output_fd,
        stderr=output_fd,
        start_new_session=True,
        preexec_fn=_limit_files_and_calls if filtered else _limit_files,
    )
    return WorkerProcess(popen.pid, popen)


@functools.cache
def namespaces_work() -> bool:
    """Can a worker here enter namespaces of its own (a forked probe that exits at once)? Asked
    once per judge, before its first worker: a worker that got its namespaces but not its /proc
    (inside bubblewrap, which covers parts of its /proc, a new one may not be mounted) is half in
    and cannot come back, so a machine that allows only that runs its workers in the judge's."""
    if "1" in (os.environ.get("AKA_NO_SANDBOX"), os.environ.get("AKA_NO_WORKER_SANDBOX")):
        return False
    import tempfile

    # an explicit folder: `gettempdir` would cache the judge's, and forked workers inherit it
    probe = tempfile.mkdtemp(prefix="aka-worker-probe-", dir=os.environ.get("TMPDIR") or "/tmp")
    try:
        pid = os.fork()
        if not pid:
            ok = False
            with contextlib.suppress(BaseException):
                ok = enter_namespaces([Path(probe)])
            os._exit(0 if ok else 1)
        _, status = os.waitpid(pid, 0)
    finally:
        os.rmdir(probe)
    return os.waitstatus_to_exitcode(status) == 0
