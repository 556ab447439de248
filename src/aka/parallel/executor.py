"""Where workers run: the executor protocol, device slots, and the local backend.

A backend starts one worker per `DeviceSlot` and stops them; the workers themselves claim,
heartbeat and report through the run directory's `aka.parallel.queue`, so a backend that can start
`aka run CONFIG --parallel-worker --worker-id ID --run-name RUN` on a machine that sees the run
directory (Slurm: `srun` on the allocation; Ray: a task per GPU) needs nothing else.
"""

from __future__ import annotations

import ctypes
import logging
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from aka.errors import ConfigError
from aka.parallel.queue import QUEUE_DIR, WORKERS_DIR
from aka.process import PR_SET_PDEATHSIG

logger = logging.getLogger(__name__)

STOP_GRACE_SECONDS = 10.0
MASK_VARIABLES = ("CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES")


@dataclass(frozen=True)
class DeviceSlot:
    """One worker's place: a GPU id to mask the worker to (None: no mask, a CPU slot) and which
    of the GPU's `num_parallel` workers it is."""

    gpu: str | None
    index: int

    @property
    def worker_id(self) -> str:
        return f"gpu{self.gpu}-{self.index}" if self.gpu is not None else f"cpu-{self.index}"


ALL_GPUS = "all"  # `--gpus all`: every GPU this machine shows


def every_gpu_here(count: int, here: bool) -> str:
    """`--gpus all` as ids (`make parallel-run` without GPU_IDS, as the seed discovers them): every
    GPU this machine shows, or "" (the config's CPU workers) where it shows none."""
    if not here:
        raise ConfigError("--gpus all: the cluster's GPUs are not this machine's; list GPU ids, e.g. 0,1,2,3")
    if count == 0:
        logger.warning("--gpus all: no GPU here; running the config's num_parallel CPU workers")
    return ",".join(str(i) for i in range(count))


def device_slots(gpu_ids: str | int | list[int] | None, num_parallel: int | None, field: str) -> list[DeviceSlot]:
    """`num_parallel` slots per listed GPU, or `num_parallel` unmasked slots without `gpu_ids`.
    One slot (or none asked for) is the serial run."""
    per_device = num_parallel or 1
    if gpu_ids is None or gpu_ids == "" or gpu_ids == []:
        return [DeviceSlot(None, i) for i in range(per_device)]
    listed = gpu_ids.split(",") if isinstance(gpu_ids, str) else [gpu_ids] if isinstance(gpu_ids, int) else gpu_ids
    ids = [str(g).strip() for g in listed]
    if any(not g.isdigit() for g in ids) or len(set(ids)) != len(ids):
        raise ConfigError(f"{field}: '{gpu_ids}': list distinct GPU indices, e.g. 0,1,2,3")
    return [DeviceSlot(g, i) for g in ids for i in range(per_device)]


def slot_environment(slot: DeviceSlot, base: dict[str, str]) -> dict[str, str]:
    """The worker's environment, masked to its GPU. ROCR_VISIBLE_DEVICES is left as inherited:
    HIP numbers its devices after ROCR's mask, so setting both to the same id would hide the GPU."""
    env = dict(base)
    if slot.gpu is not None:
        env.update({name: slot.gpu for name in MASK_VARIABLES})
    env["AKA_WORKER_SLOT"] = slot.worker_id
    return env


class Executor(Protocol):
    """A backend's side of a parallel run: start a worker on a slot, watch, stop. Claiming,
    heartbeats and reports are the worker's, through the queue (aka.parallel.queue)."""

    def start(self, slot: DeviceSlot) -> None: ...

    def exited(self) -> dict[DeviceSlot, int]:
        """Workers that ended since they were started, with their exit status."""
        ...

    def stop(self) -> None:
        """Stop every worker still running (their steps go with them)."""
        ...

    def kill(self, worker_id: str, pid: int) -> None:
        """Kill a worker whose lease lapsed (silent, stopped), so that it frees the locks it holds
        and its trial runs elsewhere; nothing when it is not this executor's."""
        ...


def _die_with_parent(parent: int) -> None:
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent:
        os._exit(1)


class LocalExecutor:
    """One `aka run --parallel-worker` child process per slot on this machine. Each is killed
    when the thread that started it dies (PR_SET_PDEATHSIG, so `kill -9` of the parent takes
    them along) and gets SIGTERM, then SIGKILL, from `stop`."""

    def __init__(self, config_path: Path, run_dir: Path) -> None:
        self.config_path, self.run_dir = config_path, run_dir
        self.workers: dict[DeviceSlot, subprocess.Popen[bytes]] = {}

    def start(self, slot: DeviceSlot) -> None:
        log = self.run_dir / QUEUE_DIR / WORKERS_DIR / f"{slot.worker_id}.log"
        log.parent.mkdir(parents=True, exist_ok=True)
        argv = [
            sys.executable,
            "-m",
            "aka.cli",
            "run",
            str(self.config_path),
            "--parallel-worker",
            "--worker-id",
            slot.worker_id,
            "--run-name",
            str(self.run_dir),
        ]
        env = slot_environment(slot, dict(os.environ))
        src = str(Path(__file__).resolve().parents[2])
        env["PYTHONPATH"] = os.pathsep.join(p for p in (src, env.get("PYTHONPATH")) if p)
        parent = os.getpid()
        with log.open("ab") as out:
            self.workers[slot] = subprocess.Popen(
                argv,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=lambda: _die_with_parent(parent),
            )

    def exited(self) -> dict[DeviceSlot, int]:
        ended = {slot: proc.returncode for slot, proc in self.workers.items() if proc.poll() is not None}
        for slot in ended:
            del self.workers[slot]
        return ended

    def kill(self, worker_id: str, pid: int) -> None:
        for slot, proc in self.workers.items():
            if slot.worker_id == worker_id and proc.pid == pid and proc.poll() is None:
                _signal_group(proc.pid, signal.SIGKILL)
                proc.wait()

    def stop(self) -> None:
        for proc in self.workers.values():
            _signal_group(proc.pid, signal.SIGTERM)
            _signal_group(proc.pid, signal.SIGCONT)  # a stopped worker handles its SIGTERM too
        deadline = time.monotonic() + STOP_GRACE_SECONDS
        for proc in self.workers.values():
            try:
                proc.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
            _signal_group(proc.pid, signal.SIGKILL)
            proc.wait()
        self.workers.clear()


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        pass
