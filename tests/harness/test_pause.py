"""Pausing a worker stops every process its code started, also one that left the worker's process
group (`setsid`) and lost its parent; closing the worker ends them.

The judge's side runs in a child interpreter: it makes its process adopt orphans
(`PR_SET_CHILD_SUBREAPER`), which pytest's own process must not become.
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
from pathlib import Path

import pytest

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
side.setup(home / "task", "harness.py", "escapes", "cpu", False, [], [], [], 120.0)
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
side.setup(home / "task", "harness.py", "escapes", "cpu", False, [], [], [], 120.0)
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
