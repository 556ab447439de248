"""Inside a mutant's worker: the baseline's entry functions wrapped so that their outputs are wrong.

A mutant's source is the baseline's own file with two lines appended (`aka.validation.mutants`):
they hand the module's public functions to `install`, which rebinds each name to a wrapper that
calls the real baseline and then corrupts what it returned. Sources with no Python function to
wrap (CUDA C++) are mutated one level up instead: a copy of the task whose harness hands its
`KernelTask` to `mutate_task`, so whatever callable `load_candidate` returns for the candidate is
wrapped the same way. The corruption runs outside the
worker's torch-operator guard, so the only thing that can reject a mutant is the task's
correctness check, which is what mutation testing measures. Standard library and torch only.
"""

from __future__ import annotations

import dataclasses
import functools
import threading
from collections.abc import Callable, MutableMapping, Sequence
from typing import Any

import torch
from torch.utils._python_dispatch import _disable_current_modes

Tolerances = dict[str, tuple[float, float]]
Mutation = Callable[[torch.Tensor, Sequence[torch.Tensor], tuple[float, float]], torch.Tensor | None]

_state = threading.local()
_previous: dict[str, Any] = {}
_LOWER = {torch.float64: torch.float32, torch.float32: torch.bfloat16, torch.float16: torch.bfloat16}
_OTHER_DTYPE = {
    torch.float32: torch.float16,
    torch.float16: torch.float32,
    torch.bfloat16: torch.float32,
    torch.float64: torch.float32,
    torch.int64: torch.int32,
    torch.int32: torch.int64,
    torch.int16: torch.int32,
    torch.int8: torch.int16,
    torch.uint8: torch.int16,
    torch.bool: torch.uint8,
}


def _far(value: float, tensor: torch.Tensor) -> float | bool:
    """A value no tolerance accepts in place of `value`."""
    if tensor.dtype == torch.bool:
        return not value
    return value + 1 + abs(value) if tensor.dtype.is_floating_point else value + 1


def _set_flat(tensor: torch.Tensor, index: int, value: float | bool) -> torch.Tensor:
    out = tensor.clone()
    out.view(-1)[index : index + 1].fill_(value)
    return out


def _zeros(t: torch.Tensor, inputs: Sequence[torch.Tensor], tol: tuple[float, float]) -> torch.Tensor | None:
    return torch.zeros_like(t)


def _ones(t: torch.Tensor, inputs: Sequence[torch.Tensor], tol: tuple[float, float]) -> torch.Tensor | None:
    return torch.ones_like(t)


def _constant(t: torch.Tensor, inputs: Sequence[torch.Tensor], tol: tuple[float, float]) -> torch.Tensor | None:
    """Every element the mean of the true output: what a near-constant output lets through."""
    if t.numel() < 2:
        return None
    mean = t.double().mean().item()
    value: float | bool = (
        mean if t.dtype.is_floating_point else bool(round(mean)) if t.dtype == torch.bool else round(mean)
    )
    return torch.full_like(t, value)


def _input_copy(t: torch.Tensor, inputs: Sequence[torch.Tensor], tol: tuple[float, float]) -> torch.Tensor | None:
    source = next((i for i in inputs if i.numel() >= t.numel() and i.numel() > 1), None)
    if source is None:
        return None
    return source.reshape(-1)[: t.numel()].to(device=t.device, dtype=t.dtype).reshape(t.shape).clone()


def _perturb_one(t: torch.Tensor, inputs: Sequence[torch.Tensor], tol: tuple[float, float]) -> torch.Tensor | None:
    index = t.numel() // 2
    return _set_flat(t, index, _far(t.view(-1)[index].item(), t)) if t.numel() else None


def _off_by_one(t: torch.Tensor, inputs: Sequence[torch.Tensor], tol: tuple[float, float]) -> torch.Tensor | None:
    """The last element left at zero, as by a mask one short (one where zero is the right answer)."""
    if t.numel() < 2:
        return None
    last = t.view(-1)[-1].item()
    return _set_flat(t, t.numel() - 1, 1 if abs(float(last)) <= tol[0] + tol[1] else 0)


def _skip_last_block(t: torch.Tensor, inputs: Sequence[torch.Tensor], tol: tuple[float, float]) -> torch.Tensor | None:
    """The last row (last dimension's run; 1-D: the last 1/8, at least one element) left at zero,
    or at one where the true row is all zero."""
    if t.numel() < 2:
        return None
    block = t.shape[-1] if t.dim() >= 2 and t.shape[-1] < t.numel() else max(1, t.numel() // 8)
    out = t.clone()
    tail = out.view(-1)[t.numel() - block :]
    zero = bool((tail.double().abs() <= tol[0] + tol[1]).all()) if t.dtype != torch.bool else not bool(tail.any())
    tail.fill_(1 if zero else 0)
    return out


def _wrong_dtype(t: torch.Tensor, inputs: Sequence[torch.Tensor], tol: tuple[float, float]) -> torch.Tensor | None:
    other = _OTHER_DTYPE.get(t.dtype)
    return t.to(other) if other is not None else None


def _transposed(t: torch.Tensor, inputs: Sequence[torch.Tensor], tol: tuple[float, float]) -> torch.Tensor | None:
    """The values of the transpose in the right shape (the output read with swapped indices)."""
    if t.dim() < 2 or t.shape[-1] < 2 or t.shape[-2] < 2:
        return None
    return t.transpose(-2, -1).contiguous().reshape(t.shape)


def _wrong_strides(t: torch.Tensor, inputs: Sequence[torch.Tensor], tol: tuple[float, float]) -> torch.Tensor | None:
    """The right values in a non-contiguous layout (a kernel writing with its own strides)."""
    if t.numel() < 2:
        return None
    if t.dim() >= 2 and t.shape[-1] > 1 and t.shape[-2] > 1:
        return t.transpose(-2, -1).contiguous().transpose(-2, -1)
    wide = torch.empty((*t.shape[:-1], 2 * t.shape[-1]), dtype=t.dtype, device=t.device) if t.dim() else None
    if wide is None or t.shape[-1] < 2:
        return None
    return wide[..., ::2].copy_(t)


def _beyond_tolerance(t: torch.Tensor, inputs: Sequence[torch.Tensor], tol: tuple[float, float]) -> torch.Tensor | None:
    """Every element scaled away from zero by three times its tolerance (at least two of its ulps)."""
    if not t.dtype.is_floating_point or t.numel() == 0:
        return None
    wide = t.double()
    atol, rtol = tol
    eps, tiny = torch.finfo(t.dtype).eps, torch.finfo(t.dtype).tiny
    step = torch.clamp(3 * (atol + rtol * wide.abs()), min=0).maximum(2 * eps * wide.abs()).clamp(min=tiny)
    sign = torch.where(wide < 0, -1.0, 1.0).to(wide.dtype)
    return (wide + sign * step).to(t.dtype)


def _round_lower(t: torch.Tensor) -> torch.Tensor:
    lower = _LOWER.get(t.dtype)
    if lower is not None:
        return t.to(lower).to(t.dtype)
    if t.dtype == torch.bfloat16 and hasattr(torch, "float8_e4m3fn"):
        return t.float().clamp(-448, 448).to(torch.float8_e4m3fn).to(t.dtype)
    return t


def _lower_precision(t: torch.Tensor, inputs: Sequence[torch.Tensor], tol: tuple[float, float]) -> torch.Tensor | None:
    """The output rounded to a narrower type (its inputs were too, before the baseline ran)."""
    return _round_lower(t) if t.dtype.is_floating_point else None


MUTATIONS: dict[str, Mutation] = {
    "zeros": _zeros,
    "ones": _ones,
    "constant": _constant,
    "input_copy": _input_copy,
    "perturb_one": _perturb_one,
    "beyond_tolerance": _beyond_tolerance,
    "skip_last_block": _skip_last_block,
    "wrong_dtype": _wrong_dtype,
    "transposed": _transposed,
    "wrong_strides": _wrong_strides,
    "off_by_one": _off_by_one,
    "lower_precision": _lower_precision,
}
WHOLE_CALL = ("stale",)


def _tensors(value: object) -> list[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, tuple | list):
        return [v for v in value if isinstance(v, torch.Tensor)]
    return []


def _map(value: Any, apply: Callable[[torch.Tensor], torch.Tensor]) -> Any:
    if isinstance(value, torch.Tensor):
        return apply(value)
    if isinstance(value, tuple | list):
        return type(value)(apply(v) if isinstance(v, torch.Tensor) else v for v in value)
    return value


def corrupt(mutation: str, output: Any, inputs: Sequence[torch.Tensor], tolerances: Tolerances) -> Any:
    """`output` with every tensor in it mutated (one the mutation does not apply to is kept)."""
    function = MUTATIONS[mutation]

    def apply(t: torch.Tensor) -> torch.Tensor:
        changed = function(t, inputs, tolerances.get(str(t.dtype).removeprefix("torch."), (0.0, 0.0)))
        return t if changed is None else changed

    return _map(output, apply)


def _stale(name: str, output: Any) -> Any:
    """The previous call's output where it has the same shapes and dtypes (its inputs differed)."""
    before = _previous.get(name)
    _previous[name] = _map(output, lambda t: t.clone())
    shapes = [(t.shape, t.dtype) for t in _tensors(output)]
    if before is None or [(t.shape, t.dtype) for t in _tensors(before)] != shapes:
        return output
    return _map(before, lambda t: t.clone())


def _wrap(original: Callable[..., Any], name: str, mutation: str, tolerances: Tolerances) -> Callable[..., Any]:
    @functools.wraps(original)
    def mutant(*args: Any, **kwargs: Any) -> Any:
        depth = getattr(_state, "depth", 0)
        if depth == 0 and mutation == "lower_precision":
            with _disable_current_modes():
                args = tuple(
                    _round_lower(a) if isinstance(a, torch.Tensor) and a.dtype.is_floating_point else a for a in args
                )
        _state.depth = depth + 1
        try:
            output = original(*args, **kwargs)
        finally:
            _state.depth = depth
        if depth:
            return output  # a wrapped function called by another: only the outermost call is mutated
        with _disable_current_modes():
            if mutation == "stale":
                return _stale(name, output)
            inputs = [a for a in (*args, *kwargs.values()) if isinstance(a, torch.Tensor)]
            return corrupt(mutation, output, inputs, tolerances)

    return mutant


def mutate_task(task: Any, mutation: str, tolerances: Tolerances) -> Any:
    """`task` (a `KernelTask`) whose loaded candidates return mutated outputs. Only the candidate's
    worker imports the harness with this applied (the judge runs the file as `__main__`, before
    it), and the baseline's sources (`_aka_baseline_*` modules, timed only) are left alone."""
    if mutation not in MUTATIONS and mutation not in WHOLE_CALL:
        raise ValueError(f"unknown mutation {mutation!r}")
    load = task.load_candidate

    def load_mutant(directory: Any) -> Callable[..., Any]:
        return _wrap(load(directory), "candidate", mutation, tolerances)

    return dataclasses.replace(task, load_candidate=load_mutant)


def install(namespace: MutableMapping[str, Any], names: Sequence[str], mutation: str, tolerances: Tolerances) -> None:
    """Rebind each named function of a module (its `globals()`) to its mutant."""
    if mutation not in MUTATIONS and mutation not in WHOLE_CALL:
        raise ValueError(f"unknown mutation {mutation!r}")
    for name in names:
        original = namespace.get(name)
        if callable(original):
            namespace[name] = _wrap(original, name, mutation, tolerances)
