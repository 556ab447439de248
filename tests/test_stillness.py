"""`aka.stillness` on real processes: what stood stopped reads still; one continued behind the
checker's back (as a tracer, a sibling's or a timer's SIGCONT would) reads as having run; one that
never stops, or ended, is named."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest

from aka.stillness import Stillness, cpu_ns

BUSY = "while True: pass"


@pytest.fixture
def busy() -> Iterator[subprocess.Popen[bytes]]:
    process = subprocess.Popen([sys.executable, "-c", BUSY])
    time.sleep(0.2)
    yield process
    process.kill()
    process.wait()


def test_a_stopped_process_reads_still(busy: subprocess.Popen[bytes]) -> None:
    os.kill(busy.pid, signal.SIGSTOP)
    still = Stillness.take([busy.pid])
    time.sleep(0.3)
    assert still.unstopped == {} and busy.pid in still.clocks
    assert still.broken() is None and still.lenient() is None
    os.kill(busy.pid, signal.SIGCONT)


def test_a_process_continued_behind_the_checkers_back_reads_as_having_run(busy: subprocess.Popen[bytes]) -> None:
    os.kill(busy.pid, signal.SIGSTOP)
    still = Stillness.take([busy.pid])
    os.kill(busy.pid, signal.SIGCONT)  # what a dodge does
    time.sleep(0.05)
    os.kill(busy.pid, signal.SIGSTOP)  # and stopped again before the check: its clock still moved
    time.sleep(0.05)
    for why in (still.broken(), still.lenient()):
        assert why is not None and f"process {busy.pid} ran for" in why and "while it was paused" in why


def test_a_process_that_does_not_stop_is_named(busy: subprocess.Popen[bytes]) -> None:
    still = Stillness.take([busy.pid], wait_s=0.2)  # never stopped: it runs throughout
    assert list(still.unstopped) == [busy.pid]
    assert f"process {busy.pid} did not stop within" in (still.broken() or "")
    assert f"process {busy.pid} did not stop while it was paused" in (still.lenient() or "")
    assert f"(threads ['{busy.pid}:R:" in (still.broken() or "")  # its state says why: it runs


def test_a_process_that_ended_while_paused_is_named(busy: subprocess.Popen[bytes]) -> None:
    os.kill(busy.pid, signal.SIGSTOP)
    still = Stillness.take([busy.pid])
    busy.kill()
    busy.wait()
    assert cpu_ns(busy.pid) is None
    assert f"process {busy.pid} ended while it was paused" in (still.broken() or "")


def test_lenient_allows_a_late_stop_a_little_cpu_time() -> None:
    """A process still in a system call when the stop came (here: not yet stopped at all when the
    clocks were read) may spend up to `LATE_NS` stopping: a compiler finishing its disk I/O."""
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        time.sleep(0.3)
        still = Stillness.take([sleeper.pid], wait_s=0.0)  # asleep, not stopped: not yet still
        assert list(still.unstopped) == [sleeper.pid]
        os.kill(sleeper.pid, signal.SIGSTOP)  # it stops late, spending next to nothing
        time.sleep(0.1)
        assert still.lenient() is None
        assert still.broken() is not None  # the judge's own pause allows no late stop
    finally:
        sleeper.kill()
        sleeper.wait()


ZOMBIE_LEADER = """
import ctypes, threading, time
def spin():
    while True:
        time.sleep(0.0001)
threading.Thread(target=spin, daemon=True).start()
time.sleep(0.1)
ctypes.CDLL(None).syscall(60, 0)  # SYS_exit: only the main thread ends; the process reads Z
"""


def test_a_process_whose_leader_thread_ended_is_still_measured() -> None:
    """A red team's helpers ended their main thread (the process then reads `Z`, as a dead one
    does) while a thread of theirs ran on: the clocks skipped them, and they slowed the baseline
    through every pause. Only a process whose every thread ended is dead."""
    if sys.platform != "linux" or os.uname().machine != "x86_64":
        pytest.skip("x86_64 Linux: the raw exit call's number")
    process = subprocess.Popen([sys.executable, "-c", ZOMBIE_LEADER])
    try:
        time.sleep(0.5)
        os.kill(process.pid, signal.SIGSTOP)
        still = Stillness.take([process.pid])
        assert process.pid in still.clocks and still.broken() is None
        os.kill(process.pid, signal.SIGCONT)  # a timer's doing
        time.sleep(0.05)
        assert "ran" in (still.broken() or "") and "ran" in (still.lenient() or "")
    finally:
        process.kill()
        process.wait()


def test_a_process_running_at_the_check_is_caught_even_before_its_clock_is_compared(
    busy: subprocess.Popen[bytes],
) -> None:
    os.kill(busy.pid, signal.SIGSTOP)
    still = Stillness.take([busy.pid])
    os.kill(busy.pid, signal.SIGCONT)
    time.sleep(0.05)
    assert f"process {busy.pid} ran while it was paused (threads" in (still.broken() or "")


@pytest.mark.parametrize("state, escaped", [("D", False), ("R", True), ("S", True), (None, False)])
def test_a_thread_in_uninterruptible_sleep_has_not_escaped_its_stop(
    monkeypatch: pytest.MonkeyPatch, state: str | None, escaped: bool
) -> None:
    """A shared turn kills what did not stand stopped before it lets the device go: not a thread
    blocked in the kernel (disk I/O, `D`), which runs nothing of its own and stops as it returns,
    nor one gone meanwhile; one that runs (`R`) or sleeps where a signal reaches it (`S`: it
    would have stopped, so something continued it) has."""
    from aka import stillness

    monkeypatch.setattr(stillness, "_moving_threads", lambda pid: ["7"])
    monkeypatch.setattr(stillness, "_state", lambda path: state)
    found = Stillness(unstopped={4242: ["7"]}).escaped()
    assert (found is not None) == escaped
    assert Stillness(unstopped={4242: ["7"]}).moved_so_far() == found  # what the turn's watch asks meanwhile
    if escaped:
        # the thread's state and wait channel ("?" where /proc has none for it) say why
        assert found == f"process 4242 did not stop while it was paused (thread 7:{state}:?)"
