"""Parallel runs end to end, through the real CLI: workers claim from the run's leased queue; a
killed or silent worker's trial is run again and counted once; the parent's death or SIGTERM
takes every worker and step along; the run resumes. Every test ends with no process left."""

from __future__ import annotations

import csv
import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
from conftest import processes_under, toy_kernel_source

from aka.parallel.queue import QUEUE_DIR, STATES, TrialEntry

REPO = Path(__file__).resolve().parents[2]
SLOW_KERNEL = (
    "import time\nVALUE = 42\nTIME_MS = 1.0\n\n\ndef toy_kernel():\n    time.sleep({seconds})\n    return VALUE\n"
)


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO / "src"), env.get("PYTHONPATH", "")])
    env["COLUMNS"] = "200"
    return env


def _aka(tmp_path: Path, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "aka.cli", "run", *args],
        cwd=tmp_path,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def _start(tmp_path: Path, *args: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "aka.cli", "run", *args],
        cwd=tmp_path,
        env=_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def _step_running(root: Path, task: str) -> bool:
    return any("harness.py correctness" in p and task in p for p in processes_under(root, by_command_line=True))


def _assert_no_orphans(root: Path) -> None:
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline and processes_under(root, by_command_line=True):
        time.sleep(0.2)
    assert processes_under(root, by_command_line=True) == [], "a worker or step outlived the run"


def _wait_for(condition, what: str, timeout: float = 120) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def _run_dir(tmp_path: Path) -> Path:
    runs = sorted((tmp_path / "workspace_cpu_noop").glob("run_*"))
    assert len(runs) == 1
    return runs[0]


def _queue(run_dir: Path) -> dict[str, list[TrialEntry]]:
    return {
        state: [
            TrialEntry.model_validate_json(p.read_text()) for p in sorted((run_dir / QUEUE_DIR / state).glob("*.json"))
        ]
        for state in STATES
    }


def _events(run_dir: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]


def _summary_rows(run_dir: Path) -> list[dict[str, str]]:
    with (run_dir / "reports" / "overall_summary.csv").open() as handle:
        return list(csv.DictReader(handle))


def _held_by(run_dir: Path, task: str) -> TrialEntry | None:
    return next((e for e in _queue(run_dir)["running"] if e.task == task and e.lease is not None), None)


def test_workers_share_the_queue_and_each_trial_runs_and_counts_once(
    tmp_path: Path, make_toy_task, write_run_config
) -> None:
    names = [f"triton2triton/toy/t{i}" for i in range(4)]
    for name in names:
        make_toy_task(name)
    done = _aka(tmp_path, str(write_run_config(num_parallel=2)), "--gpus", "all")  # no GPU here: CPU workers
    assert done.returncode == 0, done.stderr
    assert "--gpus all: no GPU here" in done.stderr
    run_dir = _run_dir(tmp_path)
    started = Counter(e["task"] for e in _events(run_dir) if e["event"] == "task_started")
    assert started == dict.fromkeys(names, 1)
    assert len({e["worker"] for e in _events(run_dir) if e["event"] == "task_started"}) == 2
    assert sorted(r["Task Name"] for r in _summary_rows(run_dir)) == names
    queue = _queue(run_dir)
    assert len(queue["done"]) == 4 and not queue["pending"] and not queue["running"] and not queue["failed"]
    _assert_no_orphans(tmp_path)


def test_a_worker_killed_mid_trial_loses_it_to_another_and_it_counts_once(
    tmp_path: Path, make_toy_task, write_run_config
) -> None:
    make_toy_task("triton2triton/toy/slow", kernel=SLOW_KERNEL.format(seconds=4))
    make_toy_task("triton2triton/toy/fast")
    proc = _start(tmp_path, str(write_run_config(num_parallel=2)))
    try:
        _wait_for(lambda: _step_running(tmp_path, "toy_slow"), "the slow trial's step")
        run_dir = _run_dir(tmp_path)
        holder = _held_by(run_dir, "triton2triton/toy/slow")
        assert holder is not None and holder.lease is not None
        os.kill(holder.lease.pid, signal.SIGKILL)
        assert proc.wait(timeout=180) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
    events = _events(run_dir)
    started = Counter(e["task"] for e in events if e["event"] == "task_started")
    finished = Counter(e["task"] for e in events if e["event"] == "task_finished")
    assert started["triton2triton/toy/slow"] == 2 and finished["triton2triton/toy/slow"] == 1
    entry = next(e for e in _queue(run_dir)["done"] if e.task == "triton2triton/toy/slow")
    assert entry.attempts == 1 and "died holding it" in entry.history[0]
    rows = _summary_rows(run_dir)
    assert sorted(r["Task Name"] for r in rows) == ["triton2triton/toy/fast", "triton2triton/toy/slow"]
    assert all(r["Status"] == "PASS" for r in rows)
    _assert_no_orphans(tmp_path)


def test_a_silent_worker_loses_its_trial_after_the_lease(tmp_path: Path, make_toy_task, write_run_config) -> None:
    """A stopped worker sends no heartbeat: after the lease, another worker runs its trial; the
    stopped one is killed when the queue drains."""
    make_toy_task("triton2triton/toy/slow", kernel=SLOW_KERNEL.format(seconds=3))
    make_toy_task("triton2triton/toy/fast")
    proc = _start(tmp_path, str(write_run_config(num_parallel=2)), "--lease-seconds", "4")
    try:
        _wait_for(lambda: _step_running(tmp_path, "toy_slow"), "the slow trial's step")
        run_dir = _run_dir(tmp_path)
        holder = _held_by(run_dir, "triton2triton/toy/slow")
        assert holder is not None and holder.lease is not None
        os.kill(holder.lease.pid, signal.SIGSTOP)
        assert proc.wait(timeout=180) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
    entry = next(e for e in _queue(run_dir)["done"] if e.task == "triton2triton/toy/slow")
    assert entry.attempts == 1 and "sent no heartbeat" in entry.history[0]
    assert len(_summary_rows(run_dir)) == 2
    _assert_no_orphans(tmp_path)


@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGKILL])
def test_stopping_the_parent_stops_every_worker_and_step_and_the_run_resumes(
    tmp_path: Path, make_toy_task, write_run_config, stop: signal.Signals
) -> None:
    make_toy_task("triton2triton/toy/hang", kernel=SLOW_KERNEL.format(seconds=3600), correctness_timeout=3600)
    make_toy_task("triton2triton/toy/fast")
    config = write_run_config(num_parallel=2)
    proc = _start(tmp_path, str(config))
    try:
        _wait_for(lambda: _step_running(tmp_path, "toy_hang"), "the hanging step")
        _wait_for(lambda: len(_queue(_run_dir(tmp_path))["done"]) == 1, "the fast trial")
        proc.send_signal(stop)
        assert proc.wait(timeout=60) == (128 + signal.SIGTERM if stop == signal.SIGTERM else -signal.SIGKILL)
    finally:
        if proc.poll() is None:
            proc.kill()
    _assert_no_orphans(tmp_path)
    run_dir = _run_dir(tmp_path)
    keys = [e.key for entries in _queue(run_dir).values() for e in entries]
    assert sorted(keys) == ["000000", "000001"], "each trial is in exactly one state"

    (tmp_path / "tasks" / "triton2triton/toy/hang" / "kernel.py").write_text(toy_kernel_source())
    resumed = _aka(tmp_path, str(config), "--resume-run", str(run_dir))
    assert resumed.returncode == 0, resumed.stderr
    events = _events(run_dir)
    assert Counter(e["task"] for e in events if e["event"] == "task_reused") == {"triton2triton/toy/fast": 1}
    assert sorted(r["Task Name"] for r in _summary_rows(run_dir)) == [
        "triton2triton/toy/fast",
        "triton2triton/toy/hang",
    ]
    _assert_no_orphans(tmp_path)


def test_an_infrastructure_failure_is_retried_up_to_the_bound_then_failed(
    tmp_path: Path, make_toy_task, write_run_config
) -> None:
    make_toy_task("triton2triton/toy/bad_baseline", kernel=toy_kernel_source(value=1))
    make_toy_task("triton2triton/toy/fine")
    done = _aka(tmp_path, str(write_run_config(num_parallel=2)))
    assert done.returncode == 3, done.stderr
    run_dir = _run_dir(tmp_path)
    queue = _queue(run_dir)
    assert [e.task for e in queue["failed"]] == ["triton2triton/toy/bad_baseline"]
    failed = queue["failed"][0]
    assert failed.attempts == 3 and "infrastructure failure in all 3 attempt(s)" in (failed.reason or "")
    started = Counter(e["task"] for e in _events(run_dir) if e["event"] == "task_started")
    assert started == {"triton2triton/toy/bad_baseline": 3, "triton2triton/toy/fine": 1}
    statuses = {r["Task Name"]: r["Status"] for r in _summary_rows(run_dir)}
    assert statuses == {"triton2triton/toy/bad_baseline": "INFRA", "triton2triton/toy/fine": "PASS"}
    _assert_no_orphans(tmp_path)


def test_the_seeds_flags_init_workers_by_hand_then_postprocess(tmp_path: Path, make_toy_task, write_run_config) -> None:
    for i in range(3):
        make_toy_task(f"triton2triton/toy/t{i}")
    config = str(write_run_config())
    init = subprocess.run(
        [sys.executable, str(REPO / "main.py"), "--config_name", config, "--parallel-init"],
        cwd=tmp_path,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert init.returncode == 0, init.stderr
    run_dir = Path(init.stdout.strip().splitlines()[-1])
    assert len(_queue(run_dir)["pending"]) == 3
    early = _aka(tmp_path, config, "--postprocess-only", "--run-name", run_dir.name)
    assert early.returncode == 2 and "3 trial(s) are still pending" in early.stderr
    workers = [
        _start(tmp_path, config, "--parallel-worker", "--worker-id", f"w{i}", "--run-name", run_dir.name)
        for i in range(2)
    ]
    assert [w.wait(timeout=300) for w in workers] == [0, 0]
    assert len(_queue(run_dir)["done"]) == 3
    assert not (run_dir / "reports" / "overall_summary.csv").exists()
    post = _aka(tmp_path, config, "--postprocess-only", "--run-name", run_dir.name)
    assert post.returncode == 0, post.stderr
    assert sorted(r["Task Name"] for r in _summary_rows(run_dir)) == [f"triton2triton/toy/t{i}" for i in range(3)]
    assert Counter(e["worker"] for e in _events(run_dir) if e["event"] == "task_started").total() == 3
    _assert_no_orphans(tmp_path)


def test_a_bad_gpu_list_is_refused_before_anything_is_written(tmp_path: Path, make_toy_task, write_run_config) -> None:
    make_toy_task()
    done = _aka(tmp_path, str(write_run_config(gpu_ids="0,0")))
    assert done.returncode == 2 and "field 'gpu_ids'" in done.stderr and "distinct GPU indices" in done.stderr
    assert not (tmp_path / "workspace_cpu_noop").exists()


def test_one_named_gpu_runs_in_one_worker_masked_to_it(tmp_path: Path, make_toy_task, write_run_config) -> None:
    """`--gpus 3` alone must not run on the default GPU: one worker, masked to GPU 3 (a CPU
    machine has no GPU to check the id against; the mask is set all the same)."""
    make_toy_task()
    done = _aka(tmp_path, str(write_run_config()), "--gpus", "3")
    assert done.returncode == 0, done.stderr
    run_dir = _run_dir(tmp_path)
    assert [e["worker"] for e in _events(run_dir) if e["event"] == "task_started"] == ["gpu3-0"]
    assert (run_dir / QUEUE_DIR / "workers" / "gpu3-0.log").is_file()
    _assert_no_orphans(tmp_path)


def test_arms_and_repeats_run_in_parallel_with_one_baseline_per_task(
    tmp_path: Path, make_toy_task, write_run_config
) -> None:
    """Trials of one task (arms x repeats) on two workers at once: the baseline is measured once
    per task (under its lock), each trial runs once, and the per-arm reports count every trial."""
    tasks = ["triton2triton/toy/one", "triton2triton/toy/two"]
    for task in tasks:
        make_toy_task(task)
    arms = [{"label": "a", "agent": {"template": "noop"}}, {"label": "b", "agent": {"template": "noop"}}]
    config = write_run_config(arms=arms, repeats=2, schedule_seed=3, num_parallel=2)
    config.write_text(config.read_text().replace("agent:\n  template: noop\n", "", 1))
    done = _aka(tmp_path, str(config))
    assert done.returncode == 0, done.stderr
    run_dir = next((tmp_path / "workspace_cpu_arms-a-b").glob("run_*"))
    started = Counter((e["task"], e["arm"], e["repeat"]) for e in _events(run_dir) if e["event"] == "task_started")
    assert started == {(t, a, k): 1 for t in tasks for a in ("a", "b") for k in (1, 2)}
    assert len(list((run_dir / "baselines").glob("*.json"))) == 2
    assert len(list(run_dir.glob("*/baseline"))) == 2, "each task's baseline measured once"
    for arm in ("a", "b"):
        breakdown = json.loads((run_dir / "reports" / "arms" / arm / "task_type_breakdown.json").read_text())
        assert breakdown["overall"]["task_count"] == 4
    _assert_no_orphans(tmp_path)
