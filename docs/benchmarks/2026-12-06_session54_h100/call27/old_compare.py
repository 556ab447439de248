"""Comparing a candidate's output with the PyTorch reference, with tolerances chosen by dtype.

A check passes only when shape, dtype and device match, non-finite values sit exactly where the
reference has the same ones, and every finite value is within `atol + rtol * |expected|`.
Integer and boolean outputs must match exactly.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import torch

from aka.harness.cases import dtype_name, parse_dtype
from aka.harness.host_memory import comparison_chunk

Output = torch.Tensor | Sequence[torch.Tensor]


@dataclass(frozen=True)
class Tolerance:
    """Allowed difference: `|got - expected| <= atol + rtol * |expected|`."""

    atol: float
    rtol: float


EXACT = Tolerance(0.0, 0.0)
DEFAULT_TOLERANCES: Mapping[torch.dtype, Tolerance] = {
    torch.float64: Tolerance(1e-7, 1e-7),
    torch.float32: Tolerance(1e-5, 1e-5),
    torch.float16: Tolerance(1e-3, 1e-3),
    torch.bfloat16: Tolerance(1e-2, 1.6e-2),
}


@dataclass(frozen=True)
class Comparison:
    """The verdict on one output: `max_abs_error` covers the finite positions only."""

    correct: bool
    max_abs_error: float | None
    message: str


Overrides = Mapping[torch.dtype | str, Tolerance]


def tolerance_for(dtype: torch.dtype, overrides: Overrides | None = None) -> Tolerance:
    """A task's override for `dtype` (keyed by dtype or its name), else the default; integers are exact."""
    for key, tolerance in (overrides or {}).items():
        if (parse_dtype(key) if isinstance(key, str) else key) == dtype:
            return tolerance
    return DEFAULT_TOLERANCES.get(dtype, EXACT) if dtype.is_floating_point else EXACT


def _index(flat_index: int, shape: torch.Size) -> tuple[int, ...]:
    coords: list[int] = []
    for size in reversed(shape):
        coords.append(flat_index % size)
        flat_index //= size
    return tuple(reversed(coords))


CHUNK_ELEMENTS = 1 << 24  # float64 copies of a chunk: ~0.5 GB at most (on the CPU: what the host has left)


@dataclass
class _Tally:
    """Counts and first flat positions of each kind of mismatch, gathered chunk by chunk."""

    nan: int = 0
    inf: int = 0
    bad: int = 0
    first_nan: int = -1
    first_inf: int = -1
    first_bad: int = -1
    max_abs: float = 0.0

    def add(self, kind: str, mask: torch.Tensor, offset: int) -> None:
        count = int(mask.sum().item())
        if not count:
            return
        setattr(self, kind, getattr(self, kind) + count)
        if getattr(self, f"first_{kind}") < 0:
            setattr(self, f"first_{kind}", offset + int(torch.nonzero(mask)[0].item()))


def _tally(got: torch.Tensor, expected: torch.Tensor, tolerance: Tolerance) -> _Tally:
    """NaN/Inf positions that differ from the reference, the largest finite difference, and the
    values beyond `atol + rtol * |expected|`, in float64, a chunk at a time."""
    tally = _Tally()
    flat_got, flat_expected = got.detach().reshape(-1), expected.detach().reshape(-1)
    wide = torch.float64 if got.dtype.is_floating_point or got.dtype.is_complex else torch.int64
    chunk = CHUNK_ELEMENTS if got.device.type == "cuda" else comparison_chunk(flat_got.numel())
    for offset in range(0, flat_got.numel(), chunk):
        g = flat_got[offset : offset + chunk].to(wide)
        e = flat_expected[offset : offset + chunk].to(wide)
        if g.dtype.is_floating_point:
            tally.add("nan", torch.isnan(g) != torch.isnan(e), offset)
            inf = torch.isinf(g) != torch.isinf(e)
            inf |= torch.isinf(e) & torch.isinf(g) & (torch.sign(g) != torch.sign(e))
            tally.add("inf", inf, offset)
            finite = torch.isfinite(e) & torch.isfinite(g)
            diff = torch.where(finite, (g - e).abs(), torch.zeros_like(g))
        else:  # in float64: int64's `g - e` wraps (a red team's indices, each off by 2^63, read 0 apart)
            diff = (g.to(torch.float64) - e.to(torch.float64)).abs()
            diff = torch.where((g != e) & (diff == 0), torch.full_like(diff, math.inf), diff)  # past 2^53
        tally.max_abs = max(tally.max_abs, float(diff.max().item()))
        tally.add("bad", diff > tolerance.atol + tolerance.rtol * e.abs(), offset)
    return tally


def compare_tensor(got: object, expected: torch.Tensor, tolerance: Tolerance) -> Comparison:
    """Check one output tensor against the reference tensor."""
    if not isinstance(got, torch.Tensor):
        return Comparison(False, None, f"output is a {type(got).__name__}, expected a tensor")
    if got.shape != expected.shape:
        return Comparison(False, None, f"shape mismatch: got {tuple(got.shape)}, expected {tuple(expected.shape)}")
    if got.dtype != expected.dtype:
        got_name, expected_name = dtype_name(got.dtype), dtype_name(expected.dtype)
        return Comparison(False, None, f"dtype mismatch: got {got_name}, expected {expected_name}")
    if got.device != expected.device:
        return Comparison(False, None, f"device mismatch: got {got.device}, expected {expected.device}")
    if got.numel() == 0:
        return Comparison(True, 0.0, "ok: empty output")
    tally = _tally(got, expected, tolerance)
    for label, count, first in (("NaN", tally.nan, tally.first_nan), ("Inf", tally.inf, tally.first_inf)):
        if count:
            where = _index(first, got.shape)
            return Comparison(
                False,
                tally.max_abs,
                f"{count} position(s) differ in {label} from the reference; "
                f"first at index {where}: got {got[where].item()}, "
                f"expected {expected[where].item()}",
            )
    limits = f"atol {tolerance.atol:g}, rtol {tolerance.rtol:g}"
    if tally.bad:
        where = _index(tally.first_bad, got.shape)
        located = f"first at index {where}: got {got[where].item()}, expected {expected[where].item()}"
        message = f"{tally.bad} of {got.numel()} values differ beyond {limits}; {located}"
        return Comparison(False, tally.max_abs, message)
    return Comparison(True, tally.max_abs, f"ok: max_abs_error {tally.max_abs:.3g} ({limits})")


def compare_outputs(got: object, expected: Output, overrides: Overrides | None = None) -> Comparison:
    """Compare a tensor, or a tuple/list of tensors, with the reference; the first mismatch decides."""
    if isinstance(expected, torch.Tensor):
        return compare_tensor(got, expected, tolerance_for(expected.dtype, overrides))
    if not isinstance(got, tuple | list) or len(got) != len(expected):
        return Comparison(False, None, f"expected a sequence of {len(expected)} tensors, got {type(got).__name__}")
    worst = 0.0
    for position, (one_got, one_expected) in enumerate(zip(got, expected, strict=True)):
        result = compare_tensor(one_got, one_expected, tolerance_for(one_expected.dtype, overrides))
        if not result.correct:
            return Comparison(False, result.max_abs_error, f"output {position}: {result.message}")
        worst = max(worst, result.max_abs_error or 0.0)
    return Comparison(True, worst, f"ok: max_abs_error {worst:.3g} over {len(expected)} outputs")


def zeros_would_pass(expected: Output, overrides: Overrides | None = None) -> bool:
    """Whether an all-zeros output would be judged correct: every value of every (non-empty) output
    within `atol + rtol * |value|` of 0, so the reference holds nothing a kernel must compute
    (KernelBench level 1's 23_Softmax at its own size: every value under 1e-4). Read from each
    tensor's extremes, with no temporary the size of the output."""
    tensors = [expected] if isinstance(expected, torch.Tensor) else [t for t in expected if isinstance(t, torch.Tensor)]
    tensors = [t for t in tensors if t.numel()]
    for t in tensors:
        if t.dtype == torch.bool or t.is_complex():
            if bool(t.any()):
                return False
            continue
        biggest = _largest_magnitude(t)
        tolerance = tolerance_for(t.dtype, overrides)
        if not math.isfinite(biggest) or biggest * (1 - tolerance.rtol) > tolerance.atol:
            return False
    return bool(tensors)


def constant_would_pass(expected: Output, overrides: Overrides | None = None) -> bool:
    """Whether one value everywhere in each output would be judged correct: some c within
    `atol + rtol * |x|` of every value x, read from each tensor's extremes (the bound for c is
    widest at the smallest value and narrowest at the largest). Outputs of one value each (a
    loss) are not asked: one value is the answer itself. A red team's kernel wrote the bias
    everywhere, never reading its input, in a KernelBench problem whose output is near-constant
    on its own inputs, and passed at 160x (session 52)."""
    tensors = [expected] if isinstance(expected, torch.Tensor) else [t for t in expected if isinstance(t, torch.Tensor)]
    if not any(t.numel() > 1 for t in tensors):
        return False
    for t in (t for t in tensors if t.numel() > 1):
        if t.dtype == torch.bool or t.is_complex() or not t.is_floating_point():
            if t.is_complex() or bool((t != t.reshape(-1)[0]).any()):
                return False
            continue
        low, high = _extremes(t)
        if not (math.isfinite(low) and math.isfinite(high)):
            return False
        tolerance = tolerance_for(t.dtype, overrides)
        if high - tolerance.atol - tolerance.rtol * abs(high) > low + tolerance.atol + tolerance.rtol * abs(low):
            return False
    return True


def _extremes(t: torch.Tensor) -> tuple[float, float]:
    """(min, max); float8 (no aminmax) through float32 copies of one chunk at a time."""
    try:
        low, high = torch.aminmax(t)
        return float(low), float(high)
    except (NotImplementedError, RuntimeError):
        flat = t.reshape(-1)
        pairs = [torch.aminmax(flat[at : at + CHUNK_ELEMENTS].float()) for at in range(0, flat.numel(), CHUNK_ELEMENTS)]
        lows, highs = [float(lo) for lo, _ in pairs], [float(hi) for _, hi in pairs]
        if any(math.isnan(v) for v in lows + highs):  # a chunk's NaN, whatever the chunks' order
            return math.nan, math.nan
        return min(lows), max(highs)


def _largest_magnitude(t: torch.Tensor) -> float:
    """max |value|, from the extremes."""
    low, high = _extremes(t)
    return max(abs(low), abs(high))
