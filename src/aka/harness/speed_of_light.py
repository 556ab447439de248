"""Speed-of-light floors: the least time any correct kernel can take for a case.

A candidate timed under its floor did not do the work (a patched timer, a cached result, work the
events never saw), so its speedup is impossible: a failure, never a reward. Two bounds, the
larger wins:

- bytes: the fewest bytes a correct kernel must move (`KernelTask.min_bytes`) over the measured
  bandwidth of a large device-to-device copy;
- flops: the fewest operations it must do (`KernelTask.min_flops`) over the card's peak dense
  tensor-core rate for operands of the task's width (`KernelTask.flops_operand_bits`). 32-bit
  work is bounded by the 16-bit rate: no TF32 or split-precision trick beats it.

Peaks are NVIDIA's published dense rates, as operations per SM per clock, at the card's maximum
SM clock, so they are upper bounds. An architecture missing from the table gets no flops floor.
FLOOR_SLACK leaves room for timing noise.
"""

from __future__ import annotations

import functools
import statistics
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

if TYPE_CHECKING:
    from aka.harness.cases import Case
    from aka.harness.runner import KernelTask

FLOOR_SLACK = 0.9

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
def device_bandwidth(device: torch.device) -> float:
    """Bytes per millisecond of a large device-to-device copy (read + write), measured once."""
    source = torch.empty(256 * 1024 * 1024, dtype=torch.uint8, device=device)
    target = torch.empty_like(source)
    times = []
    for _ in range(5):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)  # type: ignore[no-untyped-call]
        start.record()
        target.copy_(source)
        end.record()
        torch.cuda.synchronize(device)
        times.append(start.elapsed_time(end))
    return float(2 * source.numel() / statistics.median(times))


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


def case_floor(task: KernelTask, case: Case, device: torch.device) -> Floor | None:
    """The larger of the case's bytes and flops floors on `device` (None: the task declares neither)."""
    floors: list[Floor] = []
    if task.min_bytes is not None:
        floors.append(Floor(task.min_bytes(case) / device_bandwidth(device),
                            "the minimum bytes at measured bandwidth"))
    if task.min_flops is not None:
        peak = device_peak_ops_per_ms(device, task.flops_operand_bits)
        if peak is not None:
            floors.append(Floor(task.min_flops(case) / peak,
                                f"the minimum flops at the {task.flops_operand_bits}-bit tensor-core peak"))
    return max(floors, key=lambda floor: floor.ms, default=None)
