"""Speed-of-light floors: the least time any correct kernel can take for a case.

A candidate timed under its floor did not do the work (a patched timer, a cached result, work the
events never saw), so its speedup is impossible: a failure, never a reward. The floors and their
constants live in the judge, which never imports candidate code. Two bounds, the larger wins:

- bytes: the fewest bytes a correct kernel must move (`KernelTask.min_bytes`; without it, the
  bytes of the outputs) over the DRAM peak (two transfers per memory clock times the bus width,
  from the driver). Not a measured copy's bandwidth: on the H200 honest kernels ran at up to
  1.08x a copy's rate, and the copy's own rate varied by over 10% between processes. Every timed
  call reads inputs the judge just wrote and then flushed from the L2;
- flops: the fewest operations it must do (`KernelTask.min_flops`) over the card's peak dense
  tensor-core rate for operands of the task's width (`KernelTask.flops_operand_bits`). 32-bit
  work is bounded by the 16-bit rate: no TF32 or split-precision trick beats it.

Flops peaks are NVIDIA's published dense rates, as operations per SM per clock, at the card's
maximum SM clock, so they are upper bounds. An architecture missing from the table gets no flops
floor; a driver that does not report the memory clock gets a measured copy's bandwidth over
COPY_EFFICIENCY. FLOOR_SLACK leaves room for timing noise.
"""

from __future__ import annotations

import ctypes
import functools
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

if TYPE_CHECKING:
    from aka.harness.cases import Case
    from aka.harness.task import KernelTask

FLOOR_SLACK = 0.9
COPY_EFFICIENCY = 0.8  # a large copy reaches 80-90% of the DRAM peak (H200: 3.5-4.0 of 4.8 TB/s)

# Dense tensor-core operations per SM per clock, by compute capability and operand width in bits
# (A100, A10/A40/A6000, L4/L40S, H100/H200 datasheets: peak rate / (SMs x boost clock)).
TENSOR_OPS_PER_SM_CLOCK: dict[tuple[int, int], dict[int, int]] = {
    (8, 0): {16: 2048, 8: 4096},
    (8, 6): {16: 1024, 8: 2048},
    (8, 9): {16: 1024, 8: 2048},
    (9, 0): {16: 4096, 8: 8192},
}
# When torch does not report the SM clock: above any data-center part's boost clock (a lenient floor).
FALLBACK_CLOCK_KHZ = 3_000_000


@dataclass(frozen=True)
class Floor:
    ms: float
    bound: str  # what sets it, for the failure message

    def rejects(self, time_ms: float) -> bool:
        return time_ms < FLOOR_SLACK * self.ms


@functools.cache
def copy_bandwidth(device: torch.device) -> float:
    """Bytes per millisecond of a large device-to-device copy (read + write): the best of ten."""
    source = torch.empty(256 * 1024 * 1024, dtype=torch.uint8, device=device)
    target = torch.empty_like(source)
    times = []
    for _ in range(10):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)  # type: ignore[no-untyped-call]
        start.record()
        target.copy_(source)
        end.record()
        torch.cuda.synchronize(device)
        times.append(start.elapsed_time(end))
    return float(2 * source.numel() / min(times))


def dram_peak_from_driver(ordinal: int) -> float | None:
    """Bytes per millisecond: 2 x memory clock (kHz) x bus width (bytes), from libcuda's device
    attributes (CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE = 36, GLOBAL_MEMORY_BUS_WIDTH = 37)."""
    try:
        cuda = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return None
    handle, clock_khz, width_bits = ctypes.c_int(), ctypes.c_int(), ctypes.c_int()
    if (
        cuda.cuInit(0)
        or cuda.cuDeviceGet(ctypes.byref(handle), ordinal)
        or cuda.cuDeviceGetAttribute(ctypes.byref(clock_khz), 36, handle)
        or cuda.cuDeviceGetAttribute(ctypes.byref(width_bits), 37, handle)
    ):
        return None
    if clock_khz.value <= 0 or width_bits.value <= 0:
        return None
    return 2.0 * clock_khz.value * width_bits.value / 8


@functools.cache
def device_bandwidth(device: torch.device) -> float:
    """The DRAM bandwidth no kernel exceeds, in bytes per millisecond."""
    ordinal = device.index if device.index is not None else torch.cuda.current_device()
    peak = dram_peak_from_driver(ordinal)
    measured = copy_bandwidth(device)
    return max(peak, measured) if peak is not None else measured / COPY_EFFICIENCY


def peak_ops_per_ms(capability: tuple[int, int], sms: int, clock_khz: int, operand_bits: int) -> float | None:
    """The card's dense tensor-core peak for `operand_bits`-wide operands (wider ones: the
    16-bit rate), or None for an architecture not in the table."""
    rates = TENSOR_OPS_PER_SM_CLOCK.get(capability)
    if rates is None:
        return None
    per_clock = rates[8] if operand_bits <= 8 else rates[16]
    return float(per_clock * sms * clock_khz)  # kHz is clocks per ms


@functools.cache
def device_peak_ops_per_ms(device: torch.device, operand_bits: int) -> float | None:
    props = torch.cuda.get_device_properties(device)
    clock_khz = int(getattr(props, "clock_rate", 0) or FALLBACK_CLOCK_KHZ)
    return peak_ops_per_ms((props.major, props.minor), props.multi_processor_count, clock_khz, operand_bits)


def case_floor(task: KernelTask, case: Case, device: torch.device, output_bytes: int = 0) -> Floor | None:
    """The larger of the case's bytes floor and flops floor on `device` (every timed call begins
    with a flushed L2). A task that declares no `min_bytes` still gets one: the bytes of its
    outputs, which any correct kernel writes at least once (None: nothing to bound by)."""
    floors: list[Floor] = []
    if task.min_bytes is not None:
        floors.append(Floor(task.min_bytes(case) / device_bandwidth(device), "the minimum bytes at the DRAM peak"))
    elif output_bytes > 0:
        floors.append(Floor(output_bytes / device_bandwidth(device), "the output's bytes at the DRAM peak"))
    if task.min_flops is not None:
        peak = device_peak_ops_per_ms(device, task.flops_operand_bits)
        if peak is not None:
            floors.append(
                Floor(
                    task.min_flops(case) / peak,
                    f"the minimum flops at the {task.flops_operand_bits}-bit tensor-core peak",
                )
            )
    return max(floors, key=lambda floor: floor.ms, default=None)
