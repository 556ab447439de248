"""The Ray backend: each worker slot is a Ray actor that runs the ordinary worker process.

Ray places the slot (`num_gpus` for a GPU slot, or a custom resource where the cluster declares its
GPUs as one; `num_cpus=1` for a CPU slot) and masks it to the GPU it gave it; the actor starts
`aka run CONFIG --parallel-worker ...` in its own process group, dying with the actor, so the
evaluation stays in its own sandboxed step processes and the run's leased queue
(aka.parallel.queue) still counts each trial once. Faults are met twice: Ray restarts an actor
whose process died (`max_restarts`) and re-runs its worker (`max_task_retries`), and the queue
reclaims the trial the dead worker held. Ray is optional (`pip install 'agentkernelarena[ray]'`)
and imported only here, when a run asks for it.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from aka.errors import ConfigError
from aka.parallel.executor import (
    STOP_GRACE_SECONDS,
    DeviceSlot,
    _die_with_parent,
    _signal_group,
    slot_environment,
)
from aka.parallel.queue import QUEUE_DIR, WORKERS_DIR

logger = logging.getLogger(__name__)
RAY_MISSING = "--backend ray: Ray is not installed here; install it with `pip install 'agentkernelarena[ray]'`"
ACTOR_RESTARTS = 3  # Ray restarts a slot whose actor process died this many times, re-running its worker
CALL_TIMEOUT_SECONDS = 30.0
NOT_STARTED_EXIT = 1  # what `exited` reports for a slot whose actor Ray gave up on
SRC_DIR = str(Path(__file__).resolve().parents[2])

WorkerArgs = Callable[[DeviceSlot], list[str]]  # a slot's worker command, after the node's Python


@dataclass(frozen=True)
class RayBackend:
    """Where the run's Ray is: an existing cluster's address ("auto", HOST:PORT), or None for a
    Ray instance started for the run; and the custom resource GPU slots ask for instead of
    `num_gpus` (a cluster, or a CI machine, that declares its GPUs as one)."""

    address: str | None = None
    gpu_resource: str | None = None


def import_ray() -> ModuleType:
    try:
        import ray
    except ImportError:
        raise ConfigError(RAY_MISSING) from None
    return ray


def slot_resources(slot: DeviceSlot, per_gpu: int, gpu_resource: str | None) -> dict[str, Any]:
    """What a slot's actor asks Ray for: a GPU (shared by its `num_parallel` workers), else a CPU."""
    if slot.gpu is None:
        return {"num_cpus": 1}
    share = 1.0 / per_gpu
    return {"resources": {gpu_resource: share}} if gpu_resource else {"num_gpus": share}


def aka_worker_args(config_path: Path, run_dir: Path) -> WorkerArgs:
    """The ordinary worker (`aka run CONFIG --parallel-worker`), as the local backend starts it."""
    return lambda slot: [
        "-m",
        "aka.cli",
        "run",
        str(config_path),
        "--parallel-worker",
        "--worker-id",
        slot.worker_id,
        "--run-name",
        str(run_dir),
    ]


class SlotWorker:
    """A slot's actor: runs the worker process on the node Ray placed it on. Its calls run on
    their own threads (`max_concurrency`), so `stop` and `kill_worker` reach a blocked `run`."""

    def __init__(self) -> None:
        self.proc: subprocess.Popen[bytes] | None = None
        self.stopping = False
        self.lock = threading.Lock()

    def run(self, args: list[str], mask: dict[str, str], log: str) -> int:
        """The worker's exit status. The process dies with this actor (PR_SET_PDEATHSIG)."""
        import ray

        env = {**os.environ, **mask}
        env["PYTHONPATH"] = os.pathsep.join(p for p in (SRC_DIR, env.get("PYTHONPATH")) if p)
        restarted = ray.get_runtime_context().was_current_actor_reconstructed
        Path(log).parent.mkdir(parents=True, exist_ok=True)
        with open(log, "ab") as out:
            out.write(
                f"[ray] actor pid {os.getpid()} on {socket.gethostname()}"
                f"{' (restarted by Ray)' if restarted else ''}: starting the worker\n".encode()
            )
            out.flush()
            with self.lock:
                if self.stopping:
                    return -int(signal.SIGTERM)
                parent = os.getpid()
                self.proc = subprocess.Popen(
                    [sys.executable, *args],
                    env=env,
                    stdin=subprocess.DEVNULL,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                    preexec_fn=lambda: _die_with_parent(parent),
                )
            return self.proc.wait()

    def kill_worker(self, pid: int) -> None:
        """Kill the worker (its whole group) when it is `pid`: its lease lapsed."""
        proc = self.proc
        if proc is not None and proc.pid == pid and proc.poll() is None:
            _signal_group(proc.pid, signal.SIGKILL)
            proc.wait()

    def stop(self, grace: float) -> None:
        """SIGTERM to the worker's group (its steps unwind), then SIGKILL after `grace` seconds."""
        with self.lock:
            self.stopping = True
            proc = self.proc
        if proc is None or proc.poll() is not None:
            return
        _signal_group(proc.pid, signal.SIGTERM)
        _signal_group(proc.pid, signal.SIGCONT)  # a stopped worker handles its SIGTERM too
        try:
            proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            pass
        _signal_group(proc.pid, signal.SIGKILL)
        proc.wait()


@dataclass
class _Started:
    actor: Any
    ready: Any  # the actor's `__ray_ready__`: done once Ray placed and started it
    run: Any  # its `run` call: done when the worker ended


class RayExecutor:
    """The executor protocol on Ray: `start` creates a slot's actor and its `run` call, `exited`
    collects finished calls (the actor is killed, freeing its GPU), `kill` reaches a worker whose
    lease lapsed through its actor, `stop` stops every worker, then kills every actor."""

    def __init__(
        self, ray: ModuleType, run_dir: Path, worker_args: WorkerArgs, per_gpu: int, gpu_resource: str | None
    ) -> None:
        self.ray, self.run_dir, self.worker_args = ray, run_dir, worker_args
        self.per_gpu, self.gpu_resource = per_gpu, gpu_resource
        self.remote_class = ray.remote(SlotWorker)
        self.started: dict[DeviceSlot, _Started] = {}

    def _mask(self, slot: DeviceSlot) -> dict[str, str]:
        """Ray masks a `num_gpus` actor to the GPU it gave it (the worker inherits that); a custom
        resource gets no mask from Ray, so the slot's own GPU id is used, as the local backend does."""
        if slot.gpu is not None and self.gpu_resource:
            return slot_environment(slot, {})
        return {"AKA_WORKER_SLOT": slot.worker_id}

    def start(self, slot: DeviceSlot) -> None:
        options = {
            **slot_resources(slot, self.per_gpu, self.gpu_resource),
            "max_restarts": ACTOR_RESTARTS,
            "max_task_retries": ACTOR_RESTARTS,
            "max_concurrency": 3,
        }
        actor = self.remote_class.options(**options).remote()
        log = self.run_dir / QUEUE_DIR / WORKERS_DIR / f"{slot.worker_id}.log"
        self.started[slot] = _Started(
            actor, actor.__ray_ready__.remote(), actor.run.remote(self.worker_args(slot), self._mask(slot), str(log))
        )

    def exited(self) -> dict[DeviceSlot, int]:
        runs = {started.run: slot for slot, started in self.started.items()}
        if not runs:
            return {}
        done, _ = self.ray.wait(list(runs), num_returns=len(runs), timeout=0)
        ended = {}
        for ref in done:
            slot = runs[ref]
            try:
                ended[slot] = int(self.ray.get(ref))
            except self.ray.exceptions.RayError as exc:
                logger.error("Ray gave up on worker %s: %s", slot.worker_id, str(exc).splitlines()[0])
                ended[slot] = NOT_STARTED_EXIT
            self.ray.kill(self.started.pop(slot).actor, no_restart=True)
        return ended

    def kill(self, worker_id: str, pid: int) -> None:
        for slot, started in self.started.items():
            if slot.worker_id == worker_id:
                with contextlib.suppress(self.ray.exceptions.RayError):
                    self.ray.get(started.actor.kill_worker.remote(pid), timeout=CALL_TIMEOUT_SECONDS)

    def stop(self) -> None:
        started = list(self.started.values())
        if not started:
            return
        ready, _ = self.ray.wait([s.ready for s in started], num_returns=len(started), timeout=0)
        stops = [s.actor.stop.remote(STOP_GRACE_SECONDS) for s in started if s.ready in ready]  # placed and running
        if stops:
            self.ray.wait(stops, num_returns=len(stops), timeout=STOP_GRACE_SECONDS + CALL_TIMEOUT_SECONDS)
        for s in started:
            self.ray.kill(s.actor, no_restart=True)
        self.started.clear()


def _cluster_check(ray: ModuleType, slots: list[DeviceSlot], backend: RayBackend) -> None:
    """A slot the cluster has no resource for would wait forever: refuse the run instead."""
    total = ray.cluster_resources()
    wanted = {"CPU" if s.gpu is None else backend.gpu_resource or "GPU" for s in slots}
    missing = sorted(name for name in wanted if total.get(name, 0) <= 0)
    if missing:
        have = ", ".join(
            f"{k} {v:g}" for k, v in sorted(total.items()) if not k.startswith(("node:", "memory", "object_store"))
        )
        fix = (
            (
                "run on CPU slots (no gpu_ids), or name the custom resource the cluster declares its GPUs as with "
                "--ray-gpu-resource"
            )
            if missing == ["GPU"]
            else f"start the cluster with {missing[0]} resources"
        )
        raise ConfigError(f"--backend ray: the Ray cluster has no {missing[0]} (it has {have or 'nothing'}); {fix}")


def _connect(ray: ModuleType, backend: RayBackend, slots: list[DeviceSlot]) -> None:
    """A cluster's workers find this source tree through the job's runtime environment. A Ray
    started here inherits it from this process instead: its prestarted worker processes then serve
    the slots' actors at once (a job-level runtime environment would need fresh ones, seconds each)."""
    python_path = {"PYTHONPATH": os.pathsep.join(p for p in (SRC_DIR, os.environ.get("PYTHONPATH")) if p)}
    common: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False, "logging_level": logging.ERROR}
    if backend.address is not None:
        ray.init(address=backend.address, runtime_env={"env_vars": python_path}, **common)
        return
    gpus = sorted({s.gpu for s in slots if s.gpu is not None}, key=int)
    local: dict[str, Any] = {"num_cpus": max(os.cpu_count() or 1, sum(1 for s in slots if s.gpu is None))}
    if gpus and backend.gpu_resource:
        local["resources"] = {backend.gpu_resource: len(gpus)}
    # A Ray started here sees only the listed GPUs (it masks its workers among them).
    mask = {"CUDA_VISIBLE_DEVICES": ",".join(gpus)} if gpus and not backend.gpu_resource else {}
    with _environment({**python_path, **mask}):
        ray.init(**common, **local)


@contextlib.contextmanager
def _environment(values: dict[str, str]) -> Iterator[None]:
    """`values` in this process's environment while Ray starts (its processes inherit them)."""
    previous = {name: os.environ.get(name) for name in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for name, value in previous.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


@contextlib.contextmanager
def ray_session(backend: RayBackend, slots: list[DeviceSlot]) -> Iterator[ModuleType]:
    """Ray, connected for the run (to `backend.address`, or to an instance started here) and shut
    down (disconnected, or stopped) at its end. SIGTERM keeps the run's handler: ray.init installs
    its own, which would end the run without unwinding it."""
    ray = import_ray()
    handler = signal.getsignal(signal.SIGTERM) if threading.current_thread() is threading.main_thread() else None
    started = time.monotonic()
    try:
        _connect(ray, backend, slots)
    except Exception as exc:  # Ray raises a bare Exception for a node that timed out starting, among others
        ray.shutdown()  # what a failed start left running
        where = f"--address {backend.address}" if backend.address else "--backend ray"
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise ConfigError(
            f"{where}: cannot start or reach Ray ({first}); check the address (`ray status` on the head "
            "prints it), and for a cluster with token authentication set RAY_AUTH_MODE=token with the "
            "cluster's token in ~/.ray/auth_token (docs/ray.md)"
        ) from None
    finally:
        if handler is not None:
            signal.signal(signal.SIGTERM, handler)
    logger.info("Ray ready in %.1f s (%s)", time.monotonic() - started, backend.address or "started here")
    try:
        _cluster_check(ray, slots, backend)
        yield ray
    finally:
        ray.shutdown()
