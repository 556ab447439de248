"""The judge's watchdog while it holds the device alone (`aka.harness.stall`), in real processes:
a judge stuck where nothing bounds it ends with every thread's stack on its standard error,
even inside a C call that holds the interpreter lock; one that makes progress, or shares the
device again, runs on."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from aka.harness.phases import ALONE, SHARED, Phases

PRELUDE = "import time\nfrom aka.harness import stall\nstall.MARGIN_S = 1.0\n"


def _judge(body: str, timeout: float = 60.0) -> tuple[subprocess.CompletedProcess[str], float]:
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-c", PRELUDE + body], capture_output=True, text=True, timeout=timeout, check=False
    )
    return done, time.monotonic() - started


def test_a_judge_stuck_in_a_call_that_holds_the_interpreter_lock_ends_with_its_stacks() -> None:
    """`sum` over a range runs in C with the interpreter lock held, the way a CUDA wait inside a
    tensor's `.item()` does: no Python-level timer or signal handler would run."""
    body = "def stuck_in_c():\n    return sum(range(10**13))\nstall.hold()\nstuck_in_c()\nprint('finished')\n"
    done, took = _judge(body)
    assert done.returncode == 1 and "finished" not in done.stdout
    assert "Timeout (0:00:01)!" in done.stderr and "stuck_in_c" in done.stderr, done.stderr
    assert took < 30.0


def test_a_worker_request_restarts_the_watchdog_with_its_own_timeout() -> None:
    """A request may take its whole timeout: the watchdog waits that long and its margin."""
    done, _ = _judge("stall.hold()\nstall.expect(1.5)\ntime.sleep(2.0)\nstall.release()\nprint('finished')\n")
    assert done.returncode == 0 and "finished" in done.stdout, done.stderr


def test_a_judge_that_keeps_making_progress_runs_past_the_margin() -> None:
    body = "stall.hold()\nfor _ in range(30):\n    time.sleep(0.1)\n    stall.expect(0.0)\n"
    body += "stall.release()\nprint('finished')\n"
    done, _ = _judge(body)
    assert done.returncode == 0 and "finished" in done.stdout, done.stderr


def test_no_watchdog_once_the_device_is_shared_again() -> None:
    """Set-up while the device is shared (a candidate's first calls, a compile) is bounded by the
    step's timeout, not the watchdog: it waits for no other evaluation."""
    done, _ = _judge(
        "stall.hold()\nstall.release()\ntime.sleep(1.5)\nstall.expect(0.0)\ntime.sleep(1.5)\nprint('ok')\n"
    )
    assert done.returncode == 0 and "ok" in done.stdout, done.stderr


def test_the_turns_phases_hold_and_release_the_watchdog(monkeypatch: pytest.MonkeyPatch) -> None:
    """`Phases.want(ALONE)` arms it, `want(SHARED)` and `close` disarm it; a step run by hand
    (no evaluator to ask, the device its own throughout) has none."""
    from aka.harness import phases, stall

    calls: list[str] = []
    monkeypatch.setattr(stall, "hold", lambda: calls.append("hold"))
    monkeypatch.setattr(stall, "release", lambda: calls.append("release"))

    class Evaluator:
        """The evaluator's end of the turn socket: it grants every request at once."""

        def __init__(self) -> None:
            self.pending = b""

        def sendall(self, data: bytes) -> None:
            self.pending += phases.TURN_GO

        def recv(self, size: int) -> bytes:
            chunk, self.pending = self.pending[:size], self.pending[size:]
            return chunk

        def close(self) -> None:
            pass

    turn = Phases(Evaluator())  # type: ignore[arg-type]
    turn.want(ALONE)
    turn.want(SHARED)
    turn.want(ALONE)
    turn.close()
    assert calls == ["hold", "release", "hold", "release"]
    calls.clear()
    Phases.none().want(ALONE)
    assert calls == []


def test_a_judge_whose_standard_error_is_no_file_goes_without(monkeypatch: pytest.MonkeyPatch) -> None:
    """A judge run inside pytest's capture (`run_task` in a test) has no file to write stacks to:
    the watchdog is skipped, the step goes on (a fresh clone's test failed on it, session 52)."""
    import io

    from aka.harness import stall

    monkeypatch.setattr(sys, "__stderr__", None)
    monkeypatch.setattr(sys, "stderr", io.StringIO())
    stall.hold()
    stall.expect(1.0)
    stall.release()
