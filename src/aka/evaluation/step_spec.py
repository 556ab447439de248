"""What a step is: its name, what it exercises, its commands and timeout, and the environment it
gets (the evaluator's half of the contract in `aka.evaluation.wire`, docs/result-format.md)."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from enum import Enum
from pathlib import Path

from aka.config.tasks import Task
from aka.device import DeviceInfo
from aka.errors import ConfigError, PreflightError
from aka.evaluation.confine import ENV_GPU_UUID, gpu_minor
from aka.evaluation.wire import (
    BASELINE_SOURCES_DIR,
    ENV_ALLOCATION_SHIFTS,
    ENV_BASELINE,
    ENV_BASELINE_DIR,
    ENV_CASE_PROFILE,
    ENV_CUDA_ARCH,
    ENV_DEVICE,
    ENV_ONE_TURN,
    ENV_PHASED_SET_UP,
    ENV_PLACEMENTS,
    ENV_STEP,
    ENV_TARGET,
    ENV_TARGET_KERNELS,
    ENV_TASK_FAMILY,
    ENV_TIMING_BUDGET,
)

SRC_ROOT = Path(__file__).resolve().parents[2]
# The evaluator's own AKA_ settings a step also reads.
PASSED_THROUGH = frozenset(
    {
        "AKA_NO_WORKER_SANDBOX",
        ENV_PLACEMENTS,
        ENV_TIMING_BUDGET,
        ENV_PHASED_SET_UP,
        ENV_ONE_TURN,
        ENV_ALLOCATION_SHIFTS,
    }
)


# What of this process's environment a step may see: what compilers, CUDA, ROCm, Triton, torch and
# the C library read, nothing else. A deny-list let every other variable through: a reward server's
# bearer token, a trainer's API keys, cloud credentials, all readable by candidate code (red team D,
# session 53). `AKA_STEP_ENV` (comma-separated names) adds names a machine's own tools need.
STEP_ENV_NAMES = frozenset(
    {
        "PATH", "HOME", "USER", "LOGNAME", "SHELL", "TERM", "LANG", "LANGUAGE", "TZ",
        "LD_LIBRARY_PATH", "PYTHONPATH", "VIRTUAL_ENV", "CONDA_PREFIX",
        "CC", "CXX", "CUDAHOSTCXX", "CFLAGS", "CXXFLAGS", "LDFLAGS", "CPATH", "LIBRARY_PATH",
        "C_INCLUDE_PATH", "CPLUS_INCLUDE_PATH", "PKG_CONFIG_PATH", "MAX_JOBS",
        "OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS",
    }
)  # fmt: skip
STEP_ENV_PREFIXES = ("LC_", "CUDA_", "NVIDIA_", "NVCC_", "CUDNN_", "CUBLAS", "TRITON_", "TORCH_", "PYTORCH_",
                     "ROCM_", "HIP_", "HSA_", "ROCR_", "AMD_")  # fmt: skip
ENV_STEP_ENV = "AKA_STEP_ENV"
# ...and never, under those names and prefixes, what reads as a credential (NVIDIA_API_KEY for
# NVIDIA's model endpoints, a TORCH_HUB_TOKEN: red team E, session 53) unless `AKA_STEP_ENV` names it
SECRET_WORDS = ("KEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL", "AUTH", "COOKIE")


def _allowed(name: str) -> bool:
    if any(word in name.upper() for word in SECRET_WORDS):
        return False
    return name in STEP_ENV_NAMES or name.startswith(STEP_ENV_PREFIXES)


def host_environment(every_name: bool = False) -> dict[str, str]:
    """The part of this process's environment a step gets (`STEP_ENV_NAMES`, `STEP_ENV_PREFIXES`
    but no name with a `SECRET_WORDS` word, the names in `$AKA_STEP_ENV`, the evaluator's settings
    in `PASSED_THROUGH`), with this interpreter's folder first on `PATH` and aka's sources first on
    `PYTHONPATH`. `every_name`: every variable but the `AKA_` ones (an agent's shell, which needs
    its CLI's settings)."""
    extra = {name.strip() for name in os.environ.get(ENV_STEP_ENV, "").split(",") if name.strip()}
    env = {
        k: v
        for k, v in os.environ.items()
        if k != "TRITON_INTERPRET"
        and (k in PASSED_THROUGH or (not k.startswith("AKA_") and (every_name or k in extra or _allowed(k))))
    }
    env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(SRC_ROOT), env.get("PYTHONPATH", "")) if p)
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


class Step(str, Enum):
    COMPILE = "compile"
    CORRECTNESS = "correctness"
    PERFORMANCE = "performance"
    EXPORT = "export"


class Target(str, Enum):
    """What a step exercises: the sources in the evaluation directory (paired with the baseline in
    the performance step), the PyTorch reference, or the task's baseline timed alone."""

    CANDIDATE = "candidate"
    REFERENCE = "reference"
    BASELINE = "baseline"


def step_commands(task: Task, step: Step) -> list[str]:
    return list(getattr(task.config, f"{step.value}_command"))


def step_timeout(task: Task, step: Step) -> float:
    return float(getattr(task.config, f"{step.value}_timeout"))


def case_profile(device: DeviceInfo, heldout: bool = False) -> str:
    """`full` on a GPU, `ci` (small cases) on the CPU; `heldout`/`heldout_ci` for the hidden cases."""
    base = "full" if device.is_gpu else "ci"
    return ("heldout" if base == "full" else "heldout_ci") if heldout else base


def own_gpu(device: DeviceInfo, env: Mapping[str, str]) -> str | None:
    """The UUID of the one NVIDIA GPU that `env` masks its processes to (`CUDA_VISIBLE_DEVICES`
    names one: a device of several, a parallel worker's slot) and whose node the driver's table
    names, else None (every GPU visible, or no table: a ROCm machine, a MIG instance)."""
    visible = env.get("CUDA_VISIBLE_DEVICES", "")
    if device.is_gpu and device.uuid and visible.strip() and "," not in visible and gpu_minor(device.uuid) is not None:
        return device.uuid
    return None


def step_environment(
    task: Task,
    device: DeviceInfo,
    step: Step,
    target: Target,
    eval_dir: Path,
    extra: dict[str, str] | None = None,
    every_name: bool = False,
) -> dict[str, str]:
    """The contract of docs/result-format.md: who runs, on what, and what is being judged, over
    `host_environment` (`every_name`: an agent's shell)."""
    env = host_environment(every_name=every_name)
    env.update(
        {
            ENV_STEP: step.value,
            ENV_DEVICE: device.kind,
            ENV_TARGET: target.value,
            ENV_CASE_PROFILE: case_profile(device),
            ENV_TASK_FAMILY: task.family,
            ENV_TARGET_KERNELS: ",".join(task.config.target_kernel_functions),
            ENV_BASELINE: task.config.baseline_source.value,
            ENV_BASELINE_DIR: str(eval_dir / BASELINE_SOURCES_DIR),
        }
    )
    env.update(device.mask)
    if (uuid := own_gpu(device, env)) is not None:  # its /dev keeps only this GPU's node (`confine`)
        env[ENV_GPU_UUID] = env["CUDA_VISIBLE_DEVICES"] = uuid  # by UUID: CUDA then numbers it 0
    if device.is_gpu and device.arch:
        env[ENV_CUDA_ARCH] = device.arch
    else:
        env["TRITON_INTERPRET"] = "1"
    env.update(extra or {})
    return env


def check_step_settings() -> None:
    """The evaluator's own settings from the environment (`AKA_TIMING_BUDGET_S`,
    `AKA_DEVICE_YIELD_AFTER_S`), checked before anything runs: a bad one would otherwise fail
    every evaluation of a run. Raises `PreflightError` naming the variable and the fix."""
    from aka.evaluation.device_lock import yield_after_s
    from aka.evaluation.wire import timing_budget_s

    try:
        timing_budget_s()
        yield_after_s()
    except (ValueError, ConfigError) as exc:
        raise PreflightError(str(exc)) from None
