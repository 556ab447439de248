"""Triton's compiled-mode rule on globals, applied where Triton's interpreter does not apply it.

Compiled Triton (`@triton.jit` on a GPU) refuses a kernel that reads a plain module-level global
(`LOG2E = 1.44` instead of `LOG2E = tl.constexpr(1.44)`): "Cannot access global variable ...".
The interpreter (`TRITON_INTERPRET=1`, our CPU profile) runs such a kernel happily, so a candidate
checked on the CPU would only fail on the GPU. Checking the same rule at import keeps the CPU
verdict equal to the GPU's for this class of error.

Only the kernel's body is read: decorators and argument defaults are Python's, evaluated when
the module loads (`@triton.autotune(configs=CONFIGS)`, `BLOCK: tl.constexpr = BLOCK_SIZE` are
honest, and compiled Triton takes them; both were refused here until a red team's honest kernels
showed it, session 52). Two rules compiled Triton keeps by construction are checked too, since the
interpreter runs a kernel's body as Python at every launch while compiled Triton runs any Python
it calls once, at compile time: a builtin name must be one compiled Triton knows (`len`, `range`,
`min`, ...; `__import__` is not), and a module read in a kernel must be Triton's or `math`, and
no attribute with a dunder name. A red team's kernels computed their outputs on the host through
`__import__("sys").modules[__name__]` and a module object of their own (session 52).
"""

from __future__ import annotations

import ast
import builtins
import inspect
import textwrap
from types import FunctionType, ModuleType

_WRAPPER_DEPTH = 4
# compiled Triton's builtin names (triton.compiler.code_generator.CodeGenerator.builtin_namespace)
TRITON_BUILTINS = frozenset(
    {"len", "list", "range", "float", "int", "isinstance", "getattr", "hasattr", "print", "min", "max"}
)


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


def _body(function: FunctionType) -> tuple[list[ast.AST], set[str]]:
    """The statements of the function's body and its parameters' names (its decorators and
    defaults left out); nothing where the source cannot be read."""
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(function)))
    except (OSError, TypeError, SyntaxError):
        return [], set()
    definition = next((n for n in tree.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)), None)
    if definition is None:
        return [], set()
    arguments = definition.args
    every = [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs, arguments.vararg, arguments.kwarg]
    return list(definition.body), {a.arg for a in every if a is not None}


def _dunder(name: object) -> bool:
    return isinstance(name, str) and name.startswith("__") and name.endswith("__")


def _chain(node: ast.Attribute) -> list[str]:
    """`a.b.c` as ["a", "b", "c"]; empty where the chain does not start at a name."""
    names: list[str] = []
    current: ast.expr = node
    while isinstance(current, ast.Attribute):
        names.insert(0, current.attr)
        current = current.value
    return [current.id, *names] if isinstance(current, ast.Name) else []


def _global_reads(function: FunctionType) -> tuple[set[str], set[str], list[list[str]]]:
    """Names the function body reads that it neither binds nor takes as arguments, the dunder
    names it reads (as attributes or as strings, `getattr(tl, "__builtins__")`), and its chains
    of attributes."""
    body, bound = _body(function)
    loads: set[str] = set()
    dunders: set[str] = set()
    chains: list[list[str]] = []
    for node in (n for statement in body for n in ast.walk(statement)):
        if isinstance(node, ast.Name):
            (loads if isinstance(node.ctx, ast.Load) else bound).add(node.id)
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
        elif isinstance(node, ast.Attribute):
            if _dunder(node.attr):
                dunders.add(node.attr)
            chains.append(_chain(node))
        elif isinstance(node, ast.Constant) and _dunder(node.value):
            dunders.add(str(node.value))
    return loads - bound, dunders, [chain for chain in chains if chain and chain[0] not in bound]


def _chain_problem(chain: list[str], function: FunctionType) -> str | None:
    """A module outside Triton and `math` reached through a chain of attributes of a global
    (`tl.core.builtins`: Triton's own modules import others)."""
    value: object = function.__globals__.get(chain[0])
    for depth, name in enumerate(chain[1:], start=2):
        value = getattr(value, name, None)
        if isinstance(value, ModuleType) and (problem := _module_problem(".".join(chain[:depth]), value)):
            return problem
    return None


def _reachable_module(value: ModuleType) -> bool:
    return value.__name__ == "math" or value.__name__.split(".")[0] == "triton"


def _module_problem(read: str, module: ModuleType) -> str | None:
    """A kernel's read of `module` (as `read`): Triton's modules and math only."""
    return None if _reachable_module(module) else f"{read} (module {module.__name__}: its code would run on the host)"


def _problem(name: str, function: FunctionType) -> str | None:
    """Why compiled Triton would refuse the kernel's read of global `name` (None: it would not)."""
    scope = function.__globals__
    if name not in scope:
        known = name in vars(builtins)
        return None if not known or name in TRITON_BUILTINS else f"{name} (a builtin compiled Triton does not know)"
    value = scope[name]
    if isinstance(value, ModuleType):
        return _module_problem(name, value)
    return None if _allowed(value) else name


def non_constexpr_globals(module: ModuleType) -> list[str]:
    """`kernel: NAME` for every global a Triton kernel in `module`'s namespace reads that compiled
    Triton refuses (or runs only at compile time), and every dunder attribute it reads. Each
    kernel there, whatever module it names: a red team's kernel called the host from its body
    and renamed its function's `__module__` to be passed over (red team F, session 54); one
    imported from elsewhere is refused by compiled Triton alike."""
    problems = []
    for value in vars(module).values():
        function = _kernel_function(value)
        if function is None:
            continue
        reads, dunders, chains = _global_reads(function)
        found = [_problem(name, function) for name in sorted(reads)]
        found += [_chain_problem(chain, function) for chain in chains if chain[0] in function.__globals__]
        problems += [f"{function.__name__}: {problem}" for problem in found if problem]
        problems += [f"{function.__name__}: {name}" for name in sorted(dunders)]
    return sorted(set(problems))


def check_jit_globals(module: ModuleType) -> None:
    """Raise NameError, as compiled Triton would at the first launch, for plain globals in kernels."""
    problems = non_constexpr_globals(module)
    if problems:
        raise NameError(
            "Triton kernels can only read constexpr globals (wrap the value in tl.constexpr(...)), "
            "Triton's modules and math, and the builtins compiled Triton knows, but compiled Triton "
            f"would refuse these (or run them once, at compile time): {', '.join(problems)}"
        )
