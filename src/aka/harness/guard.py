"""Guards a worker runs around candidate calls: forbidden torch work, kernel provenance, the L2 pin.

They run in the candidate's own process, so a candidate can defeat them; they are a first line
that catches honest mistakes and naive cheats early, reported to the judge as findings. Nothing
the judge decides a verdict or a number by depends on them (docs/evaluation.md).

- `ForbiddenOps`: a torch dispatch mode active during every checked and timed candidate call;
  any aten operator outside the allowlist (allocation, views, copies, fills) is a policy
  violation, so a Triton or CUDA candidate cannot compute its output with torch or cuBLAS.
- `LaunchCounter`: wraps the `run` of the candidate's target Triton kernels, so a candidate that
  defines the kernel but never launches it is caught (a launch counts once it returned); while
  `suppressed`, they launch nothing (the judge's check that they did the work, `checks._ablation`).
- `PersistingL2`: keeps the persisting-L2 carve-out at zero, so the L2 flush cannot be defeated
  with an access-policy window.
"""

from __future__ import annotations

import functools
import operator
import os
import sys
from collections import Counter
from collections.abc import Callable, Iterable
from pathlib import Path
from types import ModuleType
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from aka.harness import cuda_driver

ALLOWED_ATEN_OPS = frozenset(
    {
        "empty",
        "empty_like",
        "empty_strided",
        "new_empty",
        "new_empty_strided",
        "zeros",
        "zeros_like",
        "ones",
        "ones_like",
        "full",
        "full_like",
        "fill_",
        "zero_",
        "arange",
        "view",
        "_unsafe_view",
        "reshape",
        "as_strided",
        "expand",
        "permute",
        "transpose",
        "t",
        "squeeze",
        "unsqueeze",
        "flatten",
        "select",
        "slice",
        "split",
        "split_with_sizes",
        "chunk",
        "unbind",
        "narrow",
        "contiguous",
        "clone",
        "copy_",
        "_to_copy",
        "to",
        "detach",
        "alias",
        "lift_fresh",
        "_local_scalar_dense",
        "resize_",
        "record_stream",
        "set_",
        "view_as_real",
        "view_as_complex",
        "_reshape_alias",
        "unfold",
        "movedim",
        "is_same_size",
        "_has_compatible_shallow_copy_type",
        "cat",
        "stack",
        "is_nonzero",
        "item",
        # allocation and metadata a red team's honest kernels used (session 52): `x.new_zeros`,
        # `new_full` (the moe_align_block_size contract lets a candidate allocate), in-place views
        "new_zeros",
        "new_ones",
        "new_full",
        "scalar_tensor",
        "resize_as_",
        "unsqueeze_",
        "squeeze_",
        "t_",
        "transpose_",
        "as_strided_",
        "diagonal",
    }
)


# How a worker applies the guards: the candidate's are enforced (findings); the baseline's run
# alike, observed only, so that both sides' calls carry the same Python work (aka.harness.sides).
ENFORCE, OBSERVE, OFF = "enforce", "observe", "off"


class ForbiddenOps(TorchDispatchMode):  # type: ignore[no-untyped-call]
    """Records every aten operator outside the allowlist that runs while the mode is active."""

    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        """torch would wrap `__torch_dispatch__` in `torch._disable_dynamo`, whose first call imports
        torch._dynamo (2 s of every checked step, 5 s without bytecode caches). Nothing here is
        traced by dynamo; a torch that stops asking only costs that import again."""
        return False

    def __init__(self, extra_allowed: Iterable[str] = ()) -> None:
        """`extra_allowed`: the task's own additions; a name written `-name` is taken out instead
        (a task whose whole work is a copy forbids the copies: `KernelTask.forbidden_torch_ops`;
        under Triton's interpreter, which copies each launch's tensors back, not `copy_`)."""
        super().__init__()  # type: ignore[no-untyped-call]
        names = list(extra_allowed)
        removed = {name[1:] for name in names if name.startswith("-")}
        if os.environ.get("TRITON_INTERPRET") == "1":  # its launches copy every tensor back with `copy_`
            removed.discard("copy_")
        self.allowed = (ALLOWED_ATEN_OPS | {name for name in names if not name.startswith("-")}) - removed
        self.violations: Counter[str] = Counter()

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        name = func.overloadpacket.__name__
        if func.namespace != "aten":  # a `torch.library` op named `clone` ran torch's softmax inside,
            name = f"{func.namespace}::{name}"  # unseen, while only the name was checked (red team, session 50)
        if name not in self.allowed:
            self.violations[name] += 1
        return func(*args, **(kwargs or {}))

    def describe(self) -> str:
        ops = ", ".join(f"{name} x{count}" for name, count in self.violations.most_common(5))
        return f"the candidate computed with torch operators instead of its kernel: {ops}"


_TRITON_RUN: dict[type, Callable[..., Any]] = {}  # Triton's own launch, per JIT class, before candidate code


def remember_triton_launchers() -> None:
    """Take Triton's JIT classes and their `run` before any candidate code runs: a launch is
    counted, and suppressed, only for an object of exactly those classes, through that `run`.
    Any object with a `.fn` and a `run` passed for a kernel until session 54: a red team's target
    was its own launcher object doing the work in numpy, which saw the suppressed launch's empty
    grid and raised, so the ablation read nothing (red team F)."""
    try:
        from triton.runtime.jit import JITFunction
    except ImportError:
        return
    _TRITON_RUN.setdefault(JITFunction, JITFunction.run)
    try:
        from triton.runtime.interpreter import InterpretedFunction
    except ImportError:
        return
    _TRITON_RUN.setdefault(InterpretedFunction, InterpretedFunction.run)


def _innermost_jit(obj: object) -> object | None:
    """The Triton JIT function under Autotuner/Heuristics wrappers (each holds it in `.fn`)."""
    current = obj
    for _ in range(8):
        if type(current) in _TRITON_RUN:
            return current
        current = getattr(current, "fn", None)
        if current is None:
            return None
    return None


class LaunchCounter:
    """Counts launches of the named Triton kernels defined in the candidate's modules."""

    def __init__(self) -> None:
        self.counts: Counter[str] = Counter()
        self.instrumented: set[str] = set()
        self.suppressed = False  # the targets launch nothing (the judge's check that they do the work)
        self._wrapped: set[int] = set()

    def instrument(self, modules: Iterable[ModuleType], names: Iterable[str]) -> None:
        """Every module's own JIT function of each name is counted: separate loads of the
        candidate each have theirs."""
        for module in modules:
            for name in names:
                target = _innermost_jit(getattr(module, name, None))
                if target is None or id(target) in self._wrapped:
                    continue
                self._wrapped.add(id(target))
                original = functools.partial(_TRITON_RUN[type(target)], target)

                def counting_run(*args: Any, _name: str = name, _run: Any = original, **kwargs: Any) -> Any:
                    if self.suppressed:  # launched as any launch is, on a grid of no programs
                        return _run(*args, **{**kwargs, "grid": no_programs(kwargs.get("grid"))})
                    grids: list[object] = []
                    grid = kwargs.get("grid")
                    if callable(grid):  # the grid Triton itself computes, seen as it uses it

                        def seen_grid(meta: Any, _grid: Any = grid) -> Any:
                            grids.append(_grid(meta))
                            return grids[-1]

                        kwargs["grid"] = seen_grid
                    else:
                        grids.append(grid)
                    launched = _run(*args, **kwargs)
                    if not kwargs.get("warmup") and any(programs(g) for g in grids):
                        self.counts[_name] += 1  # once it ran programs: one that raised ran nothing
                    return launched

                target.run = counting_run  # type: ignore[attr-defined]
                self.instrumented.add(name)

    def total(self) -> int:
        return sum(self.counts.values())


def no_programs(grid: object) -> Callable[[Any], tuple[int, ...]]:
    """A suppressed launch's grid: the candidate's own grid function is asked as Triton asks it
    at every launch, and no program runs (Triton's launcher and its interpreter skip a grid
    without programs). Until session 52 a suppressed launch was a warm-up, which Triton tells
    apart: a red team's grid function noted that it was asked and its wrapper did the work on
    the host only then, and under the interpreter a warm-up skips the kernel's pre-run hooks,
    where another did the work."""

    def empty(meta: Any) -> tuple[int, ...]:
        dims = grid(meta) if callable(grid) else grid
        return (0,) * (len(dims) if isinstance(dims, tuple | list) and dims else 1)

    return empty


def programs(grid: object) -> int:
    """How many programs a launch grid runs: a grid with a zero in it runs none. A red team's
    target kernel launched on an empty grid beside work done elsewhere (session 51). A grid this
    cannot read counts as one program: Triton's launch decides whether it runs."""
    dims = grid if isinstance(grid, tuple | list) else (grid,)
    count = 1
    for dim in dims[:3]:
        try:
            count *= operator.index(dim)  # the interpreter's grid functions return its tensors
        except TypeError:
            try:
                count *= int(dim)
            except (TypeError, ValueError, OverflowError):
                return 1
    return max(count, 0) if dims else 0


def modules_under(directory: Path) -> list[ModuleType]:
    """The imported modules whose source lives in `directory` (the candidate's own files)."""
    base = str(directory.resolve())
    found = []
    for module in list(sys.modules.values()):
        path = getattr(module, "__file__", None)
        if isinstance(path, str) and os.path.isabs(path) and str(Path(path).resolve()).startswith(base + os.sep):
            found.append(module)
    return found


class PersistingL2:
    """The persisting-L2 set-aside pinned to 0 and checked after candidate calls (CUDA only),
    through the driver (a second CUDA runtime loaded here would unsettle the driver calls the
    worker makes for the judge's memory)."""

    def pin(self) -> None:
        cuda_driver.set_persisting_l2_limit(0)
        cuda_driver.reset_persisting_l2()

    def violated(self) -> bool:
        return cuda_driver.persisting_l2_limit() != 0


def storages(value: object) -> list[tuple[int, int]]:
    """(start, end) byte ranges of the storages behind a tensor or a sequence of tensors."""
    tensors = (
        [value]
        if isinstance(value, torch.Tensor)
        else [v for v in value if isinstance(v, torch.Tensor)]
        if isinstance(value, tuple | list)
        else []
    )
    ranges = []
    for tensor in tensors:
        storage = tensor.untyped_storage()
        ranges.append((storage.data_ptr(), storage.data_ptr() + storage.nbytes()))
    return ranges


def overlaps(a: list[tuple[int, int]], b: list[tuple[int, int]]) -> bool:
    return any(s1 < e2 and s2 < e1 for s1, e1 in a for s2, e2 in b if e1 > s1 and e2 > s2)


def poison_allocator(expected: object) -> None:
    """Fill and free blocks of the output's size, so memory the candidate allocates but never
    writes holds NaN (or a sentinel), not the reference's freed output."""
    tensors = (
        [expected]
        if isinstance(expected, torch.Tensor)
        else list(expected)
        if isinstance(expected, tuple | list)
        else []
    )
    blocks = [fill_sentinel(torch.empty_like(t)) for t in tensors if isinstance(t, torch.Tensor)]
    del blocks


def fill_sentinel(tensor: torch.Tensor) -> torch.Tensor:
    """NaN for floating point, 90 for integers, True for booleans: values no correct output keeps."""
    sentinel: float | bool = float("nan") if tensor.dtype.is_floating_point else 90
    return tensor.fill_(True if tensor.dtype == torch.bool else sentinel)
