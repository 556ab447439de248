"""The parallel queue's cost and scaling on CPU (docs/benchmarks/*_queue_scaling.md).

`sleep` mode: N worker processes run the real worker loop (aka.parallel.pool.work_queue: claim,
heartbeat thread, report) over TRIALS trials that each sleep TRIAL_SECONDS; it measures the
per-claim overhead (claim + report, under the queue's file lock) and the mechanism's parallel
efficiency, (TRIALS x TRIAL_SECONDS / N) / wall, free of the machine's core count.

`toy` mode: real `aka run` with `num_parallel: N` over TASKS toy tasks (tests/conftest.py), each
a real evaluation (three sandboxed step processes); efficiency = wall(1 worker) / (N x wall(N)).
On a machine with fewer cores than N this is bounded by the cores, not by the queue.

    python benchmarks/queue_scaling.py sleep --trials 200 --trial-seconds 0.5 --workers 1,2,4,8
    python benchmarks/queue_scaling.py toy --tasks 8 --workers 1,2
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import statistics
import subprocess
import sys
import tempfile
import time
from multiprocessing.queues import Queue
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))
sys.path.insert(0, str(REPO / "tests"))

from aka.parallel.pool import work_queue  # noqa: E402
from aka.parallel.queue import TrialQueue, WorkerIdentity  # noqa: E402
from aka.results.task_result import TaskResult, TaskStatus  # noqa: E402
from aka.run.schedule import Trial  # noqa: E402


class _TimedQueue(TrialQueue):
    """The queue, with the time of every claim and report recorded."""

    def __init__(self, run_dir: Path) -> None:
        super().__init__(run_dir)
        self.seconds: list[float] = []

    def claim(self, worker: WorkerIdentity):  # type: ignore[no-untyped-def]
        start = time.perf_counter()
        try:
            return super().claim(worker)
        finally:
            self.seconds.append(time.perf_counter() - start)

    def report(self, entry, workspace, status, reason):  # type: ignore[no-untyped-def]
        start = time.perf_counter()
        try:
            return super().report(entry, workspace, status, reason)
        finally:
            self.seconds[-1] += time.perf_counter() - start


def _sleep_worker(run_dir: str, worker_id: str, trial_seconds: float, out: Queue) -> None:  # type: ignore[type-arg]
    queue = _TimedQueue(Path(run_dir))

    def run_trial(trial: Trial, _worker: str) -> tuple[Path, TaskResult]:
        time.sleep(trial_seconds)
        return Path(run_dir), TaskResult(task_name=trial.task, task_type="bench", status=TaskStatus.PASS)

    work_queue(queue, WorkerIdentity.this_process(worker_id), run_trial)
    out.put(queue.seconds[:-1])  # the last claim found the queue empty


def sleep_mode(trials: int, trial_seconds: float, workers: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        TrialQueue(Path(tmp)).fill([Trial(f"bench/t{i}", None, 1) for i in range(trials)])
        context = multiprocessing.get_context("fork")
        out = context.Queue()
        start = time.perf_counter()
        procs = [context.Process(target=_sleep_worker, args=(tmp, f"w{i}", trial_seconds, out))
                 for i in range(workers)]
        for proc in procs:
            proc.start()
        claims = [s for _ in procs for s in out.get(timeout=3600)]
        for proc in procs:
            proc.join()
        wall = time.perf_counter() - start
        assert len(TrialQueue(Path(tmp)).entries()["done"]) == trials
    ideal = trials * trial_seconds / workers
    return {"workers": workers, "wall_s": wall, "ideal_s": ideal, "efficiency": ideal / wall,
            "claim_ms_median": 1000 * statistics.median(claims),
            "claim_ms_p95": 1000 * sorted(claims)[int(0.95 * (len(claims) - 1))]}


def _toy_tasks(root: Path, count: int) -> None:
    import conftest

    for i in range(count):
        task = root / f"triton2triton/toy/t{i}"
        task.mkdir(parents=True)
        (task / "kernel.py").write_text(conftest.TOY_KERNEL)
        (task / "harness.py").write_text(conftest.TOY_HARNESS)
        (task / "send.py").write_text(conftest.SEND_SCRIPT)
        (task / "config.yaml").write_text(yaml.safe_dump({
            "task_type": "triton2triton", "source_file_path": ["kernel.py"], "target_kernel_functions": ["toy_kernel"],
            "compile_command": ["python3 harness.py compile"],
            "correctness_command": ["python3 harness.py correctness"],
            "performance_command": ["python3 harness.py performance"]}))


def toy_mode(tasks: int, workers: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        _toy_tasks(root / "tasks", tasks)
        config = root / "run.yaml"
        config.write_text(yaml.safe_dump({
            "agent": {"template": "noop"}, "tasks": ["all"], "target_gpu_model": "auto",
            "log_directory": str(root / "logs"), "workspace_directory_prefix": str(root / "ws"),
            "tasks_root": str(root / "tasks"), "num_parallel": workers}))
        env = dict(os.environ, PYTHONPATH=str(REPO / "src"))
        start = time.perf_counter()
        subprocess.run([sys.executable, "-m", "aka.cli", "run", str(config)], cwd=root, env=env, check=True,
                       capture_output=True)
        return {"workers": workers, "wall_s": time.perf_counter() - start}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mode", choices=["sleep", "toy"])
    parser.add_argument("--trials", type=int, default=200)
    parser.add_argument("--trial-seconds", type=float, default=0.5)
    parser.add_argument("--tasks", type=int, default=8)
    parser.add_argument("--workers", default="1,2,4,8")
    args = parser.parse_args()
    counts = [int(n) for n in args.workers.split(",")]
    print(f"cores: {os.cpu_count()}")
    if args.mode == "sleep":
        print("| workers | trials | trial s | wall s | ideal s | efficiency | claim+report ms (median) | (p95) |")
        print("|---|---|---|---|---|---|---|---|")
        for n in counts:
            row = sleep_mode(args.trials, args.trial_seconds, n)
            print(f"| {n} | {args.trials} | {args.trial_seconds} | {row['wall_s']:.2f} | {row['ideal_s']:.2f} | "
                  f"{100 * row['efficiency']:.1f}% | {row['claim_ms_median']:.2f} | {row['claim_ms_p95']:.2f} |")
        return
    print("| workers | tasks | wall s | efficiency vs 1 worker |")
    print("|---|---|---|---|")
    first = None
    for n in counts:
        wall = toy_mode(args.tasks, n)["wall_s"]
        first = first if first is not None else wall * counts[0]
        print(f"| {n} | {args.tasks} | {wall:.1f} | {100 * first / (n * wall):.1f}% |")


if __name__ == "__main__":
    main()
