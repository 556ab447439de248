"""Comparing a candidate's output with the PyTorch reference, with tolerances chosen by dtype.

A check passes only when shape, dtype and device match, non-finite values sit exactly where the
reference has the same ones, and every finite value is within `atol + rtol * |expected|`.
Integer and boolean outputs must match exactly.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import torch

from aka.harness.cases import dtype_name, parse_dtype

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


def _first(mask: torch.Tensor, shape: torch.Size) -> tuple[int, ...]:
    return _index(int(torch.nonzero(mask.reshape(-1))[0].item()), shape)


def _nonfinite_problem(got: torch.Tensor, expected: torch.Tensor) -> str | None:
    """Where NaN/Inf differ from the reference: a NaN or Inf in either one needs the same in the other."""
    nan_mismatch = torch.isnan(got) != torch.isnan(expected)
    inf_mismatch = torch.isinf(got) != torch.isinf(expected)
    inf_mismatch |= torch.isinf(expected) & torch.isinf(got) & (torch.sign(got) != torch.sign(expected))
    for name, mask in (("NaN", nan_mismatch), ("Inf", inf_mismatch)):
        count = int(mask.sum().item())
        if count:
            where = _first(mask, got.shape)
            return (f"{count} position(s) differ in {name} from the reference; first at index {where}: "
                    f"got {got[where].item()}, expected {expected[where].item()}")
    return None


def compare_tensor(got: object, expected: torch.Tensor, tolerance: Tolerance) -> Comparison:
    """Check one output tensor against the reference tensor."""
    if not isinstance(got, torch.Tensor):
        return Comparison(False, None, f"output is a {type(got).__name__}, expected a tensor")
    if got.shape != expected.shape:
        return Comparison(False, None,
                          f"shape mismatch: got {tuple(got.shape)}, expected {tuple(expected.shape)}")
    if got.dtype != expected.dtype:
        got_name, expected_name = dtype_name(got.dtype), dtype_name(expected.dtype)
        return Comparison(False, None, f"dtype mismatch: got {got_name}, expected {expected_name}")
    if got.device != expected.device:
        return Comparison(False, None, f"device mismatch: got {got.device}, expected {expected.device}")
    if got.numel() == 0:
        return Comparison(True, 0.0, "ok: empty output")
    wide = torch.float64 if got.dtype.is_floating_point or got.dtype.is_complex else torch.int64
    g, e = got.detach().to(wide), expected.detach().to(wide)
    if g.dtype.is_floating_point:
        problem, finite = _nonfinite_problem(g, e), torch.isfinite(e) & torch.isfinite(g)
    else:
        problem, finite = None, torch.ones_like(g, dtype=torch.bool)
    diff = torch.where(finite, (g - e).abs(), torch.zeros_like(g))
    max_abs = float(diff.max().item())
    if problem is not None:
        return Comparison(False, max_abs, problem)
    allowed = tolerance.atol + tolerance.rtol * e.abs()
    bad = diff > allowed
    count = int(bad.sum().item())
    limits = f"atol {tolerance.atol:g}, rtol {tolerance.rtol:g}"
    if count:
        where = _first(bad, got.shape)
        first = f"first at index {where}: got {got[where].item()}, expected {expected[where].item()}"
        return Comparison(False, max_abs, f"{count} of {got.numel()} values differ beyond {limits}; {first}")
    return Comparison(True, max_abs, f"ok: max_abs_error {max_abs:.3g} ({limits})")


def compare_outputs(got: object, expected: Output, overrides: Overrides | None = None) -> Comparison:
    """Compare a tensor, or a tuple/list of tensors, with the reference; the first mismatch decides."""
    if isinstance(expected, torch.Tensor):
        return compare_tensor(got, expected, tolerance_for(expected.dtype, overrides))
    if not isinstance(got, tuple | list) or len(got) != len(expected):
        return Comparison(False, None,
                          f"expected a sequence of {len(expected)} tensors, got {type(got).__name__}")
    worst = 0.0
    for position, (one_got, one_expected) in enumerate(zip(got, expected, strict=True)):
        result = compare_tensor(one_got, one_expected, tolerance_for(one_expected.dtype, overrides))
        if not result.correct:
            return Comparison(False, result.max_abs_error, f"output {position}: {result.message}")
        worst = max(worst, result.max_abs_error or 0.0)
    return Comparison(True, worst, f"ok: max_abs_error {worst:.3g} over {len(expected)} outputs")
