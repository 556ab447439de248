"""Pausing a worker stops every process its code started, also one that left the worker's process
group (`setsid`) and lost its parent; closing the worker ends them.

The judge's side runs in a child interpreter: it makes its process adopt orphans
(`PR_SET_CHILD_SUBREAPER`), which pytest's own process must not become.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from exploits.catalog import SIGCONT_TIMERS

from aka.harness.spawn import namespaces_work

REPO = Path(__file__).resolve().parents[2]


# At import, like any candidate code: a shell in the background that starts `sleep` in a session of
# its own and exits, leaving it an orphan outside the worker's process group.
def _harness(at_import: str) -> str:
    """A task's harness.py that runs `at_import` when the worker imports it, as candidate code would."""
    return (
        at_import
        + """
from aka.harness import Case, KernelTask, candidate_function

TASK = KernelTask(
    name="escapes",
    cases=[Case.make(n=1)],
    make_inputs=lambda case, generator, device: (),
    reference=lambda: None,
    load_candidate=candidate_function("kernel", "f"),
)
"""
    )


HARNESS = _harness("""
import subprocess

subprocess.run(["sh", "-c", "setsid sleep MARK </dev/null >/dev/null 2>&1 &"], check=True)
""")

JUDGE = """
import json, os, sys, time
from pathlib import Path
from aka.harness.remote import RemoteSide, adopt_orphans

def escaped():
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            if cmdline.read_bytes().split(b"\\0")[:2] == [b"sleep", sys.argv[2].encode()]:
                return int(cmdline.parent.name)
        except OSError:
            pass
    return None

def state(pid, settles_to=None):
    # a signal takes effect when its process is next scheduled (on a loaded machine, not at once):
    # `settles_to` waits up to 5 s for one of those states
    deadline = time.monotonic() + 5
    while True:
        try:
            now = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            now = "gone"
        if settles_to is None or now in settles_to or time.monotonic() > deadline:
            return now
        time.sleep(0.01)

home = Path(sys.argv[1])
adopt_orphans()
side = RemoteSide("candidate", "cpu", home / "home", None, dict(os.environ))
side.setup(home / "task", "harness.py", "escapes", "cpu", "off", [], [], [], 120.0)
deadline = time.monotonic() + 30
while (pid := escaped()) is None and time.monotonic() < deadline:
    time.sleep(0.05)
seen = {"escaped_group": os.getpgid(pid) != side.process.pid, "isolated": side.isolated}
side.pause()
seen["paused"] = state(pid, "Tt")
side.resume()
seen["resumed"] = state(pid, "SR")
side.close()
seen["closed"] = state(pid, ("gone", "Z"))
print(json.dumps(seen))
"""


@pytest.mark.parametrize("namespaces", [True, False], ids=["worker-namespaces", "judges-namespaces"])
def test_pausing_stops_a_process_that_left_the_workers_group(tmp_path: Path, namespaces: bool) -> None:
    if namespaces and not namespaces_work():
        pytest.skip("no nested namespaces for a worker here")
    (tmp_path / "task").mkdir()
    # the escaped sleep's argument, unique to this test run: how it is found among the machine's processes
    mark = f"{secrets.randbelow(10**6) + 10**6}.5"
    (tmp_path / "task" / "harness.py").write_text(HARNESS.replace("MARK", mark))
    (tmp_path / "home").mkdir()
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    env.pop("AKA_NO_WORKER_SANDBOX", None)
    if not namespaces:
        env["AKA_NO_WORKER_SANDBOX"] = "1"
    try:
        done = subprocess.run(
            [sys.executable, "-c", JUDGE, str(tmp_path), mark],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    finally:  # where the judge failed before closing its worker, nothing of it is left running
        subprocess.run(["pkill", "-KILL", "-f", f"sleep {mark}"], check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["escaped_group"], seen  # the candidate's process really left the worker's group
    assert seen["isolated"] is namespaces, seen  # each way of running a worker is the one tested
    assert seen["paused"] in ("T", "t"), seen
    assert seen["resumed"] not in ("T", "t", "gone"), seen
    assert seen["closed"] in ("gone", "Z"), seen


# At import: a chain of processes in the worker's own group, each forking the next and exiting at
# once, so that a walk of the tree always finds the one it looks for gone.
CHAIN = _harness("""
import os, subprocess, sys

CODE = "import os\\nwhile True:\\n    open('chain.log', 'a').write('x')\\n    if os.fork():\\n        os._exit(0)\\n"
subprocess.Popen([sys.executable, "-c", CODE], stdin=subprocess.DEVNULL)
""")

CHAIN_JUDGE = """
import json, os, sys, time
from pathlib import Path
from aka.harness.remote import RemoteSide, adopt_orphans

home = Path(sys.argv[1])
adopt_orphans()
side = RemoteSide("candidate", "cpu", home / "home", None, dict(os.environ))
side.setup(home / "task", "harness.py", "escapes", "cpu", "off", [], [], [], 120.0)
log = side.directory / "chain.log"
deadline = time.monotonic() + 30
while (not log.exists() or log.stat().st_size < 100) and time.monotonic() < deadline:
    time.sleep(0.05)
side.pause()
time.sleep(0.2)
before = log.stat().st_size
time.sleep(0.5)
grew_paused = log.stat().st_size - before
side.resume()
time.sleep(0.3)
grew_resumed = log.stat().st_size - before - grew_paused
side.close()
print(json.dumps({"paused": grew_paused, "resumed": grew_resumed}))
"""


def test_pausing_stops_a_fork_chain_in_the_workers_group(tmp_path: Path) -> None:
    (tmp_path / "task").mkdir()
    (tmp_path / "task" / "harness.py").write_text(CHAIN)
    (tmp_path / "home").mkdir()
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    done = subprocess.run(
        [sys.executable, "-c", CHAIN_JUDGE, str(tmp_path)], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-3000:]
    grew = json.loads(done.stdout.strip().splitlines()[-1])
    assert grew["paused"] == 0 and grew["resumed"] > 0, grew  # stopped while paused, and only then


# Candidate code that keeps running while its worker is paused, three ways. Each writes to
# `dodge.log` every millisecond it runs, and "refused" where the kernel would not let it.
_DODGE_PRELUDE = """
import ctypes, os, signal, subprocess, sys, threading, time
libc = ctypes.CDLL(None, use_errno=True)
log = sys.argv[1]
def say(text):
    with open(log, "a") as out:
        out.write(text)
def run_on():
    while True:
        say("x")
        time.sleep(0.001)
"""
DODGERS = {
    # two helpers that trace each other and swallow every stop signal the other receives; 200
    # processes between them in the walk of the tree, so that each resumes the other in turn
    "tracers": _DODGE_PRELUDE
    + """
libc.ptrace.restype = ctypes.c_long
libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
os.setsid()
spacers = [subprocess.Popen(["sleep", "MARK"]) for _ in range(200)]
parent = os.getpid()
child = os.fork()
other = child or parent
if libc.ptrace(0x4206, other, None, None) != 0:  # PTRACE_SEIZE
    say(f"refused {os.strerror(ctypes.get_errno())}\\n")
    run_on()
threading.Thread(target=run_on, daemon=True).start()
while True:
    _, status = os.waitpid(other, 0x40000000)  # __WALL
    if os.WIFSTOPPED(status):
        sig = os.WSTOPSIG(status)
        stop = sig in (signal.SIGSTOP, signal.SIGTSTP, signal.SIGTTIN, signal.SIGTTOU)
        libc.ptrace(7, other, None, ctypes.c_void_p(0 if stop else sig))  # PTRACE_CONT
""",
    # two helpers that send each other SIGCONT without pause
    "relay": _DODGE_PRELUDE
    + """
os.setsid()
spacers = [subprocess.Popen(["sleep", "MARK"]) for _ in range(200)]
parent = os.getpid()
other = os.fork() or parent
def relay():
    while True:
        try:
            os.kill(other, signal.SIGCONT)
        except OSError as exc:
            say(f"refused {exc}\\n")
            return
threading.Thread(target=relay, daemon=True).start()
run_on()
""",
    # one process whose POSIX timers send it SIGCONT every millisecond: the kernel sends it, no
    # system call of the process's at the time of the stop (a handled SIGCONT keeps a timer armed;
    # a stop discards a SIGCONT still pending, which stalls its timer: four of them, re-armed
    # whenever it runs, in a session of its own, out of reach of the pause's second stop, to the
    # worker's group: so it continued itself every time, under load too)
    "timer": _DODGE_PRELUDE + "os.setsid()\n" + SIGCONT_TIMERS + "_continue_by_timers()\nrun_on()\n",
}

DODGE_JUDGE = """
import json, os, sys, time
from pathlib import Path
from aka.harness import syscall_filter
from aka.harness.link import WorkerFailure
from aka.harness.remote import RemoteSide, adopt_orphans

home = Path(sys.argv[1])
adopt_orphans()
side = RemoteSide("candidate", "cpu", home / "home", None, dict(os.environ))
side.setup(home / "task", "harness.py", "escapes", "cpu", "off", [], [], [], 120.0)
log = side.directory / "dodge.log"
deadline = time.monotonic() + 60
while (not log.exists() or log.stat().st_size < 100) and time.monotonic() < deadline:
    time.sleep(0.05)
side.pause()
before = log.stat().st_size
time.sleep(0.5)
seen = {"grew": log.stat().st_size - before, "filtered": syscall_filter.filtered(side.process.pid)}
try:
    side.stayed_paused()
    seen["failure"] = None
except WorkerFailure as failure:
    seen["failure"] = [failure.kind, str(failure)]
seen["log"] = log.read_text()[:200]
side.close()
print(json.dumps(seen))
"""


@pytest.mark.parametrize("dodger", sorted(DODGERS))
@pytest.mark.parametrize("namespaces", [True, False], ids=["worker-namespaces", "judges-namespaces"])
def test_a_worker_that_runs_on_while_paused_is_stopped_or_caught(tmp_path: Path, dodger: str, namespaces: bool) -> None:
    """No candidate code runs while its worker is paused unseen: the system call filter refuses the
    tracers' and the relay's calls (so the pause holds), and the judge catches the timer's process
    running by its CPU clock (`aka.stillness`): tampering. Without the filter and the clocks
    all three ran on through the pause, in both kinds of worker (session 43, on this machine)."""
    if namespaces and not namespaces_work():
        pytest.skip("no nested namespaces for a worker here")
    mark = f"{secrets.randbelow(10**6) + 10**6}.25"
    (tmp_path / "task").mkdir()
    (tmp_path / "task" / "dodger.py").write_text(DODGERS[dodger].replace("MARK", mark))
    (tmp_path / "task" / "harness.py").write_text(
        _harness(
            "import subprocess, sys\n"
            f"subprocess.Popen([sys.executable, 'dodger.py', 'dodge.log', '{mark}'], stdin=subprocess.DEVNULL)\n"
        )
    )
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    env.pop("AKA_NO_WORKER_SANDBOX", None)
    if not namespaces:
        env["AKA_NO_WORKER_SANDBOX"] = "1"
    # The timer's dodge can itself stall under load (all its timers' SIGCONTs discarded by stops):
    # then it ran no more than an honest worker, and it is tried again (three times at most).
    for _ in range(3 if dodger == "timer" else 1):
        home = tmp_path / "home"
        shutil.rmtree(home, ignore_errors=True)
        home.mkdir()
        try:
            done = subprocess.run(
                [sys.executable, "-c", DODGE_JUDGE, str(tmp_path)],
                env=env,
                capture_output=True,
                text=True,
                timeout=180,
                check=False,
            )
        finally:
            subprocess.run(["pkill", "-KILL", "-f", f"sleep {mark}"], check=False)
            subprocess.run(["pkill", "-KILL", "-f", f"dodger.py dodge.log {mark}"], check=False)  # this test's only
        assert done.returncode == 0, done.stderr[-3000:]
        seen = json.loads(done.stdout.strip().splitlines()[-1])
        assert seen["grew"] == 0 or seen["failure"] is not None, seen  # it never ran on unseen
        if seen["failure"] is not None:
            break
    assert seen["filtered"], seen
    if dodger == "timer":  # no system call at the time of the stop: caught by its clock
        assert seen["failure"] is not None and seen["failure"][0] == "tampering", seen
        assert "while it was paused" in seen["failure"][1] or "did not stop" in seen["failure"][1], seen
    else:  # refused by the filter: the pause held, and nothing is charged
        assert seen["log"].startswith("refused") or "refused [Errno 1]" in seen["log"], seen
        assert seen["grew"] == 0 and seen["failure"] is None, seen
