"""Device slots and the GPU mask of a parallel run's workers."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from aka.errors import ConfigError
from aka.parallel.executor import DeviceSlot, device_slots, every_gpu_here, slot_environment

REPO = Path(__file__).resolve().parents[2]


def test_slots_are_gpus_times_workers_per_gpu_or_cpu_workers() -> None:
    assert device_slots(None, None, "f") == [DeviceSlot(None, 0)]
    assert device_slots(None, 3, "f") == [DeviceSlot(None, 0), DeviceSlot(None, 1), DeviceSlot(None, 2)]
    assert device_slots("0,2", 2, "f") == [
        DeviceSlot("0", 0),
        DeviceSlot("0", 1),
        DeviceSlot("2", 0),
        DeviceSlot("2", 1),
    ]
    assert device_slots([1, 3], None, "f") == [DeviceSlot("1", 0), DeviceSlot("3", 0)]
    assert device_slots(5, None, "f") == [DeviceSlot("5", 0)]
    assert [s.worker_id for s in device_slots("0", 2, "f")] == ["gpu0-0", "gpu0-1"]


def test_all_gpus_are_the_ones_this_machine_shows() -> None:
    assert every_gpu_here(4, here=True) == "0,1,2,3"
    assert device_slots(every_gpu_here(2, here=True), 2, "--gpus") == [
        DeviceSlot("0", 0),
        DeviceSlot("0", 1),
        DeviceSlot("1", 0),
        DeviceSlot("1", 1),
    ]
    assert device_slots(every_gpu_here(0, here=True), 3, "--gpus") == [DeviceSlot(None, i) for i in range(3)]
    with pytest.raises(ConfigError, match="--gpus all: the cluster's GPUs are not this machine's"):
        every_gpu_here(8, here=False)


@pytest.mark.parametrize(("gpu_ids", "expected"), [("0,1,2,3", "--gpus 0,1,2,3"), ("", "--gpus all")])
def test_make_parallel_run_passes_the_gpus_or_all(gpu_ids: str, expected: str) -> None:
    """The seed's `make parallel-run GPU_IDS=...` (dry run: the command make would run)."""
    shown = subprocess.run(
        ["make", "-n", "--no-print-directory", "parallel-run", "CONFIG=c.yaml", f"GPU_IDS={gpu_ids}", "RUN_ARGS=-q"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()[-1]
    assert shown.endswith(f"aka run c.yaml {expected} -q"), shown


@pytest.mark.parametrize("bad", ["0,0", "a,1", "0,,1"])
def test_a_bad_gpu_list_names_the_field(bad: str) -> None:
    with pytest.raises(ConfigError, match="--gpus: .*distinct GPU indices"):
        device_slots(bad, None, "--gpus")


def test_a_worker_is_masked_to_its_gpu_and_rocr_is_left_alone() -> None:
    env = slot_environment(DeviceSlot("3", 1), {"ROCR_VISIBLE_DEVICES": "0,1,2,3", "PATH": "/bin"})
    assert env["CUDA_VISIBLE_DEVICES"] == env["HIP_VISIBLE_DEVICES"] == "3"
    assert env["ROCR_VISIBLE_DEVICES"] == "0,1,2,3" and env["PATH"] == "/bin"
    assert env["AKA_WORKER_SLOT"] == "gpu3-1"
    cpu = slot_environment(DeviceSlot(None, 0), {"CUDA_VISIBLE_DEVICES": "1"})
    assert cpu["CUDA_VISIBLE_DEVICES"] == "1"
