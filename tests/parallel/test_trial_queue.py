"""The leased trial queue on its own: claims under concurrency, reclaim, lost leases, attempts."""

from __future__ import annotations

import multiprocessing
import os
import socket
import subprocess
import time
from pathlib import Path

import pytest

from aka.parallel.queue import QueueBusy, TrialQueue, WorkerIdentity, lease_problem, pid_start_time
from aka.run.schedule import Trial


def _trials(count: int) -> list[Trial]:
    return [Trial(f"fam/suite/t{i}", None, 1) for i in range(count)]


def _dead_worker(name: str) -> WorkerIdentity:
    """A worker whose process has exited: its pid is no longer alive on this host."""
    proc = subprocess.Popen(["true"])
    proc.wait()
    return WorkerIdentity(name, socket.gethostname(), proc.pid, "1")


def _claim_all(run_dir: str, worker_id: str, out: multiprocessing.Queue) -> None:  # type: ignore[type-arg]
    queue = TrialQueue(Path(run_dir))
    me = WorkerIdentity.this_process(worker_id)
    claimed = []
    while (entry := queue.claim(me)) is not None:
        claimed.append(entry.index)
        assert queue.report(entry, Path(run_dir), "PASS", None) == "done"
    out.put(claimed)


def test_concurrent_workers_never_claim_the_same_trial(tmp_path: Path) -> None:
    queue = TrialQueue(tmp_path)
    queue.fill(_trials(120))
    context = multiprocessing.get_context("fork")
    out = context.Queue()
    procs = [context.Process(target=_claim_all, args=(str(tmp_path), f"w{i}", out)) for i in range(4)]
    for proc in procs:
        proc.start()
    claimed = [out.get(timeout=120) for _ in procs]
    for proc in procs:
        proc.join(timeout=30)
    every = [index for part in claimed for index in part]
    assert sorted(every) == list(range(120)), "each trial claimed exactly once"
    assert sum(1 for part in claimed if part) >= 2
    assert len(queue.entries()["done"]) == 120 and queue.drained()


def test_a_dead_holders_trial_goes_back_and_its_late_report_is_refused(tmp_path: Path) -> None:
    queue = TrialQueue(tmp_path)
    queue.fill(_trials(1))
    lost = queue.claim(_dead_worker("a"))
    assert lost is not None
    again = queue.claim(WorkerIdentity.this_process("b"))
    assert again is not None and again.index == lost.index and again.attempts == 1
    assert "worker a" in again.history[0] and "died holding it" in again.history[0]
    assert queue.heartbeat(lost) is False
    assert queue.report(lost, tmp_path, "PASS", None) is None
    assert queue.report(again, tmp_path, "PASS", None) == "done"
    assert [e.index for e in queue.entries()["done"]] == [0]


def test_a_silent_holder_loses_its_trial_after_the_lease_and_a_heartbeat_keeps_it(tmp_path: Path) -> None:
    queue = TrialQueue(tmp_path)
    queue.fill(_trials(1), lease_seconds=0.5)
    entry = queue.claim(WorkerIdentity.this_process("a"))
    assert entry is not None
    for _ in range(3):
        time.sleep(0.3)
        assert queue.heartbeat(entry)
    assert queue.reclaim_stale() == []
    time.sleep(0.7)
    reclaimed = queue.reclaim_stale()
    assert [e.index for e in reclaimed] == [0] and "sent no heartbeat" in reclaimed[0].history[0]
    assert queue.heartbeat(entry) is False


def test_a_reused_pid_is_not_taken_for_the_holder(tmp_path: Path) -> None:
    queue = TrialQueue(tmp_path)
    queue.fill(_trials(1))
    me = WorkerIdentity.this_process("a")
    entry = queue.claim(me)
    assert entry is not None and entry.lease is not None
    assert lease_problem(entry.lease, time.time(), 60) is None
    assert entry.lease.pid_started == pid_start_time(os.getpid())
    reused = entry.lease.model_copy(update={"pid_started": "0"})
    assert "died holding it" in (lease_problem(reused, time.time(), 60) or "")
    # Silent first, then killed (the supervisor kills a silent holder before it is reclaimed):
    # the reason kept is the silence.
    silent_then_killed = reused.model_copy(update={"heartbeat_at": time.time() - 120})
    problem = lease_problem(silent_then_killed, time.time(), 60) or ""
    assert "sent no heartbeat for 120 s (lease 60 s) and is gone" in problem


def test_infrastructure_failures_are_retried_up_to_the_bound_then_failed(tmp_path: Path) -> None:
    queue = TrialQueue(tmp_path)
    queue.fill(_trials(1), max_attempts=3)
    me = WorkerIdentity.this_process("a")
    states = []
    for _ in range(3):
        entry = queue.claim(me)
        assert entry is not None
        states.append(queue.report(entry, tmp_path / "ws", "INFRA", "GPU lost"))
    assert states == ["pending", "pending", "failed"]
    failed = queue.entries()["failed"]
    assert len(failed) == 1 and failed[0].attempts == 3
    assert failed[0].reason == "infrastructure failure in all 3 attempt(s); last: attempt 3: GPU lost"
    assert queue.claim(me) is None and queue.drained()


def test_refilling_is_refused_while_a_live_worker_holds_a_trial(tmp_path: Path) -> None:
    queue = TrialQueue(tmp_path)
    queue.fill(_trials(2))
    assert queue.claim(WorkerIdentity.this_process("a")) is not None
    with pytest.raises(QueueBusy, match="worker a"):
        queue.fill(_trials(2))
    queue.fail_remaining("stopped")
    queue.fill(_trials(2))
    assert len(queue.entries()["pending"]) == 2


def test_a_holder_dead_but_not_reaped_counts_as_dead() -> None:
    """Where nothing reaps orphans (some containers' init), a killed worker stays a zombie: its
    /proc entry keeps its start time, but it holds nothing."""
    import os
    import time

    from aka.parallel.queue import pid_start_time

    child = os.fork()
    if child == 0:
        os._exit(0)
    try:
        deadline = time.monotonic() + 10
        while pid_start_time(child) is not None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert pid_start_time(child) is None
        assert pid_start_time(os.getpid()) is not None
    finally:
        os.waitpid(child, 0)


def test_release_returns_the_named_holders_trials_at_once_and_refuses_their_late_reports(tmp_path: Path) -> None:
    queue = TrialQueue(tmp_path)
    queue.fill(_trials(3))
    other_host = WorkerIdentity("slurm-7.0-0", "elsewhere", 4242, "1")  # a live lease: no pid to check here
    gone, kept = queue.claim(other_host), queue.claim(WorkerIdentity.this_process("slurm-8.0-0"))
    assert gone is not None and kept is not None
    released = queue.release(lambda lease: lease.worker_id.startswith("slurm-7."), "its Slurm job was cancelled")
    assert [e.index for e in released] == [gone.index]
    entries = queue.entries()
    assert [e.index for e in entries["running"]] == [kept.index]
    pending = {e.index: e for e in entries["pending"]}
    assert gone.index in pending and pending[gone.index].attempts == 1
    assert pending[gone.index].history == ["attempt 1: its Slurm job was cancelled"]
    assert queue.report(gone, tmp_path, "PASS", None) is None
