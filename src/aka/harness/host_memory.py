"""The judge's own host memory on the CPU: what it may still take, and what a case needs of it.

On the CPU a step runs under an address-space limit (aka.evaluation.sandbox.step_limits), and the
judge's buffers (each side's arena with two input sets, its snapshots of the outputs, the float64
copies of a comparison chunk) come out of it and out of the machine's free memory. They are the
harness's, never the candidate's: a case whose buffers do not fit is a `MemoryShortfall` (an
`infra_error` with the sizes), found before any call, and the comparison's chunk shrinks to what is
left rather than failing. Read from /proc; stdlib only.
"""

from __future__ import annotations

import resource
from pathlib import Path

WIDE_BYTES_PER_ELEMENT = 40  # a comparison chunk: two float64 copies, the difference, its masks
MIN_CHUNK, MAX_CHUNK = 1 << 16, 1 << 24


def _proc_kib(path: str, key: str) -> int | None:
    try:
        for line in Path(path).read_text().splitlines():
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def available_bytes() -> int | None:
    """What this process can still allocate: the machine's available memory, and under an
    address-space limit the room left below it (None: unknown, nothing to bound by). Where the
    judge runs short, whose memory it was is read from its fall since the candidate's code loaded
    and from what ending the candidate's worker gives back (`aka.harness.turns.candidate_took`),
    as for a GPU's: the room below the judge's own limit does not come back, the machine's does."""
    free = _proc_kib("/proc/meminfo", "MemAvailable")
    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    if soft == resource.RLIM_INFINITY:
        return free
    used = _proc_kib("/proc/self/status", "VmSize") or 0
    room = max(soft - used, 0)
    return room if free is None else min(free, room)


def comparison_chunk(largest_output: int, budget: int | None = None) -> int:
    """Elements compared per chunk in float64: at most a quarter of what is available."""
    budget = available_bytes() if budget is None else budget
    if budget is None:
        return MAX_CHUNK
    fits = budget // 4 // WIDE_BYTES_PER_ELEMENT
    return max(MIN_CHUNK, min(MAX_CHUNK, fits, max(largest_output, MIN_CHUNK)))


def case_need(inputs_bytes: int, outputs_bytes: int, largest_output: int, sides: int, sets: int) -> int:
    """What the judge still allocates for a case on the CPU: each side's arena (`sets` input sets
    and its outputs), the snapshots of every side's outputs, and one comparison chunk. A worker
    maps its own arena and makes its own outputs: less than this."""
    chunk = min(largest_output, MIN_CHUNK) * WIDE_BYTES_PER_ELEMENT  # the chunk shrinks to fit
    return sides * (sets * inputs_bytes + outputs_bytes) + sides * outputs_bytes + chunk


def host_allocation_failed(exc: BaseException) -> bool:
    """A failed host allocation: torch's CPU allocator reports one as a RuntimeError, not a
    MemoryError."""
    return isinstance(exc, MemoryError) or (
        isinstance(exc, RuntimeError) and ("DefaultCPUAllocator" in str(exc) or "can't allocate memory" in str(exc))
    )
