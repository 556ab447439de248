"""What accelerator this process sees, and whether it is the one a run asks for."""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass

from aka.errors import PreflightError

AUTO_GPU_MODEL = "auto"
CPU_MODEL = "cpu"
_KNOWN_MODELS = ("GH200", "H200", "H100", "H800", "H20", "B200", "B100", "GB200", "A100", "A800", "A10G",
                 "A10", "A40", "A30", "L40S", "L40", "L4", "T4", "V100", "RTX", "MI355X", "MI325X", "MI300X",
                 "MI300A", "MI300", "MI250X", "MI250")


@dataclass(frozen=True)
class DeviceInfo:
    """The detected device: `kind` is `cuda` or `cpu`; `model` is the short name runs are named by."""

    kind: str
    model: str
    name: str
    arch: str | None
    count: int
    driver: str | None = None

    @property
    def is_gpu(self) -> bool:
        return self.kind == "cuda"


def short_model_name(full_name: str) -> str:
    """`NVIDIA H200` -> `H200`; `NVIDIA A100-SXM4-80GB` -> `A100`; unknown names keep their last word."""
    upper = full_name.upper()
    for model in _KNOWN_MODELS:
        if re.search(rf"(^|[\s_-]){model}($|[\s_-])", upper):
            return model
    words = re.split(r"[\s]+", full_name.replace("NVIDIA", "").strip())
    return re.sub(r"[^A-Za-z0-9]", "", words[0]) if words and words[0] else "GPU"


def _driver_version() -> str | None:
    if not shutil.which("nvidia-smi"):
        return None
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
            capture_output=True, text=True, timeout=20, check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip().splitlines()[0] if out.returncode == 0 and out.stdout.strip() else None


def detect_device() -> DeviceInfo:
    """Ask torch for the first visible CUDA device; no device (or no torch CUDA) means the CPU."""
    try:
        import torch
    except ImportError:
        return DeviceInfo("cpu", CPU_MODEL, "cpu (torch not installed)", None, 0)
    if not torch.cuda.is_available():
        return DeviceInfo("cpu", CPU_MODEL, "cpu", None, 0)
    props = torch.cuda.get_device_properties(0)
    arch = f"sm_{props.major}{props.minor}"
    return DeviceInfo("cuda", short_model_name(props.name), props.name, arch, torch.cuda.device_count(),
                      _driver_version())


def resolve_target_model(target: str, device: DeviceInfo, source: str) -> str:
    """Return the model name to run under, or fail preflight when `target` is not this device."""
    if target.lower() == AUTO_GPU_MODEL:
        return device.model
    if target.lower() == device.model.lower():
        return device.model
    raise PreflightError(
        f"{source}: field 'target_gpu_model': '{target}' does not match the detected device "
        f"'{device.name}' ({device.model}); set it to '{device.model}' or 'auto'"
    )
