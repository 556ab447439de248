"""Symbol-scoped editable files: only the listed top-level definitions may change.

The original's v2 tasks declare `editable: [{path, scope: symbols, symbols: [...],
allow_new_helpers}]` for files that hold the harness too (rocmbench keeps its pytest tests next
to the kernel), and our reading of v1 declares the same for such files (`aka.compat.v1_config`).
A candidate passes when, compared with the pristine file by syntax tree (formatting and comments
are free): every top-level name outside the scope is bound by the same statements as before,
every other top-level statement (imports, calls) is still there, the declared symbols still
exist, and nothing new appears unless `allow_new_helpers` (then new names and new statements are
helpers). A file that does not parse is left to the compile step.
"""

from __future__ import annotations

import ast
from collections import Counter
from pathlib import Path

from aka.compat.spec import EditScope
from aka.evaluation.kernel_check import parse_python


def _bound_names(node: ast.stmt) -> list[str]:
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        return [node.name]
    targets: list[ast.expr] = []
    if isinstance(node, ast.Assign):
        targets = node.targets
    elif isinstance(node, ast.AnnAssign | ast.AugAssign):
        targets = [node.target]
    return [t.id for t in targets if isinstance(t, ast.Name)]


def _shape(path: Path) -> tuple[dict[str, list[str]], Counter[str]] | None:
    """Per top-level name, the dumps of the statements that bind it; the other statements' dumps.
    None where the source does not parse, or is nested too deep to dump (the compile step, which
    imports it, reports why)."""
    tree = parse_python(path.read_text(encoding="utf-8", errors="replace"))
    if tree is None:
        return None
    named: dict[str, list[str]] = {}
    others: Counter[str] = Counter()
    for node in tree.body:
        names = _bound_names(node)
        try:
            dump = ast.dump(node)
        except (RecursionError, MemoryError):
            return None
        if names:
            for name in names:
                named.setdefault(name, []).append(dump)
        elif not (isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)):  # docstrings are free
            others[dump] += 1
    return named, others


def scope_violations(scope: EditScope, pristine: Path, candidate: Path) -> list[str]:
    """What the candidate changed outside `scope` (empty: nothing)."""
    before, after = _shape(pristine), _shape(candidate)
    if before is None or after is None:
        return []
    (names_before, others_before), (names_after, others_after) = before, after
    listed = set(scope.symbols)
    problems = [
        f"{name} changed"
        for name in sorted(names_before)
        if name not in listed and names_before[name] != names_after.get(name)
    ]
    problems += [
        f"{name} removed (a declared editable symbol must stay)" for name in scope.symbols if name not in names_after
    ]
    if others_before - others_after:
        problems.append("module-level statements outside the editable symbols changed")
    if not scope.allow_new_helpers:
        added = sorted(set(names_after) - set(names_before))
        problems += [f"{name} added (new helpers are not allowed)" for name in added]
        if others_after - others_before:
            problems.append("module-level statements added (new helpers are not allowed)")
    return problems


def scope_problem(scopes: list[EditScope], pristine_dir: Path, eval_dir: Path) -> str | None:
    """One line naming every change outside the symbol scopes, or None."""
    found = []
    for scope in scopes:
        candidate = eval_dir / scope.path
        if candidate.is_file():
            problems = scope_violations(scope, pristine_dir / scope.path, candidate)
            if problems:
                found.append(f"{scope.path} (editable: {', '.join(scope.symbols)}): {'; '.join(problems[:5])}")
    return " | ".join(found) if found else None
