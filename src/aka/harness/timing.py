"""Timing one call of a kernel: CUDA events around each call, the L2 flushed before every one.

Why this method: H200 measurements (shared/H200_TIMING_FACTS.md) show that CUDA events with a
large L2 flush before each call and the median of about 100 calls repeat to within 0.2%, while
events without a flush read warm-cache times that drift by several percent. The flush also keeps
the GPU busy while the host enqueues the timed call, so Python launch overhead is not counted for
kernels shorter than the flush. On the CPU the wall clock is used, and only to prove the step runs:
times under Triton's interpreter mean nothing, so that path is kept short.
"""

from __future__ import annotations

import logging
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass

import torch

from aka.evaluation.wire import EVENTS_MEDIAN, WALL_CLOCK_MEDIAN

CUDA_METHOD, CPU_METHOD = EVENTS_MEDIAN, WALL_CLOCK_MEDIAN
DEFAULT_L2_BYTES = 256 * 1024 * 1024
MIN_FLUSH_BYTES = 256 * 1024 * 1024

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TimingConfig:
    """How many calls to make; the CUDA repetitions adapt to `budget_s` between the two bounds."""

    warmup: int = 5
    min_reps: int = 20
    max_reps: int = 100
    budget_s: float = 2.0
    cpu_warmup: int = 1
    cpu_reps: int = 3


@dataclass(frozen=True)
class Timing:
    """The median time of one call, how it was measured, and how many calls that median covers."""

    time_ms: float
    method: str
    reps: int


def l2_cache_bytes(device: torch.device) -> int:
    """The device's L2 size from its properties, or 256 MiB when the driver does not say."""
    size = int(getattr(torch.cuda.get_device_properties(device), "L2_cache_size", 0) or 0)
    return size if size > 0 else DEFAULT_L2_BYTES


def flush_buffer(device: torch.device) -> torch.Tensor:
    """At least twice the L2 (and at least 256 MiB, so the flush outlasts a Python launch)."""
    size = max(2 * l2_cache_bytes(device), MIN_FLUSH_BYTES)
    return torch.empty(size // 4, dtype=torch.int32, device=device)


def _time_cuda(fn: Callable[[], object], device: torch.device, config: TimingConfig) -> Timing:
    flush = flush_buffer(device)
    for _ in range(config.warmup):
        fn()
    torch.cuda.synchronize(device)
    start_probe = time.perf_counter()
    for _ in range(2):
        flush.zero_()
        fn()
    torch.cuda.synchronize(device)
    per_call_s = max((time.perf_counter() - start_probe) / 2, 1e-6)
    reps = max(config.min_reps, min(config.max_reps, int(config.budget_s / per_call_s)))
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]  # type: ignore[no-untyped-call]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]  # type: ignore[no-untyped-call]
    for start, end in zip(starts, ends, strict=True):
        flush.zero_()
        start.record()
        fn()
        end.record()
    torch.cuda.synchronize(device)
    times = [start.elapsed_time(end) for start, end in zip(starts, ends, strict=True)]
    return Timing(statistics.median(times), CUDA_METHOD, reps)


def _time_cpu(fn: Callable[[], object], config: TimingConfig) -> Timing:
    for _ in range(config.cpu_warmup):
        fn()
    times: list[float] = []
    for _ in range(max(config.cpu_reps, 1)):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1000.0)
    return Timing(max(statistics.median(times), 1e-6), CPU_METHOD, len(times))


def time_function(fn: Callable[[], object], device: torch.device | str, config: TimingConfig | None = None) -> Timing:
    """The median time of `fn()` in milliseconds on `device` (`cuda` or `cpu`)."""
    dev = torch.device(device)
    settings = config or TimingConfig()
    timing = _time_cuda(fn, dev, settings) if dev.type == "cuda" else _time_cpu(fn, settings)
    log.debug("timed %d calls: median %.4f ms (%s)", timing.reps, timing.time_ms, timing.method)
    return timing
