"""The parallel queue's cost and scaling on CPU (docs/benchmarks/*_queue_scaling.md).

`sleep` mode: N worker processes run the real worker loop (aka.parallel.pool.work_queue: claim,
heartbeat thread, report) over TRIALS trials that each sleep TRIAL_SECONDS; it measures the
per-claim overhead (claim + report, under the queue's file lock) and the mechanism's parallel
efficiency, (TRIALS x TRIAL_SECONDS / N) / wall, free of the machine's core count.

`toy` mode: real `aka run` with `num_parallel: N` over TASKS toy tasks (tests/conftest.py), each
a real evaluation (three sandboxed step processes); efficiency = wall(1 worker) / (N x wall(N)).
On a machine with fewer cores than N this is bounded by the cores, not by the queue.

`--backend ray`: the same through the Ray backend (aka.parallel.ray_executor). `sleep`: the real
parent loop (aka.parallel.pool.supervise) starts one Ray actor per worker, each running this
script's `worker` mode (the real worker loop) in its own process, on a Ray instance started once
for all the worker counts (or `--address`); wall time counts the actors' and workers' start.
"start s" is when the first worker made its first claim, and the last one, from the moment the
workers were asked for; "efficiency after the first start" leaves the first out (what a long run,
whose start is amortized, gets). `toy`: `aka run --backend ray` (Ray started by each run).

    python benchmarks/queue_scaling.py sleep --trials 200 --trial-seconds 0.5 --workers 1,2,4,8
    python benchmarks/queue_scaling.py sleep --backend ray --trials 200 --trial-seconds 0.25 --workers 1,2,4,8
    python benchmarks/queue_scaling.py toy --tasks 8 --workers 1,2
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import statistics
import subprocess
import sys
import tempfile
import time
from multiprocessing.queues import Queue
from pathlib import Path
from types import ModuleType

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))
sys.path.insert(0, str(REPO / "tests"))

from aka.parallel.executor import DeviceSlot  # noqa: E402
from aka.parallel.pool import supervise, work_queue  # noqa: E402
from aka.parallel.queue import TrialQueue, WorkerIdentity  # noqa: E402
from aka.parallel.ray_executor import RayBackend, RayExecutor, ray_session  # noqa: E402
from aka.results.task_result import TaskResult, TaskStatus  # noqa: E402
from aka.run.events import RunEvent  # noqa: E402
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


def _sleep_trials(run_dir: str, worker_id: str, trial_seconds: float) -> tuple[list[float], float]:
    """The real worker loop over sleeping trials: each claim+report's seconds (the last claim,
    which found the queue empty, left out) and when the first claim returned (time.time())."""
    queue = _TimedQueue(Path(run_dir))
    first: list[float] = []

    def run_trial(trial: Trial, _worker: str) -> tuple[Path, TaskResult]:
        first.append(first[0] if first else time.time())
        time.sleep(trial_seconds)
        return Path(run_dir), TaskResult(task_name=trial.task, task_type="bench", status=TaskStatus.PASS)

    work_queue(queue, WorkerIdentity.this_process(worker_id), run_trial)
    return queue.seconds[:-1], first[0] if first else time.time()


def _sleep_worker(run_dir: str, worker_id: str, trial_seconds: float, out: Queue) -> None:  # type: ignore[type-arg]
    out.put(_sleep_trials(run_dir, worker_id, trial_seconds)[0])


def worker_mode(run_dir: str, worker_id: str, trial_seconds: float) -> None:
    """A Ray actor's worker process: the sleeping trials, its claim times written beside the queue."""
    claims, first = _sleep_trials(run_dir, worker_id, trial_seconds)
    (Path(run_dir) / f"claims-{worker_id}.json").write_text(json.dumps({"claims": claims, "first": first}))


class _Quiet:
    def emit(self, event: RunEvent) -> None:
        pass


def ray_sleep_mode(ray: ModuleType, trials: int, trial_seconds: float, workers: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        run_dir = Path(tmp)
        queue = TrialQueue(run_dir)
        queue.fill([Trial(f"bench/t{i}", None, 1) for i in range(trials)])
        slots = [DeviceSlot(None, i) for i in range(workers)]
        script = str(Path(__file__).resolve())
        executor = RayExecutor(
            ray, run_dir, lambda slot: [script, "worker", tmp, slot.worker_id, str(trial_seconds)], 1, None
        )
        asked, start = time.time(), time.perf_counter()
        supervise(queue, executor, slots, _Quiet(), run_dir / "events.jsonl")
        wall = time.perf_counter() - start
        assert len(queue.entries()["done"]) == trials
        found = [json.loads(p.read_text()) for p in run_dir.glob("claims-*.json")]
        claims = [s for f in found for s in f["claims"]]
        first, last = min(f["first"] for f in found), max(f["first"] for f in found)
    ideal = trials * trial_seconds / workers
    return {
        "workers": workers,
        "wall_s": wall,
        "ideal_s": ideal,
        "efficiency": ideal / wall,
        "claim_ms_median": 1000 * statistics.median(claims),
        "claim_ms_p95": 1000 * sorted(claims)[int(0.95 * (len(claims) - 1))],
        "start_s": first - asked,
        "all_started_s": last - asked,
        "steady": ideal / (wall - (first - asked)),
    }


def sleep_mode(trials: int, trial_seconds: float, workers: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        TrialQueue(Path(tmp)).fill([Trial(f"bench/t{i}", None, 1) for i in range(trials)])
        context = multiprocessing.get_context("fork")
        out = context.Queue()
        start = time.perf_counter()
        procs = [context.Process(target=_sleep_worker, args=(tmp, f"w{i}", trial_seconds, out)) for i in range(workers)]
        for proc in procs:
            proc.start()
        claims = [s for _ in procs for s in out.get(timeout=3600)]
        for proc in procs:
            proc.join()
        wall = time.perf_counter() - start
        assert len(TrialQueue(Path(tmp)).entries()["done"]) == trials
    ideal = trials * trial_seconds / workers
    return {
        "workers": workers,
        "wall_s": wall,
        "ideal_s": ideal,
        "efficiency": ideal / wall,
        "claim_ms_median": 1000 * statistics.median(claims),
        "claim_ms_p95": 1000 * sorted(claims)[int(0.95 * (len(claims) - 1))],
    }


def _toy_tasks(root: Path, count: int) -> None:
    import conftest

    for i in range(count):
        task = root / f"triton2triton/toy/t{i}"
        task.mkdir(parents=True)
        (task / "kernel.py").write_text(conftest.TOY_KERNEL)
        (task / "harness.py").write_text(conftest.TOY_HARNESS)
        (task / "send.py").write_text(conftest.SEND_SCRIPT)
        (task / "config.yaml").write_text(
            yaml.safe_dump(
                {
                    "task_type": "triton2triton",
                    "source_file_path": ["kernel.py"],
                    "target_kernel_functions": ["toy_kernel"],
                    "compile_command": ["python3 harness.py compile"],
                    "correctness_command": ["python3 harness.py correctness"],
                    "performance_command": ["python3 harness.py performance"],
                }
            )
        )


def toy_mode(tasks: int, workers: int, backend: str = "local") -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        _toy_tasks(root / "tasks", tasks)
        config = root / "run.yaml"
        config.write_text(
            yaml.safe_dump(
                {
                    "agent": {"template": "noop"},
                    "tasks": ["all"],
                    "target_gpu_model": "auto",
                    "log_directory": str(root / "logs"),
                    "workspace_directory_prefix": str(root / "ws"),
                    "tasks_root": str(root / "tasks"),
                    "num_parallel": workers,
                }
            )
        )
        env = dict(os.environ, PYTHONPATH=str(REPO / "src"))
        start = time.perf_counter()
        subprocess.run(
            [sys.executable, "-m", "aka.cli", "run", str(config), "--backend", backend],
            cwd=root,
            env=env,
            check=True,
            capture_output=True,
        )
        return {"workers": workers, "wall_s": time.perf_counter() - start}


def main() -> None:
    if sys.argv[1:2] == ["worker"]:
        worker_mode(sys.argv[2], sys.argv[3], float(sys.argv[4]))
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mode", choices=["sleep", "toy"])
    parser.add_argument("--backend", choices=["local", "ray"], default="local")
    parser.add_argument("--address", default=None, help="--backend ray: an existing cluster (default: start one)")
    parser.add_argument("--trials", type=int, default=200)
    parser.add_argument("--trial-seconds", type=float, default=0.5)
    parser.add_argument("--tasks", type=int, default=8)
    parser.add_argument("--workers", default="1,2,4,8")
    args = parser.parse_args()
    counts = [int(n) for n in args.workers.split(",")]
    print(f"cores: {os.cpu_count()}, backend: {args.backend}")
    if args.mode == "sleep" and args.backend == "ray":
        print(
            "| workers | trials | trial s | wall s | ideal s | efficiency | claim+report ms (median) | (p95) "
            "| start s (first, last worker) | efficiency after the first start |"
        )
        print("|---|---|---|---|---|---|---|---|---|---|")
        with ray_session(RayBackend(args.address), [DeviceSlot(None, i) for i in range(max(counts))]) as ray:
            for n in counts:
                row = ray_sleep_mode(ray, args.trials, args.trial_seconds, n)
                print(
                    f"| {n} | {args.trials} | {args.trial_seconds} | {row['wall_s']:.2f} | {row['ideal_s']:.2f} | "
                    f"{100 * row['efficiency']:.1f}% | {row['claim_ms_median']:.2f} | {row['claim_ms_p95']:.2f} | "
                    f"{row['start_s']:.1f}, {row['all_started_s']:.1f} | {100 * row['steady']:.1f}% |",
                    flush=True,
                )
        return
    if args.mode == "sleep":
        print("| workers | trials | trial s | wall s | ideal s | efficiency | claim+report ms (median) | (p95) |")
        print("|---|---|---|---|---|---|---|---|")
        for n in counts:
            row = sleep_mode(args.trials, args.trial_seconds, n)
            print(
                f"| {n} | {args.trials} | {args.trial_seconds} | {row['wall_s']:.2f} | {row['ideal_s']:.2f} | "
                f"{100 * row['efficiency']:.1f}% | {row['claim_ms_median']:.2f} | {row['claim_ms_p95']:.2f} |"
            )
        return
    print("| workers | tasks | wall s | efficiency vs 1 worker |")
    print("|---|---|---|---|")
    first = None
    for n in counts:
        wall = toy_mode(args.tasks, n, args.backend)["wall_s"]
        first = first if first is not None else wall * counts[0]
        print(f"| {n} | {args.tasks} | {wall:.1f} | {100 * first / (n * wall):.1f}% |")


if __name__ == "__main__":
    main()
