"""Triton's compiled-mode rule on globals, applied where Triton's interpreter does not apply it.

Compiled Triton (`@triton.jit` on a GPU) refuses a kernel that reads a plain module-level global
(`LOG2E = 1.44` instead of `LOG2E = tl.constexpr(1.44)`): "Cannot access global variable ...".
The interpreter (`TRITON_INTERPRET=1`, our CPU profile) runs such a kernel happily, so a candidate
checked on the CPU would only fail on the GPU. Checking the same rule at import keeps the CPU
verdict equal to the GPU's for this class of error.
"""

from __future__ import annotations

import ast
import builtins
import inspect
import textwrap
from types import FunctionType, ModuleType

_WRAPPER_DEPTH = 4


def _kernel_function(value: object) -> FunctionType | None:
    """The Python function under a Triton JIT / autotune / heuristics wrapper, else None."""
    current, wrapped = value, False
    for _ in range(_WRAPPER_DEPTH):
        if not type(current).__module__.startswith("triton."):
            break
        inner = getattr(current, "fn", None)
        if inner is None:
            break
        current, wrapped = inner, True
    return current if wrapped and isinstance(current, FunctionType) else None


def _allowed(value: object) -> bool:
    import triton.language as tl

    module = getattr(value, "__module__", None) or ""
    return (
        isinstance(value, ModuleType | tl.constexpr | tl.dtype)
        or type(value).__module__.startswith("triton.")
        or getattr(value, "__triton_builtin__", False)
        or getattr(value, "__triton_aggregate__", False)
        or module.startswith("triton.language")
        or (isinstance(value, tuple) and hasattr(value, "_fields"))
    )


def _global_reads(function: FunctionType) -> set[str]:
    """Names the function body reads that it neither binds nor takes as arguments."""
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(function)))
    except (OSError, TypeError, SyntaxError):
        return set()
    loads: set[str] = set()
    bound: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            (loads if isinstance(node.ctx, ast.Load) else bound).add(node.id)
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
    return loads - bound


def non_constexpr_globals(module: ModuleType) -> list[str]:
    """`kernel: NAME` for every plain global a Triton kernel of `module` reads."""
    problems = []
    for value in vars(module).values():
        function = _kernel_function(value)
        if function is None or function.__module__ != module.__name__:
            continue
        for name in sorted(_global_reads(function)):
            if name in function.__globals__ and name not in vars(builtins) and not _allowed(function.__globals__[name]):
                problems.append(f"{function.__name__}: {name}")
    return sorted(set(problems))


def check_jit_globals(module: ModuleType) -> None:
    """Raise NameError, as compiled Triton would at the first launch, for plain globals in kernels."""
    problems = non_constexpr_globals(module)
    if problems:
        raise NameError(
            f"Triton kernels can only read constexpr globals (wrap the value in tl.constexpr(...)), "
            f"but compiled Triton would refuse: {', '.join(problems)}"
        )
