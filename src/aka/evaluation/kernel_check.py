"""The static kernel check: every `target_kernel_functions` name is defined by an editable source,
found before any step runs (Python by AST, CUDA by `__global__`)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from aka.config.tasks import Task


def defined_names(path: Path) -> set[str] | None:
    """Function names a source defines; None when it does not parse (the compile step reports that)."""
    text = path.read_text(encoding="utf-8", errors="replace")
    if path.suffix == ".py":
        try:
            tree = ast.parse(text)
        except SyntaxError:
            return None
        return {n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)}
    text = re.sub(r"__launch_bounds__\s*\([^)]*\)", " ", text)  # `__global__ void __launch_bounds__(256) k(`
    pattern = re.compile(r"__global__[^;{}]*?\b([A-Za-z_]\w*)\s*\(")
    return set(pattern.findall(text))


def missing_kernels(task: Task, eval_dir: Path) -> list[str]:
    """Target kernel functions that no editable source defines."""
    defined: set[str] = set()
    for rel in task.config.source_file_path:
        names = defined_names(eval_dir / rel) if (eval_dir / rel).is_file() else set()
        if names is None:
            return []
        defined |= names
    return [name for name in task.config.target_kernel_functions if name not in defined]
