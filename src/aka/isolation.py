"""Isolation of candidate code: its own PID and network namespaces, and resource limits.

Candidate kernels run inside the task's step processes. In a new PID namespace they cannot see,
signal or stall the evaluator (their parent is invisible to them); in a new network namespace
they have no network. Both come from `unshare`, as root or through an unprivileged user
namespace; where neither works the steps run without them and results say so
(`isolation: []`). Resource limits bound CPU time, core dumps and, on the CPU only, memory (CUDA
reserves far more virtual memory than it uses, so an address-space limit would break it).
"""

from __future__ import annotations

import functools
import os
import resource
import shutil
import subprocess
from dataclasses import dataclass

_UNSHARE_FLAGS = ["--pid", "--net", "--fork", "--mount-proc", "--kill-child"]
CPU_MEMORY_LIMIT_BYTES = 16 * 1024**3


@dataclass(frozen=True)
class Sandbox:
    """The argv prefix that puts a command in fresh namespaces, and what it provides."""

    prefix: tuple[str, ...]
    features: tuple[str, ...]


def _works(prefix: list[str]) -> bool:
    try:
        done = subprocess.run([*prefix, "true"], capture_output=True, timeout=20, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


@functools.cache
def detect_sandbox() -> Sandbox:
    """Namespaces this machine allows, probed once per process; disabled by AKA_NO_SANDBOX=1."""
    unshare = shutil.which("unshare")
    if unshare is None or os.environ.get("AKA_NO_SANDBOX") == "1":
        return Sandbox((), ())
    for extra in ([], ["--user", "--map-root-user"]):
        prefix = [unshare, *extra, *_UNSHARE_FLAGS]
        if _works(prefix):
            return Sandbox(tuple(prefix), ("pid-namespace", "no-network"))
    return Sandbox((), ())


@dataclass(frozen=True)
class ResourceLimits:
    """Applied in the child just before exec (`preexec_fn`)."""

    cpu_seconds: int
    memory_bytes: int | None

    def apply(self) -> None:
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        resource.setrlimit(resource.RLIMIT_CPU, (self.cpu_seconds, self.cpu_seconds + 5))
        if self.memory_bytes is not None:
            resource.setrlimit(resource.RLIMIT_AS, (self.memory_bytes, self.memory_bytes))


def step_limits(timeout_seconds: float, on_gpu: bool) -> ResourceLimits:
    """CPU time: the wall budget times the cores (threads count too); memory only on the CPU."""
    cores = max(os.cpu_count() or 1, 2)
    return ResourceLimits(int(timeout_seconds * cores) + 10, None if on_gpu else CPU_MEMORY_LIMIT_BYTES)
