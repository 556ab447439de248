"""The device lock across real processes: shared holders together, an exclusive one alone, a
waiting exclusive holder ahead of later shared ones, and a killed holder's lock released."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from exploits.catalog import SIGCONT_TIMERS

from aka.device import DeviceInfo
from aka.errors import ConfigError
from aka.evaluation import device_lock
from aka.evaluation.device_lock import ENV_LOCK_DIR, DeviceLock, device_key, device_turn
from aka.process import CommandOutcome, StartedCommand

SRC = Path(__file__).resolve().parents[2] / "src"
H200 = DeviceInfo("cuda", "H200", "NVIDIA H200", "sm_90", 1, uuid="GPU-1234/abcd")

HOLDER = """
import sys, time
from aka.evaluation.device_lock import DeviceLock
from pathlib import Path
lock = DeviceLock("dev", Path(sys.argv[1]))
with lock.hold(exclusive=sys.argv[2] == "x"):
    with open(sys.argv[3], "a") as log:
        log.write(f"{sys.argv[4]} in {time.monotonic():.3f}\\n")
    time.sleep(float(sys.argv[5]))
    with open(sys.argv[3], "a") as log:
        log.write(f"{sys.argv[4]} out {time.monotonic():.3f}\\n")
"""


def _holder(tmp_path: Path, mode: str, name: str, seconds: float) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(tmp_path), mode, str(tmp_path / "log"), name, str(seconds)],
        env={**os.environ, "PYTHONPATH": str(SRC)},
    )


def _intervals(tmp_path: Path) -> dict[str, tuple[float, float]]:
    spans: dict[str, list[float]] = {}
    for line in (tmp_path / "log").read_text().splitlines():
        name, _, stamp = line.split()
        spans.setdefault(name, []).append(float(stamp))
    return {name: (times[0], times[1]) for name, times in spans.items()}


def _overlap(a: tuple[float, float], b: tuple[float, float]) -> bool:
    return a[0] < b[1] and b[0] < a[1]


def _wait_for(tmp_path: Path, text: str, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if (tmp_path / "log").is_file() and text in (tmp_path / "log").read_text():
            return
        time.sleep(0.02)
    raise AssertionError(f"{text!r} never logged")


def test_shared_holders_overlap(tmp_path: Path) -> None:
    first = _holder(tmp_path, "s", "s1", 1.0)
    _wait_for(tmp_path, "s1 in")
    second = _holder(tmp_path, "s", "s2", 0.2)
    for process in (first, second):
        assert process.wait(timeout=30) == 0
    spans = _intervals(tmp_path)
    assert _overlap(spans["s1"], spans["s2"])


def test_an_exclusive_holder_runs_alone(tmp_path: Path) -> None:
    holders = [
        _holder(tmp_path, "s", "s1", 0.6),
        _holder(tmp_path, "x", "x1", 0.6),
        _holder(tmp_path, "s", "s2", 0.6),
        _holder(tmp_path, "x", "x2", 0.3),
    ]
    for process in holders:
        assert process.wait(timeout=30) == 0
    spans = _intervals(tmp_path)
    for writer in ("x1", "x2"):
        assert not any(_overlap(spans[writer], spans[other]) for other in spans if other != writer)


def test_a_waiting_exclusive_holder_goes_before_later_shared_ones(tmp_path: Path) -> None:
    reader = _holder(tmp_path, "s", "s1", 1.5)
    _wait_for(tmp_path, "s1 in")
    writer = _holder(tmp_path, "x", "x1", 0.3)
    time.sleep(0.5)  # the writer now waits at the lock, holding the turnstile
    late = _holder(tmp_path, "s", "s2", 0.1)
    for process in (reader, writer, late):
        assert process.wait(timeout=30) == 0
    spans = _intervals(tmp_path)
    assert spans["s1"][1] <= spans["x1"][0] <= spans["x1"][1] <= spans["s2"][0]


def test_a_killed_holder_releases_the_device(tmp_path: Path) -> None:
    stuck = _holder(tmp_path, "x", "x1", 600)
    _wait_for(tmp_path, "x1 in")
    os.kill(stuck.pid, signal.SIGKILL)
    stuck.wait(timeout=10)
    started = time.monotonic()
    with DeviceLock("dev", tmp_path).hold(exclusive=True) as waited:
        assert waited < 5 and time.monotonic() - started < 5


def test_the_key_is_the_physical_device_and_the_folder_is_shared(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert device_key(H200) == "GPU-1234_abcd"
    assert device_key(DeviceInfo("cuda", "H200", "NVIDIA H200", "sm_90", 1)) == "NVIDIA_H200"
    monkeypatch.setenv(ENV_LOCK_DIR, str(tmp_path / "locks"))
    lock = DeviceLock.for_device(H200)
    assert lock.directory == tmp_path / "locks" and (tmp_path / "locks").stat().st_mode & 0o1777 == 0o1777
    with device_turn(H200, exclusive=True):
        assert (tmp_path / "locks" / "GPU-1234_abcd.lock").is_file()


def test_on_the_cpu_steps_do_not_wait_for_each_other(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The CPU's timings are a smoke test: no lock is taken there at all."""
    monkeypatch.setenv(ENV_LOCK_DIR, str(tmp_path / "locks"))
    with device_turn(DeviceInfo("cpu", "cpu", "cpu", None, 0), exclusive=True) as turn:
        assert turn.waited == 0.0 and turn.paused_s() == 0.0
    assert not (tmp_path / "locks").exists()


TICKER = """
import sys, time
with open(sys.argv[1], "a") as out:
    for _ in range(int(sys.argv[2])):
        out.write(f"{time.monotonic():.3f}\\n")
        out.flush()
        time.sleep(0.05)
"""


def _shared_step_beside_a_timed_one(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    ticks: int,
    not_after: float | None = None,
    timed_hold: float = 2.0,
) -> tuple[CommandOutcome, list[float], tuple[float, float, float], float, int]:
    """A command run in a shared turn (`ticks` of 50 ms: 30 are 1.5 s of its own time; limit 2.5 s)
    while a timed step asks for the device after 0.4 s and holds it `timed_hold` s (the holders'
    key is the H200's)."""
    monkeypatch.setenv(ENV_LOCK_DIR, str(tmp_path))
    monkeypatch.delenv(device_lock.ENV_YIELD_AFTER, raising=False)
    monkeypatch.setattr(device_lock, "YIELD_AFTER_S", 0.5)
    ticks_file = tmp_path / "ticks"
    with device_turn(H200, exclusive=False) as turn:
        command = StartedCommand(
            [sys.executable, "-c", TICKER, str(ticks_file), str(ticks)],
            tmp_path,
            dict(os.environ),
            tmp_path / "cmd.log",
        )
        time.sleep(0.4)
        timed = _holder(tmp_path, "x", "x1", timed_hold)
        started = time.monotonic()
        with turn.pausable(command.proc.pid):
            outcome = command.finish(None, 2.5, watch=turn.ran_aside, pauses=turn, not_after=not_after)
        ended = time.monotonic()
        paused = turn.paused_s()
    left_the_turn = time.monotonic()
    timed.wait(timeout=20)
    ticked = [float(line) for line in ticks_file.read_text().split()]
    return outcome, ticked, (started, ended, left_the_turn), paused, turn.pauses


def test_a_shared_holder_steps_aside_for_a_timed_step_and_its_stopped_time_is_not_charged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A hung candidate in a shared step kept every timed step on the H200 waiting for its timeout
    (five minutes). Now the shared holder stops its command, lets the timed step run, continues
    it: the command ticks not once while the timed step holds the device, and ends on its own
    (neither timed out, though its wall time passes its limit, nor taken for a stopped one)."""
    monkeypatch.setattr(sys.modules[__name__], "HOLDER", HOLDER.replace('"dev"', f'"{device_key(H200)}"'))
    outcome, ticked, _, paused, pauses = _shared_step_beside_a_timed_one(tmp_path, monkeypatch, 30)
    assert outcome.ok and not outcome.timed_out and not outcome.stopped, outcome.describe()
    assert outcome.breach is None  # its clock stood still while it stood aside
    held = _intervals(tmp_path)["x1"]
    assert pauses == 1 and 1.9 < paused < 5.0  # stopped from before the timed step's turn to after it
    assert not [t for t in ticked if held[0] + 0.1 < t < held[1] - 0.1]  # stopped all along the timed step
    assert len(ticked) == 30 and ticked[-1] > held[1]  # continued after it: the timed step did not wait for it


def test_the_hard_end_of_a_request_is_kept_while_a_step_stands_stopped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Stopped time extends a step's own limit, never a reward request's hard end."""
    monkeypatch.setattr(sys.modules[__name__], "HOLDER", HOLDER.replace('"dev"', f'"{device_key(H200)}"'))
    outcome, _, (started, ended, left), _, pauses = _shared_step_beside_a_timed_one(
        tmp_path, monkeypatch, 60, not_after=time.monotonic() + 1.8, timed_hold=4.0
    )
    assert outcome.timed_out and not outcome.stopped and pauses == 1
    assert left - ended < 1.5  # the turn ends then too: it does not wait out the timed step (4 s) for the lock
    assert ended - started < 3.5  # killed at its hard end; after the pause it would have run till about 5 s


def test_a_shared_holder_with_nothing_to_stop_keeps_the_device(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Only a turn whose processes can be stopped steps aside: one that could not would let a
    timed step run beside work it cannot see."""
    monkeypatch.setenv(ENV_LOCK_DIR, str(tmp_path))
    monkeypatch.delenv(device_lock.ENV_YIELD_AFTER, raising=False)
    monkeypatch.setattr(device_lock, "YIELD_AFTER_S", 0.2)
    monkeypatch.setattr(sys.modules[__name__], "HOLDER", HOLDER.replace('"dev"', f'"{device_key(H200)}"'))
    with device_turn(H200, exclusive=False) as turn:
        timed = _holder(tmp_path, "x", "x1", 0.1)
        time.sleep(1.5)
        assert not (tmp_path / "log").exists() and turn.pauses == 0
    timed.wait(timeout=20)
    assert "x1 in" in (tmp_path / "log").read_text()


def test_how_long_a_timed_step_waits_for_a_shared_holder_can_be_set(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(device_lock.ENV_YIELD_AFTER, raising=False)
    assert device_lock.yield_after_s() == device_lock.YIELD_AFTER_S
    monkeypatch.setenv(device_lock.ENV_YIELD_AFTER, "0.5")
    assert device_lock.yield_after_s() == 0.5
    for bad in ("0", "-1", "soon", "nan", "inf"):
        monkeypatch.setenv(device_lock.ENV_YIELD_AFTER, bad)
        with pytest.raises(ConfigError, match="AKA_DEVICE_YIELD_AFTER_S=.*greater than 0.*unset it"):
            device_lock.yield_after_s()


def test_a_step_that_stops_itself_is_not_hidden_by_a_pause(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A cheat the pauses invite: a candidate that stops its own step (to stall every timed step
    for the step's timeout) just before its turn steps aside, hoping the pause covers it. The
    turn leaves a process that someone else stopped as it was, so once the pause is over the
    step is found stopped and killed, long before its timeout."""
    monkeypatch.setenv(ENV_LOCK_DIR, str(tmp_path))
    monkeypatch.delenv(device_lock.ENV_YIELD_AFTER, raising=False)
    monkeypatch.setattr(device_lock, "YIELD_AFTER_S", 0.5)
    monkeypatch.setattr(sys.modules[__name__], "HOLDER", HOLDER.replace('"dev"', f'"{device_key(H200)}"'))
    stops_itself = "import os, signal, time\ntime.sleep(0.3)\nos.kill(os.getpid(), signal.SIGSTOP)\ntime.sleep(60)\n"
    with device_turn(H200, exclusive=False) as turn:
        command = StartedCommand([sys.executable, "-c", stops_itself], tmp_path, dict(os.environ), tmp_path / "c.log")
        time.sleep(0.4)
        timed = _holder(tmp_path, "x", "x1", 2.0)
        started = time.monotonic()
        with turn.pausable(command.proc.pid):
            outcome = command.finish(None, 30.0, pauses=turn)
        took = time.monotonic() - started
    timed.wait(timeout=20)
    assert turn.pauses == 1 and "x1 in" in (tmp_path / "log").read_text()  # the pause did happen
    assert outcome.stopped and not outcome.timed_out and took < 15.0, outcome.describe()


CONTINUES_ITSELF = (
    SIGCONT_TIMERS  # no stop holds it for longer than a millisecond
    + """
import sys, time
_continue_by_timers()
with open(sys.argv[1], "a") as out:
    for _ in range(600):
        out.write(f"{time.monotonic():.3f}\\n")
        out.flush()
        time.sleep(0.05)
"""
)


def _escaping_step_beside_a_timed_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, script: str, timed_hold: float
) -> tuple[CommandOutcome, tuple[float, float], list[float]]:
    """`script` (which ticks into the file it is given) run in a shared turn while a timed step asks
    for the device after 0.4 s and holds it `timed_hold` s: how it ended, the timed step's
    interval, its ticks."""
    monkeypatch.setenv(ENV_LOCK_DIR, str(tmp_path))
    monkeypatch.delenv(device_lock.ENV_YIELD_AFTER, raising=False)
    monkeypatch.setattr(device_lock, "YIELD_AFTER_S", 0.5)
    monkeypatch.setattr(sys.modules[__name__], "HOLDER", HOLDER.replace('"dev"', f'"{device_key(H200)}"'))
    ticks_file = tmp_path / "ticks"
    with device_turn(H200, exclusive=False) as turn:
        command = StartedCommand(
            [sys.executable, "-c", script, str(ticks_file)], tmp_path, dict(os.environ), tmp_path / "c.log"
        )
        time.sleep(0.4)
        timed = _holder(tmp_path, "x", "x1", timed_hold)
        with turn.pausable(command.proc.pid):
            outcome = command.finish(None, 30.0, watch=turn.ran_aside, pauses=turn)
    timed.wait(timeout=20)
    held = _intervals(tmp_path)["x1"]
    return outcome, (held[0], held[1]), [float(line) for line in ticks_file.read_text().split()]


def test_a_step_that_continues_itself_while_it_stands_aside_is_killed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A SIGCONT its own timer sends continues a stopped process (no system call of its own at the
    time: nothing to filter), so it ran on beside the timed step it stood aside for, to that
    step's end (an honest evaluation timed beside such helpers on an H100 found its baseline
    late in every pair). Its clock, watched while the timed step runs, shows it moved: it is
    killed within a few watches, and its step is `tampering` (`steps._record`)."""
    outcome, held, ticked = _escaping_step_beside_a_timed_one(tmp_path, monkeypatch, CONTINUES_ITSELF, 2.0)
    assert not [t for t in ticked if held[0] + 0.3 < t], (held, ticked[-5:])  # killed early in the timed turn
    assert outcome.breach is not None and "another evaluation's timed step" in outcome.breach, outcome.describe()
    assert "while it was paused" in outcome.breach and not outcome.timed_out


CONTINUE_EACH_OTHER = """
import os, signal, subprocess, sys, time
spacers = [subprocess.Popen(["sleep", "1000"]) for _ in range(200)]  # stopped between the two: a while apart
parent = os.getpid()
child = os.fork()
other = child or parent
with open(sys.argv[1], "a") as out:
    while True:
        os.kill(other, signal.SIGCONT)  # whichever runs continues the other: one stop holds neither
        out.write(f"{time.monotonic():.3f}\\n")
        out.flush()
        time.sleep(0.001)
"""


def test_helpers_that_continue_each_other_are_killed_before_the_device_goes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two processes of a shared step that SIGCONT each other never stand stopped together: they
    ran beside the timed step it stood aside for until the step's turn came back. The device now
    goes only once every thread stands stopped, so they are killed first (`tampering`)."""
    outcome, held, ticked = _escaping_step_beside_a_timed_one(tmp_path, monkeypatch, CONTINUE_EACH_OTHER, 1.0)
    assert ticked and not [t for t in ticked if t > held[0]], (held, ticked[-3:])  # gone before the timed turn
    assert outcome.breach is not None and "another evaluation's timed step" in outcome.breach, outcome.describe()
    assert "did not stop" in outcome.breach and not outcome.timed_out


def test_task_code_run_outside_a_step_never_runs_beside_a_timed_step(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The validator's probe ran the task's reference on the GPU with no lock, beside other tasks'
    timed steps (`aka validate --parallel 3` read A/A 0.70x and 6.5x on the H200). Now it waits for a
    timed step that holds the device, is stopped for one that asks while it runs, and that time
    does not count against its timeout."""
    monkeypatch.setattr(sys.modules[__name__], "HOLDER", HOLDER.replace('"dev"', f'"{device_key(H200)}"'))
    monkeypatch.setenv(ENV_LOCK_DIR, str(tmp_path))
    monkeypatch.delenv(device_lock.ENV_YIELD_AFTER, raising=False)
    monkeypatch.setattr(device_lock, "YIELD_AFTER_S", 0.5)
    first = _holder(tmp_path, "x", "x1", 1.0)
    _wait_for(tmp_path, "x1 in")
    later: list[subprocess.Popen[bytes]] = []

    def ask_later() -> None:
        time.sleep(1.6)  # the probe runs by then
        later.append(_holder(tmp_path, "x", "x2", 1.5))

    import threading

    asker = threading.Thread(target=ask_later)
    asker.start()
    ticks = tmp_path / "ticks"
    done = device_lock.run_sharing_device(
        H200, [sys.executable, "-c", TICKER + "print('probed')", str(ticks), "30"], tmp_path, dict(os.environ), 2.5
    )
    asker.join()
    for holder in (first, *later):
        holder.wait(timeout=20)
    assert done.returncode == 0 and done.stdout.strip() == "probed", done.stderr
    held = _intervals(tmp_path)
    ticked = [float(line) for line in ticks.read_text().split()]
    assert len(ticked) == 30 and ticked[0] > held["x1"][1]  # waited for the timed step holding the device
    assert not [t for t in ticked if held["x2"][0] + 0.1 < t < held["x2"][1] - 0.1]  # stopped all along the next


def test_a_confined_export_steps_aside_for_a_timed_step(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, make_toy_task
) -> None:
    """A task's exports run candidate code confined as a step (`run_confined`) and, like a step,
    are stopped for a timed step that asks while they hold the device shared."""
    from aka.config.tasks import load_task
    from aka.evaluation.step_process import run_confined

    task_dir = make_toy_task()
    task = load_task(task_dir.parents[2], task_dir)
    monkeypatch.setattr(sys.modules[__name__], "HOLDER", HOLDER.replace('"dev"', f'"{device_key(H200)}"'))
    locks = tmp_path / "locks"
    locks.mkdir()
    monkeypatch.setenv(ENV_LOCK_DIR, str(locks))
    monkeypatch.delenv(device_lock.ENV_YIELD_AFTER, raising=False)
    monkeypatch.setattr(device_lock, "YIELD_AFTER_S", 0.5)
    work = tmp_path / "work"
    work.mkdir()
    (work / "ticker.py").write_text(TICKER)
    later: list[subprocess.Popen[bytes]] = []

    def ask_later() -> None:
        time.sleep(1.6)  # the export runs by then
        later.append(_holder(locks, "x", "x2", 1.5))

    import threading

    asker = threading.Thread(target=ask_later)
    asker.start()
    done = run_confined(
        task, H200, f"{sys.executable} ticker.py ticks 60", work, dict(os.environ), 30, tmp_path / "export.log"
    )
    asker.join()
    for holder in later:
        holder.wait(timeout=20)
    assert done.ok, (tmp_path / "export.log").read_text()
    held = _intervals(locks)
    ticked = [float(line) for line in (work / "ticks").read_text().split()]
    assert len(ticked) == 60 and not [t for t in ticked if held["x2"][0] + 0.1 < t < held["x2"][1] - 0.1]
    assert ticked[0] < held["x2"][0] < held["x2"][1] < ticked[-1]  # it ran, stood aside, went on


def test_task_code_run_outside_a_step_is_killed_at_its_timeout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV_LOCK_DIR, str(tmp_path))
    started = time.monotonic()
    with pytest.raises(subprocess.TimeoutExpired):
        device_lock.run_sharing_device(H200, ["sh", "-c", "sleep 30 & sleep 30"], tmp_path, dict(os.environ), 0.5)
    assert time.monotonic() - started < 5


@pytest.mark.parametrize("planted", ["folder", "link"])
def test_a_lock_file_someone_replaced_is_named_with_the_fix(tmp_path: Path, planted: str) -> None:
    """The lock folder is shared by the machine's users: a folder planted as the turnstile made
    every evaluation on that GPU an infra_error with a bare IsADirectoryError (a red team's)."""
    lock = DeviceLock("GPU-planted", tmp_path)
    if planted == "folder":
        lock.turnstile.mkdir()
    else:
        (tmp_path / "elsewhere").write_text("")
        lock.turnstile.symlink_to(tmp_path / "elsewhere")
    with pytest.raises(ConfigError, match="GPU-planted.turnstile: cannot open the device lock .*remove it"):
        with lock.hold(exclusive=True):
            pass


def test_a_command_sharing_the_device_ends_with_its_stopped_caller(tmp_path: Path, monkeypatch) -> None:
    """SIGTERM's SystemExit (or Ctrl-C) in the caller while a command shares the device (the
    validator's probe, in a session of its own) kills it: a stopped validator's probe outlived it
    (a fresh clone's test under load, session 50)."""
    from conftest import processes_under

    monkeypatch.setenv(ENV_LOCK_DIR, str(tmp_path / "locks"))

    def stop(_signum: int, _frame: object) -> None:
        raise SystemExit(128 + signal.SIGTERM)

    previous = signal.signal(signal.SIGALRM, stop)
    signal.setitimer(signal.ITIMER_REAL, 1.0)
    try:
        with pytest.raises(SystemExit):
            device_lock.run_sharing_device(
                DeviceInfo("cpu", "cpu", "cpu", None, 0),
                [sys.executable, "-c", "import time; time.sleep(120)"],
                tmp_path,
                dict(os.environ),
                300,
            )
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    assert processes_under(tmp_path) == [], "the command outlived its caller"
