"""The static kernel check: every `target_kernel_functions` name is defined by an editable source,
found before any step runs (Python by AST, CUDA by `__global__`)."""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the judge imports this module too (`triton_kernels_in`): no config models there
    from aka.config.tasks import Task

# What CPython's parser raises on text it cannot take: a syntax error, a null byte (ValueError), and
# nesting past its limits (`1+1+...` 3,000 terms deep: RecursionError; 7,000 unary minus signs:
# MemoryError). A red team's candidate made both of the last two reach the evaluator, whose
# `infra_error` the trainer drops: a wrong kernel so escaped its score on every attempt.
UNPARSABLE = (SyntaxError, ValueError, RecursionError, MemoryError)
MAX_PARSED_CHARS = 512 * 1024  # a kernel's source, far past any; the parser's memory grows ~1,000x a source


def parse_python(text: str) -> ast.Module | None:
    """A candidate's Python source as a tree, or None where the parser cannot take it (the compile
    step, which imports it under the step's limits, reports why), or where it is too long to parse
    in the evaluator's own process (a red team's 4 MiB of `a;` took 32 s and 3.6 GiB there)."""
    if len(text) > MAX_PARSED_CHARS:
        return None
    try:
        return ast.parse(text)
    except UNPARSABLE:
        return None


def defined_names(path: Path) -> set[str] | None:
    """Function names a source defines; None when it does not parse (the compile step reports that)."""
    text = path.read_text(encoding="utf-8", errors="replace")
    if path.suffix == ".py":
        tree = parse_python(text)
        if tree is None:
            return None
        return {n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)}
    # `__global__ void __launch_bounds__(256) k(`; its arguments are short (unbounded, the class
    # scanned to the end of the text for every unclosed one: quadratic)
    text = re.sub(r"__launch_bounds__\s{0,64}\([^)]{0,256}\)", " ", text)
    return global_functions(text)


def global_functions(text: str) -> set[str]:
    """The names of `__global__` functions: after each `__global__`, the first `(` with a name
    before it, unless `;`, `{` or `}` comes first. One pass over the text: a lazy regex doing the
    same took quadratic time, 101 s on 172 KiB of repeated `__global__` (a red team's candidate
    held its evaluator's device slot past the request's timeout so)."""
    names: set[str] = set()
    pending = False
    for token in re.finditer(r"__global__|[;{}(]", text):
        if token.group() == "__global__":
            pending = True
        elif token.group() != "(":
            pending = False
        elif pending:
            end = token.start()
            while end > 0 and text[end - 1].isspace():
                end -= 1
            start = end
            while start > 0 and (text[start - 1].isalnum() or text[start - 1] == "_"):
                start -= 1
            name = text[start:end]
            if name and (name[0].isalpha() or name[0] == "_") and name.isascii():
                names.add(name)
                pending = False
    return names


def missing_kernels(task: Task, eval_dir: Path) -> list[str]:
    """Target kernel functions that no editable source defines."""
    defined: set[str] = set()
    for rel in task.config.source_file_path:
        names = defined_names(eval_dir / rel) if (eval_dir / rel).is_file() else set()
        if names is None:
            return []
        defined |= names
    return [name for name in task.config.target_kernel_functions if name not in defined]


_TRITON_DECORATORS = ("jit", "autotune", "heuristics")


def triton_kernels_in(directory: Path, names: set[str] | frozenset[str]) -> set[str]:
    """Which of `names` the Python sources under `directory` (a task's pristine baseline) define as
    Triton kernels: a function of that name under a decorator ending in `jit`, `autotune` or
    `heuristics` (`triton.jit`, `@jit`, `triton.autotune(...)`)."""
    found: set[str] = set()
    for path in sorted(directory.rglob("*.py")) if directory.is_dir() else []:
        tree = parse_python(path.read_text(encoding="utf-8", errors="replace"))
        for node in ast.walk(tree) if tree is not None else []:
            if isinstance(node, ast.FunctionDef) and node.name in names:
                for decorator in node.decorator_list:
                    called = decorator.func if isinstance(decorator, ast.Call) else decorator
                    dotted = ast.unparse(called)
                    if dotted.rsplit(".", 1)[-1] in _TRITON_DECORATORS:
                        found.add(node.name)
    return found
