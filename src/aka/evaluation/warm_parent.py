"""Step processes forked from a warm trusted parent, so that no step imports torch again.

Why: an aka.harness step is `python3 harness.py STEP`, and most of its start is importing torch
(2-3 s of CPU each; an evaluation starts three to nine of them). The warm parent is a server
process (`python3 -m aka.evaluation.warm_parent`, started by aka with the step's import-time
environment) that imports torch, Triton and aka.harness once and then only forks: never any
candidate or task code, never CUDA (a forked child could not initialize it otherwise).

For each step the child does what the exec path's `unshare ... confine.py ... python3` chain
does, in the same order: its own session (the group aka kills), its file descriptors (standard
input, the log, the result pipe: passed over the socket), its resource limits, then, where the
machine's sandbox has them, fresh user, PID, network and mount namespaces with a /proc of their
own and `aka.evaluation.confine` (read-only file system but the step's writable paths, a private
/dev, capabilities cut), and finally runs the harness script as `__main__`. The parent reaps its
children and reports each exit status over the socket; `aka.process.StartedCommand` waits on a
`ForkedProcess` as on a `subprocess.Popen`. When aka goes away (even `kill -9`) the socket
closes, and the parent kills every step it started and exits.

Where the server cannot start, or the sandbox cannot be rebuilt in a child, steps are exec'd as
before. On by default (`AKA_WARM_STEPS=0` turns it off); on a GPU since session 39, after the
H200 runs of sessions 34-39 used it (docs/benchmarks/2026-12-03_warm_parent_h200.md compares).
"""

from __future__ import annotations

import array
import contextlib
import json
import logging
import os
import queue
import shlex
import signal
import socket
import subprocess
import sys
import tempfile
import threading
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from aka.evaluation.confine import ENV_GPU_UUID
from aka.evaluation.sandbox import PRIVATE_DEV, ResourceLimits, Sandbox

ENV_WARM_STEPS = "AKA_WARM_STEPS"
# The variables a Python process reads while importing torch, Triton and aka.harness (or that
# decide its module path): a warm parent serves only steps that agree with it on all of them.
IMPORT_TIME_ENV = ("PYTHONPATH", "TRITON_INTERPRET", "CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "PATH")
PRELOADED = ("torch", "triton", "triton.language", "numpy", "aka.harness", "aka.harness.runner")
MAX_MESSAGE = 1 << 20
MAX_FDS = 16
HIGH_FD = 1000
CLONE_NEWNS, CLONE_NEWPID, CLONE_NEWNET, CLONE_NEWUSER = 0x00020000, 0x20000000, 0x40000000, 0x10000000
CLONE_NEWIPC = 0x08000000
PR_SET_PDEATHSIG = 1
EXIT_SETUP_FAILED = 125
logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class StepSandbox:
    """What the exec path's prefix gives a step: namespaces (with a user namespace where aka is
    not root) and `confine`'s file system."""

    namespaces: bool = False
    user_namespace: bool = False
    confine: bool = False
    writable: tuple[str, ...] = ()
    host_dev: bool = False
    keep_admin: bool = False
    masked: tuple[str, ...] = ()  # the machine's bound Unix sockets, listed outside the step's namespace
    hidden: tuple[str, ...] = ()  # folders the step sees empty (`sandbox.hidden_from_steps`)
    view: tuple[str, ...] | None = None  # outside the system's folders, all it sees (`sandbox.step_view`)


@dataclass(frozen=True)
class ForkRequest:
    argv: list[str]  # the script and its arguments (no interpreter)
    cwd: str
    env: dict[str, str]
    fds: list[int]  # the numbers the passed descriptors get in the step (0, 1 and 2 first)
    sandbox: StepSandbox = StepSandbox()
    limits: ResourceLimits | None = None


def script_argv(command: str | Sequence[str]) -> list[str] | None:
    """`SCRIPT.py ARGS...` of a `python3 SCRIPT.py ARGS...` command; None for anything else."""
    try:
        argv = shlex.split(command) if isinstance(command, str) else list(command)
    except ValueError:
        return None
    if len(argv) < 2 or not Path(argv[0]).name.startswith("python") or not argv[1].endswith(".py"):
        return None
    return argv[1:]


# ---------------------------------------------------------------- the server (the warm parent)


def _libc() -> Any:
    import ctypes

    return ctypes.CDLL(None, use_errno=True)


def _check(result: int, what: str) -> None:
    if result != 0:
        import ctypes

        raise OSError(ctypes.get_errno(), f"{what}: {os.strerror(ctypes.get_errno())}")


def _place_fds(received: list[int], targets: list[int]) -> None:
    """Each received descriptor at its target number, every other descriptor closed."""
    import fcntl

    high = [fcntl.fcntl(fd, fcntl.F_DUPFD, HIGH_FD) for fd in received]
    for fd, target in zip(high, targets, strict=True):
        os.dup2(fd, target, inheritable=True)
    keep = sorted(set(targets))
    start = 0
    for fd in keep:
        if fd > start:  # never an empty range: closerange(0, 0) closes everything here
            os.closerange(start, fd)
        start = fd + 1
    os.closerange(start, 65536)


def _run_script(request: ForkRequest) -> None:
    """Become the step: environment, arguments, module path, then the script as `__main__`."""
    import runpy

    os.environ.clear()
    os.environ.update(request.env)
    script = request.argv[0]  # as the exec path gives it (relative to the working directory)
    sys.argv = list(request.argv)
    sys.path[0] = str(Path(request.cwd, script).resolve().parent)
    sys.dont_write_bytecode = bool(request.env.get("PYTHONDONTWRITEBYTECODE"))
    code = 0
    try:
        runpy.run_path(script, run_name="__main__")
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        if exc.code is not None and not isinstance(exc.code, int):
            print(exc.code, file=sys.stderr)
    except BaseException:
        import traceback

        traceback.print_exc()
        code = 1
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(code)


def _child(request: ForkRequest, received: list[int]) -> None:
    """In the forked child: never returns."""
    try:
        os.setsid()
        for sig in (signal.SIGCHLD, signal.SIGTERM, signal.SIGHUP):
            signal.signal(sig, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)  # as a fresh interpreter has it
        _place_fds(received, request.fds)
        _check(_libc().prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0), "prctl")
        os.chdir(request.cwd)
        if request.limits is not None:
            request.limits.apply()
        sandbox = request.sandbox
        if sandbox.namespaces:  # as `unshare [--user --map-root-user] --pid --net --ipc --fork --mount-proc ...`
            from aka.harness.spawn import first_process_of_namespace, map_root_user

            uid, gid = os.getuid(), os.getgid()
            user = CLONE_NEWUSER if sandbox.user_namespace else 0
            _check(_libc().unshare(CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWIPC | user), "unshare")
            if user:
                map_root_user(uid, gid)
            if not first_process_of_namespace():
                raise OSError("cannot mount a private /proc in the step's namespaces")
        if sandbox.confine:
            from aka.evaluation.confine import confine

            for warning in confine(
                list(sandbox.writable),
                sandbox.host_dev,
                sandbox.keep_admin,
                sandbox.masked,
                request.env.get(ENV_GPU_UUID),
                sandbox.hidden,
                sandbox.view,
            ):
                print(warning, file=sys.stderr)
            os.chdir(request.cwd)
    except BaseException as exc:  # the sandbox could not be had: fail closed, as the exec path does
        with contextlib.suppress(Exception):
            os.write(2, f"aka warm parent: cannot set up the step: {exc}\n".encode())
        os._exit(EXIT_SETUP_FAILED)
    _run_script(request)


def _receive(sock: socket.socket) -> tuple[dict[str, Any], list[int]] | None:
    fds = array.array("i")
    message, ancillary, _, _ = sock.recvmsg(MAX_MESSAGE, socket.CMSG_SPACE(MAX_FDS * fds.itemsize))
    if not message:
        return None
    for level, kind, data in ancillary:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds.frombytes(data[: len(data) - (len(data) % fds.itemsize)])
    return json.loads(message), list(fds)


def serve(sock: socket.socket) -> int:
    """Fork a step per request and report every child's end; when aka is gone, kill them all."""
    import select

    children: set[int] = set()
    try:
        while True:
            ready, _, _ = select.select([sock], [], [], 0.05)
            while children:  # reap, and say how each ended
                try:
                    pid, status = os.waitpid(-1, os.WNOHANG)
                except ChildProcessError:
                    break
                if not pid:
                    break
                children.discard(pid)
                sock.send(json.dumps({"exit": pid, "status": os.waitstatus_to_exitcode(status)}).encode())
            if not ready:
                continue
            got = _receive(sock)
            if got is None:
                return 0
            raw, received = got
            sandbox = raw.pop("sandbox")
            limits = raw.pop("limits")
            request = ForkRequest(
                **raw,
                sandbox=StepSandbox(
                    **{
                        **sandbox,
                        "writable": tuple(sandbox["writable"]),
                        "masked": tuple(sandbox["masked"]),
                        "hidden": tuple(sandbox["hidden"]),
                        "view": None if sandbox["view"] is None else tuple(sandbox["view"]),
                    }
                ),
                limits=ResourceLimits(**limits) if limits else None,
            )
            pid = os.fork()
            if pid == 0:
                sock.close()
                _child(request, received)
            for fd in received:
                os.close(fd)
            children.add(pid)
            sock.send(json.dumps({"pid": pid}).encode())
    except (BrokenPipeError, ConnectionResetError):
        return 0
    finally:
        for pid in children:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, signal.SIGKILL)


def main() -> int:
    fd = int(sys.argv[1])
    sock = socket.socket(fileno=fd)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches aka; it closes the socket
    for name in PRELOADED:
        with contextlib.suppress(Exception):
            __import__(name)
    sock.send(b'{"ready": true}')
    return serve(sock)


# ---------------------------------------------------------------- the client (in aka)


class ForkedProcess:
    """A step forked by the warm parent, with the part of `subprocess.Popen` aka uses."""

    def __init__(self, pid: int, stdin: int) -> None:
        self.pid: int = pid
        self.returncode: int | None = None
        self.stdin = os.fdopen(stdin, "wb")
        self._ended = threading.Event()

    def _exited(self, status: int) -> None:
        self.returncode = status
        self._ended.set()

    def poll(self) -> int | None:
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if not self._ended.wait(timeout):
            raise subprocess.TimeoutExpired(str(self.pid), timeout or 0.0)
        assert self.returncode is not None
        return self.returncode

    def communicate(self, input: bytes | None = None, timeout: float | None = None) -> tuple[None, None]:
        if not self.stdin.closed:
            with contextlib.suppress(BrokenPipeError):
                if input:
                    self.stdin.write(input)
                self.stdin.close()
        self.wait(timeout)
        return None, None

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.pid, signal.SIGKILL)


def parent_environment(env: Mapping[str, str]) -> dict[str, str]:
    """The warm parent's own environment: the host's part that steps get and the import-time
    variables, never one step's own (its task, scratch folders, cache paths). A forked step sets its
    environment in `os.environ`, but `/proc/self/environ` still shows the parent's: started with the
    first step's, it told every later candidate that step's task and Triton cache (red team D)."""
    from aka.evaluation.step_spec import host_environment

    own = host_environment()
    own.update({name: env[name] for name in IMPORT_TIME_ENV if name in env})
    return own


class WarmParent:
    """One warm parent (per import-time environment) of this aka process."""

    _started: dict[tuple[str, ...], WarmParent | None] = {}
    _lock = threading.Lock()

    def __init__(self, env: Mapping[str, str]) -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.sock = ours
        self.server = subprocess.Popen(
            [sys.executable, "-m", "aka.evaluation.warm_parent", str(theirs.fileno())],
            env=dict(env),
            pass_fds=(theirs.fileno(),),
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        theirs.close()
        ready = self.sock.recv(MAX_MESSAGE)
        if not ready:
            raise OSError("the warm parent exited while starting")
        self.replies: queue.Queue[int] = queue.Queue()
        self.processes: dict[int, ForkedProcess] = {}
        self.early: dict[int, int] = {}  # exits reported before their pid was registered
        self.send_lock, self.state_lock = threading.Lock(), threading.Lock()
        self.alive = True
        self.reply_timeout_s = 60.0
        self.sandboxes: dict[tuple[bool, ...], bool] = {}  # sandbox shape -> a probe step ran in it
        threading.Thread(target=self._read, name="aka-warm-parent", daemon=True).start()

    @classmethod
    def for_env(cls, env: Mapping[str, str]) -> WarmParent | None:
        """The warm parent for steps with this environment; None where steps are exec'd
        (`AKA_WARM_STEPS=0`)."""
        if os.environ.get(ENV_WARM_STEPS) == "0":
            return None
        key = tuple(env.get(name, "") for name in IMPORT_TIME_ENV)
        with cls._lock:
            if key not in cls._started or not (cls._started[key] and cls._started[key].alive):  # type: ignore[union-attr]
                try:
                    cls._started[key] = cls(parent_environment(env))
                except OSError as exc:
                    logger.warning("steps are exec'd: the warm parent did not start (%s)", exc)
                    cls._started[key] = None
            return cls._started[key]

    def _read(self) -> None:
        while True:
            try:
                message = self.sock.recv(MAX_MESSAGE)
            except OSError:
                message = b""
            if not message:
                self.alive = False
                with self.state_lock:
                    orphans = list(self.processes.values())
                for process in orphans:
                    process._exited(-signal.SIGKILL)  # its parent is gone, and it with it
                self.replies.put(-1)
                return
            reply = json.loads(message)
            if "pid" in reply:
                self.replies.put(int(reply["pid"]))
                continue
            pid, status = int(reply["exit"]), int(reply["status"])
            with self.state_lock:
                ended = self.processes.pop(pid, None)
                if ended is None:
                    self.early[pid] = status
            if ended is not None:
                ended._exited(status)

    def can_sandbox(self, sandbox: StepSandbox, env: Mapping[str, str]) -> bool:
        """Whether a step forked into this shape of sandbox runs here (probed once per shape with
        a script that only exits): where it does not, steps are exec'd, never run with less."""
        shape: tuple[bool, ...] = (sandbox.namespaces, sandbox.user_namespace, sandbox.confine, sandbox.host_dev)
        shape += (sandbox.keep_admin, sandbox.view is not None)
        if shape not in self.sandboxes:
            with tempfile.TemporaryDirectory(prefix="aka-warm-probe-") as folder:
                Path(folder, "probe.py").write_text("raise SystemExit(0)\n")
                probe = replace(sandbox, writable=(folder,), masked=(), hidden=())
                with open(Path(folder, "log"), "wb") as log:
                    try:
                        process = self.start(["probe.py"], Path(folder), env, log.fileno(), [], probe, None)
                        process.communicate(None, timeout=60)
                        ok = process.returncode == 0
                    except (OSError, subprocess.TimeoutExpired):
                        ok = False
                if not ok:
                    why = Path(folder, "log").read_text(errors="replace").strip()[-300:]
                    logger.warning("steps are exec'd: a step forked into the sandbox did not run (%s)", why)
            self.sandboxes[shape] = ok
        return self.sandboxes[shape]

    def start(
        self,
        argv: list[str],
        cwd: Path,
        env: Mapping[str, str],
        log_fd: int,
        pass_fds: Sequence[int],
        sandbox: StepSandbox,
        limits: ResourceLimits | None,
    ) -> ForkedProcess:
        """Fork a step: `argv` is the script and its arguments; its standard input is a pipe
        (the returned process's `stdin`), its standard output and error `log_fd`."""
        stdin_read, stdin_write = os.pipe()
        fds = [stdin_read, log_fd, log_fd, *pass_fds]
        request = {
            "argv": argv,
            "cwd": str(cwd),
            "env": dict(env),
            "fds": [0, 1, 2, *pass_fds],
            "sandbox": asdict(sandbox),
            "limits": asdict(limits) if limits else None,
        }
        try:
            with self.send_lock:
                self.sock.sendmsg(
                    [json.dumps(request).encode()],
                    [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds).tobytes())],
                )
                try:
                    pid = self.replies.get(timeout=self.reply_timeout_s)
                except queue.Empty:  # stopped or stuck: it serves no more steps, and none of its own survive
                    self.alive = False
                    self.server.kill()
                    raise OSError("the warm parent did not answer") from None
                if pid < 0:
                    raise OSError("the warm parent is gone")
                process = ForkedProcess(pid, stdin_write)
                with self.state_lock:
                    status = self.early.pop(pid, None)
                    if status is None:
                        self.processes[pid] = process
                if status is not None:
                    process._exited(status)
        except BaseException:
            os.close(stdin_write)
            raise
        finally:
            os.close(stdin_read)
        return process


def step_sandbox(
    sandbox: Sandbox, writable: Sequence[str | Path], keep_admin: bool, concealed: Sequence[str] = ()
) -> StepSandbox:
    """The in-child equivalent of `sandbox.wrap(argv, writable, keep_admin, concealed)`."""
    masked, hidden, view = sandbox.out_of_reach(concealed) if sandbox.confines else ([], [], None)
    return StepSandbox(
        namespaces=bool(sandbox.prefix),
        user_namespace="--user" in sandbox.prefix,
        confine=sandbox.confines,
        writable=tuple(str(p) for p in writable if os.path.exists(p)),
        host_dev=PRIVATE_DEV not in sandbox.features,
        keep_admin=keep_admin,
        masked=tuple(masked),
        hidden=tuple(hidden),
        view=None if view is None else tuple(view),
    )


if __name__ == "__main__":
    raise SystemExit(main())
