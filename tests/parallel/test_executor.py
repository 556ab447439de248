"""Device slots and the GPU mask of a parallel run's workers."""

from __future__ import annotations

import pytest

from aka.errors import ConfigError
from aka.parallel.executor import DeviceSlot, device_slots, slot_environment


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
