"""The warm parent (`aka.evaluation.warm_parent`): steps forked from a process that imported torch
once get what an exec'd step gets (arguments, environment, descriptors, exit status, sandbox), and
die with aka. The evaluator's own tests (exploits, candidate faults, isolation) run through it too,
since it is on by default on the CPU."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from aka.evaluation.sandbox import NARROWED, ResourceLimits, detect_sandbox, step_limits
from aka.evaluation.step_process import _warm_fork
from aka.evaluation.warm_parent import (
    ENV_WARM_STEPS,
    ForkedProcess,
    StepSandbox,
    WarmParent,
    parent_environment,
    script_argv,
    step_sandbox,
)
from aka.process import StartedCommand

PROBE = """
import os, socket, sys
out = os.fdopen(int(sys.argv[2]), "w")
print("argv", sys.argv[1], file=out)
print("env", os.environ.get("AKA_TEST_VALUE"), file=out)
print("procenv", b"AKA_TEST_VALUE" in open("/proc/self/environ", "rb").read(), file=out)
print("stdin", sys.stdin.read().strip(), file=out)
print("torch", "torch" in sys.modules, file=out)
print("pid", os.getpid(), file=out)
for path in (sys.argv[3], sys.argv[4]):
    try:
        open(os.path.join(path, "written"), "w").write("x")
        print("write", path, "ok", file=out)
    except OSError as exc:
        print("write", path, type(exc).__name__, file=out)
try:
    socket.create_connection(("127.0.0.1", 9), timeout=1)
    print("network", "reached", file=out)
except OSError as exc:
    print("network", type(exc).__name__, file=out)
try:
    with socket.socket(socket.AF_UNIX) as client:
        client.connect(os.environ["AKA_TEST_SOCKET"])
        print("unix", "reached", file=out)
except OSError as exc:
    print("unix", type(exc).__name__, file=out)
try:
    print("locks", sorted(os.listdir(os.environ["AKA_DEVICE_LOCK_DIR"])), file=out)
except OSError as exc:
    print("locks", type(exc).__name__, file=out)
try:
    print("heldout", repr(open(os.environ["AKA_TEST_HELDOUT"]).read()), file=out)
except OSError as exc:
    print("heldout", type(exc).__name__, file=out)
print("beside", os.path.exists(os.path.join(os.path.dirname(sys.argv[3]), "beside.txt")), file=out)
print("printed to the log")
out.close()
raise SystemExit(3)
"""


def _host_service(path: Path) -> socket.socket:
    """A service's socket file on this machine (as a Docker daemon's): bound before the step's
    sandbox is described, as the machine's services are."""
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(path))
    server.listen()
    return server


def _run(tmp_path: Path, sandbox: StepSandbox) -> tuple[int | None, dict[str, str], str]:
    work, outside = tmp_path / "work", tmp_path / "outside"
    work.mkdir()
    outside.mkdir()
    (work / "probe.py").write_text(PROBE)
    (tmp_path / "beside.txt").write_text("another evaluation's file\n")
    env = {**os.environ, "AKA_TEST_VALUE": "seen", "AKA_TEST_SOCKET": str(tmp_path / "host.sock")}
    env["AKA_DEVICE_LOCK_DIR"] = str(tmp_path / "locks")
    env["AKA_TEST_HELDOUT"] = str(tmp_path / "heldout.py")
    parent = WarmParent.for_env(env)
    assert parent is not None
    read, write = os.pipe()
    log_path = tmp_path / "log"
    sandbox = StepSandbox(**{**sandbox.__dict__, "writable": (str(work),)}) if sandbox.confine else sandbox
    with log_path.open("wb") as log:
        process = parent.start(
            ["probe.py", "first", str(write), str(work), str(outside)],
            work,
            env,
            log.fileno(),
            [write],
            sandbox,
            ResourceLimits(60, None, None),
        )
    os.close(write)
    process.communicate(b"the-token\n", timeout=60)
    with os.fdopen(read) as handle:
        lines = dict(line.split(" ", 1) for line in handle.read().splitlines())
    return process.returncode, lines, log_path.read_text()


def _locks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The machine's device locks (one GPU's lock file) in a folder of the test's."""
    (tmp_path / "locks").mkdir()
    (tmp_path / "locks" / "GPU-x.lock").write_text("")
    monkeypatch.setenv("AKA_DEVICE_LOCK_DIR", str(tmp_path / "locks"))
    (tmp_path / "heldout.py").write_text("CASES = ['secret']\n")


def test_a_forked_step_gets_its_arguments_environment_descriptors_and_exit_status(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _locks(tmp_path, monkeypatch)
    with _host_service(tmp_path / "host.sock"):
        status, seen, log = _run(tmp_path, StepSandbox())
    assert status == 3
    assert seen["unix"] == "reached", "unsandboxed, the machine's socket files are reachable"
    assert seen["locks"] == "['GPU-x.lock']", "unsandboxed, the machine's device locks are in reach"
    assert seen["heldout"] == repr("CASES = ['secret']\n")
    assert seen["argv"] == "first" and seen["env"] == "seen" and seen["stdin"] == "the-token"
    # /proc/self/environ is the warm parent's, which never holds a step's own variables: started
    # with the first step's, it showed later candidates that step's task and Triton cache
    assert seen["procenv"] == "False"
    assert seen["torch"] == "True", "the warm parent imported torch before forking"
    assert "printed to the log" in log


@pytest.mark.skipif(not detect_sandbox().confines, reason="no namespaces and read-only file system on this machine")
def test_a_forked_step_gets_the_sandbox_an_exec_step_gets(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """PID namespace (it is process 1), no network, read-only file system but its writable path,
    the machine's socket files masked, its device locks hidden; where the machine allows it, only
    the step's view outside the system's folders (nothing beside its writable folder)."""
    _locks(tmp_path, monkeypatch)
    narrowed = NARROWED in detect_sandbox().features
    with _host_service(tmp_path / "host.sock"):
        sandbox = step_sandbox(detect_sandbox(), [], keep_admin=False, concealed=[str(tmp_path / "heldout.py")])
        assert str(tmp_path / "host.sock") in sandbox.masked
        assert sandbox.hidden == (str(tmp_path / "locks"),)
        assert (sandbox.view is not None) == narrowed
        status, seen, _ = _run(tmp_path, sandbox)
    assert status == 3
    assert seen["pid"] == "1"
    assert (tmp_path / "work" / "written").is_file()
    assert not (tmp_path / "outside" / "written").exists()
    assert seen["network"] != "reached"
    gone = "FileNotFoundError"  # narrowed: not there at all
    assert seen["unix"] == (gone if narrowed else "ConnectionRefusedError"), "the socket file is /dev/null in the step"
    assert seen["locks"] == (gone if narrowed else "[]"), "the device locks are out of the step's reach"
    assert seen["heldout"] == (gone if narrowed else "''"), "the suite's held-out cases read empty"
    assert seen["beside"] == str(not narrowed), "what lies beside its writable folder"


CLIENT = """
import os, sys, time
from pathlib import Path
from aka.evaluation.warm_parent import StepSandbox, WarmParent
work = Path(sys.argv[1])
parent = WarmParent.for_env(dict(os.environ))
log = os.open(work / "log", os.O_WRONLY | os.O_CREAT)
parent.start(["sleeper.py"], work, dict(os.environ), log, [], StepSandbox(), None)
print(parent.server.pid, flush=True)
time.sleep(600)
"""
# The pid file appears whole (written, then renamed), so the test never reads it half-written.
SLEEPER = (
    "import os, time\nopen('pid.tmp', 'w').write(str(os.getpid()))\nos.rename('pid.tmp', 'pid')\ntime.sleep(600)\n"
)


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split(") ")[-1][0]
    except OSError:
        return False
    return state != "Z"


def test_killing_aka_kills_its_warm_parent_and_every_step_it_forked(tmp_path: Path) -> None:
    (tmp_path / "sleeper.py").write_text(SLEEPER)
    client = subprocess.Popen(
        [sys.executable, "-c", CLIENT, str(tmp_path)], stdout=subprocess.PIPE, text=True, start_new_session=True
    )
    assert client.stdout is not None
    server = int(client.stdout.readline())
    deadline = time.monotonic() + 60
    while not (tmp_path / "pid").is_file() and time.monotonic() < deadline:
        time.sleep(0.1)
    step = int((tmp_path / "pid").read_text())
    assert _alive(server) and _alive(step)
    os.kill(client.pid, signal.SIGKILL)
    client.wait()
    deadline = time.monotonic() + 20
    while (_alive(server) or _alive(step)) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _alive(step), "the step outlived aka"
    assert not _alive(server), "the warm parent outlived aka"


def test_the_warm_parent_starts_with_no_steps_own_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MY_REWARD_TOKEN", "s3cr3t")
    step = {
        **os.environ,
        "AKA_STEP": "compile",
        "AKA_TASK_FAMILY": "torch2triton",
        "TRITON_CACHE_DIR": "/scratch/triton-0123456789abcdef",
        "TMPDIR": "/scratch/tmp-compile-x",
        "TRITON_INTERPRET": "1",
        "CUDA_VISIBLE_DEVICES": "",
    }
    own = parent_environment(step)
    assert not {"AKA_STEP", "AKA_TASK_FAMILY", "TRITON_CACHE_DIR", "TMPDIR", "MY_REWARD_TOKEN"} & set(own)
    assert own["TRITON_INTERPRET"] == "1" and own["CUDA_VISIBLE_DEVICES"] == ""  # what imports read


def test_which_steps_are_forked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """aka.harness scripts by default; never another command; none with AKA_WARM_STEPS=0."""
    (tmp_path / "harness.py").write_text("run_task(TASK)\n")
    assert script_argv("python3 harness.py compile") == ["harness.py", "compile"]
    assert script_argv("bash run.sh") is None
    limits = step_limits(60, on_gpu=False)
    args = (tmp_path, dict(os.environ), [0], [tmp_path], limits)
    monkeypatch.delenv(ENV_WARM_STEPS, raising=False)
    assert _warm_fork("python3 harness.py compile", *args) is not None
    assert _warm_fork("bash run.sh", *args) is None
    monkeypatch.setenv(ENV_WARM_STEPS, "0")
    assert _warm_fork("python3 harness.py compile", *args) is None


def test_a_dead_warm_parent_is_replaced_and_a_failed_fork_is_execd(tmp_path: Path) -> None:
    env = dict(os.environ)
    first = WarmParent.for_env(env)
    assert first is not None
    first.server.kill()
    first.server.wait()
    deadline = time.monotonic() + 10
    while first.alive and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not first.alive
    second = WarmParent.for_env(env)
    assert second is not None and second is not first and second.alive

    def gone(log_fd: int) -> ForkedProcess:
        raise OSError("the warm parent is gone")

    log = tmp_path / "log"
    ran = StartedCommand("echo exec-path", tmp_path, env, log, fork=gone).finish(None, 30)
    assert ran.exit_code == 0
    assert "exec'd instead" in log.read_text() and "exec-path" in log.read_text()


def test_a_sandbox_a_forked_step_cannot_get_means_exec(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The machine's own sandbox is probed once and passes; a shape that fails here (the fork
    refused) makes `_warm_fork` return None, so such steps are exec'd with the full sandbox."""
    env = dict(os.environ)
    parent = WarmParent.for_env(env)
    assert parent is not None
    machine = step_sandbox(detect_sandbox(), [tmp_path], keep_admin=True)
    assert parent.can_sandbox(machine, env)
    shape = (
        machine.namespaces,
        machine.user_namespace,
        machine.confine,
        machine.host_dev,
        True,
        machine.view is not None,
    )
    assert parent.sandboxes[shape]

    def refused(*args: object, **kwargs: object) -> ForkedProcess:
        raise OSError("no")

    monkeypatch.setattr(parent, "start", refused)
    parent.sandboxes.clear()
    assert not parent.can_sandbox(machine, env)
    (tmp_path / "harness.py").write_text("run_task(TASK)\n")
    limits = step_limits(60, on_gpu=False)
    assert _warm_fork("python3 harness.py compile", tmp_path, env, [0], [tmp_path], limits) is None
    parent.sandboxes.clear()  # the next test gets a real probe


def test_a_stopped_warm_parent_is_killed_and_its_steps_are_execd(tmp_path: Path) -> None:
    """Where a candidate could reach it (no PID namespace), stopping the warm parent must not
    stall evaluations: a request it does not answer kills it, the step is exec'd, and the next
    step gets a new warm parent."""
    env = dict(os.environ)
    parent = WarmParent.for_env(env)
    assert parent is not None
    parent.reply_timeout_s = 1.0
    os.kill(parent.server.pid, signal.SIGSTOP)
    log = tmp_path / "log"
    fork = lambda log_fd: parent.start(["x.py"], tmp_path, env, log_fd, [], StepSandbox(), None)  # noqa: E731
    ran = StartedCommand("echo exec-path", tmp_path, env, log, fork=fork).finish(None, 30)
    assert ran.exit_code == 0 and "did not answer" in log.read_text() and "exec-path" in log.read_text()
    assert parent.server.wait(timeout=10) == -signal.SIGKILL and not parent.alive
    replacement = WarmParent.for_env(env)
    assert replacement is not None and replacement is not parent and replacement.alive
