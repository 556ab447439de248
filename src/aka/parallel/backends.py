"""Which backend starts a parallel run's workers: this machine (`LocalExecutor`) or Ray
(`RayExecutor`, connected for the run and disconnected after it)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from pathlib import Path

from aka.errors import ConfigError
from aka.parallel.executor import DeviceSlot, Executor, LocalExecutor
from aka.parallel.ray_executor import RayBackend, RayExecutor, aka_worker_args, ray_session

BACKENDS = ("local", "ray")
ExecutorMaker = Callable[[Path, Path], Executor]  # (config path, run directory) -> the run's executor


def chosen_backend(name: str, address: str | None, gpu_resource: str | None) -> RayBackend | None:
    """The CLI's --backend, --address and --ray-gpu-resource: None for the local backend."""
    if name not in BACKENDS:
        raise ConfigError(f"--backend {name}: use local or ray")
    if name == "local":
        if address is not None or gpu_resource is not None:
            raise ConfigError("--address and --ray-gpu-resource go with --backend ray")
        return None
    return RayBackend(address, gpu_resource)


@contextlib.contextmanager
def executors(ray: RayBackend | None, slots: list[DeviceSlot], per_gpu: int) -> Iterator[ExecutorMaker]:
    """The run's executor maker, with Ray connected around the run where it is the backend."""
    if ray is None:
        yield LocalExecutor
        return
    with ray_session(ray, slots) as module:
        yield lambda config, run_dir: RayExecutor(
            module, run_dir, aka_worker_args(config, run_dir), per_gpu, ray.gpu_resource
        )
