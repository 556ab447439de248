"""Which Triton a task needs, and whether the installed one is it.

A task may declare `triton_versions` (a PEP 440 specifier such as `<3.9`). Without one, a Triton
task whose sources use block pointers (`tl.make_block_ptr`, `tl.advance`) needs Triton below 3.9:
3.7 and 3.8 deprecate them, 3.9.0 raises `NotImplementedError` (34 of the original's 196 Triton
tasks use them; its images pin Triton 3.6). A mismatch skips the task with the reason, and
`aka doctor` lists it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

BLOCK_POINTERS = re.compile(r"\b(make_block_ptr|tl\.advance)\s*\(")
BLOCK_POINTER_NEED = "<3.9"
SKIPPED_PARTS = frozenset({"__pycache__", "build", ".git"})


@dataclass(frozen=True)
class TritonNeed:
    specifier: str
    why: str


def valid_specifier(text: str) -> str:
    """`text` if it is a version specifier, else a ValueError saying what one looks like."""
    try:
        SpecifierSet(text)
    except InvalidSpecifier:
        raise ValueError(f"'{text}' is not a version specifier like '<3.9' or '>=3.6,<3.9'") from None
    return text


def uses_block_pointers(task_dir: Path) -> bool:
    return any(
        BLOCK_POINTERS.search(path.read_text(encoding="utf-8", errors="replace"))
        for path in sorted(task_dir.rglob("*.py"))
        if not SKIPPED_PARTS & set(path.parts)
    )


def triton_need(task_dir: Path, declared: str | None, language: str) -> TritonNeed | None:
    """The task's declared need, else the one its block pointers imply (Triton tasks only)."""
    if declared:
        return TritonNeed(declared, "declared by the task (triton_versions)")
    if language == "triton" and uses_block_pointers(task_dir):
        return TritonNeed(BLOCK_POINTER_NEED, "uses tl.make_block_ptr, which Triton 3.9 removed")
    return None


def installed_triton() -> str | None:
    try:
        return version("triton")
    except PackageNotFoundError:
        return None


def mismatch(need: TritonNeed | None, installed: str | None) -> str | None:
    """Why the installed Triton cannot run the task, or None."""
    if need is None:
        return None
    if installed is None:
        return f"needs Triton {need.specifier} ({need.why}); Triton is not installed"
    try:
        fits = SpecifierSet(need.specifier).contains(Version(installed), prereleases=True)
    except InvalidVersion:
        return None
    return None if fits else f"needs Triton {need.specifier} ({need.why}); Triton {installed} is installed"
