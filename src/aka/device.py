"""What accelerator this process sees, and whether it is the one a run asks for."""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass

from aka.errors import PreflightError

AUTO_GPU_MODEL = "auto"
CPU_MODEL = "cpu"
_KNOWN_MODELS = (
    "GH200",
    "H200",
    "H100",
    "H800",
    "H20",
    "B200",
    "B100",
    "GB200",
    "A100",
    "A800",
    "A10G",
    "A10",
    "A40",
    "A30",
    "L40S",
    "L40",
    "L4",
    "T4",
    "V100",
    "RTX",
    "MI355X",
    "MI325X",
    "MI300X",
    "MI300A",
    "MI300",
    "MI250X",
    "MI250",
)


@dataclass(frozen=True)
class DeviceInfo:
    """The detected device: `kind` is `cuda` or `cpu`; `model` is the short name runs are named by."""

    kind: str
    model: str
    name: str
    arch: str | None
    count: int
    driver: str | None = None
    uuid: str | None = None  # the physical device, whatever the mask
    index: int | None = None  # set for one GPU of several (`detect_devices`): steps are masked to it

    @property
    def mask(self) -> dict[str, str]:
        """The environment that shows a step this device alone (none for the default device)."""
        if self.index is None or not self.is_gpu:
            return {}
        visible = self.uuid or str(self.index)
        return {"CUDA_VISIBLE_DEVICES": visible, "HIP_VISIBLE_DEVICES": str(self.index)}

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
            capture_output=True,
            text=True,
            timeout=20,
            check=False,
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
    return _gpu(0, torch.cuda.device_count(), _driver_version(), pinned=False)


def detect_devices() -> list[DeviceInfo]:
    """Every visible GPU, each with its `index` (so its steps are masked to it); the CPU alone
    where there is none."""
    device = detect_device()
    if not device.is_gpu:
        return [device]
    return [_gpu(index, device.count, device.driver, pinned=True) for index in range(device.count)]


def _gpu(index: int, count: int, driver: str | None, pinned: bool) -> DeviceInfo:
    import torch

    props = torch.cuda.get_device_properties(index)
    uuid = getattr(props, "uuid", None)
    return DeviceInfo(
        "cuda",
        short_model_name(props.name),
        props.name,
        f"sm_{props.major}{props.minor}",
        count,
        driver,
        f"GPU-{uuid}" if uuid is not None else None,
        index if pinned else None,
    )


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


def chosen_devices(gpus: str | None, source: str) -> list[DeviceInfo]:
    """`None`: every visible GPU (the CPU where there is none); `0,2`: those GPUs, by index."""
    available = detect_devices()
    if gpus is None or gpus.strip().lower() == "all":
        return available
    try:
        wanted = [int(part) for part in gpus.split(",") if part.strip()]
    except ValueError:
        raise PreflightError(f"{source} {gpus}: give GPU indexes separated by commas, e.g. 0,1") from None
    if not available[0].is_gpu:
        raise PreflightError(f"{source} {gpus}: no GPU is visible here (leave {source} out to use the CPU)")
    missing = [i for i in wanted if not 0 <= i < len(available)]
    if missing or not wanted:
        raise PreflightError(
            f"{source} {gpus}: GPU {missing[0] if missing else '?'} is not visible "
            f"(this machine shows {len(available)}: 0-{len(available) - 1})"
        )
    return [available[i] for i in wanted]
