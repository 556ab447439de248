"""Self-containment of a task folder, read statically: no network access, no absolute paths, no
reads outside the folder. A task that reaches beyond its folder is judged differently on another
machine (or by whoever controls what it reaches), so the validator fails it.

Python files are read as syntax trees (imports and string constants, docstrings left out, and
`Path(__file__).parents[k]` / `.parent.parent` climbs); other text files (CUDA sources) line by
line, YAML by its values (the prompt's prose left out). Binary files (a repository task's git bundle) are not read.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import yaml

from aka.config.tasks import task_files

NETWORK_MODULES = frozenset(
    {
        "socket",
        "urllib",
        "urllib3",
        "requests",
        "httpx",
        "aiohttp",
        "http",
        "ftplib",
        "smtplib",
        "telnetlib",
        "paramiko",
        "websocket",
        "websockets",
        "grpc",
        "xmlrpc",
    }
)
ABSOLUTE = re.compile(r"^(?:/(?!/)[\w.\-+@]+(?:/[\w.\-+@]*)*|~/\S*|[A-Za-z]:[\\/]\S*)$")
ALLOWED_ABSOLUTE = frozenset({"/dev/null"})
URL = re.compile(r"\b(?:https?|ftp|wss?)://", re.IGNORECASE)
PARENT = re.compile(r"(?:^|[/\\])\.\.(?:[/\\]|$)")
TEXT_SUFFIXES = frozenset({".cu", ".cuh", ".h", ".hpp", ".c", ".cc", ".cpp", ".sh"})
YAML_SUFFIXES = frozenset({".yaml", ".yml"})
PROSE_KEYS = frozenset({"prompt", "description", "notes"})
MAX_BYTES = 2_000_000


def _docstrings(tree: ast.AST) -> set[int]:
    found: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                found.add(id(first.value))
    return found


def _string_problem(value: str) -> str | None:
    text = value.strip()
    if URL.search(text):
        return f"a URL ({text[:60]})"
    if ABSOLUTE.match(text) and text not in ALLOWED_ABSOLUTE and len(text) > 1:
        return f"an absolute path ({text[:60]})"
    if PARENT.search(text) and "\n" not in text:
        return f"a path outside the task ({text[:60]})"
    return None


def _climbs(node: ast.AST) -> bool:
    """`X.parents[k]` (k >= 1) or `X.parent.parent` on `__file__`'s path: a read above the task folder."""
    if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Attribute) and node.value.attr == "parents":
        return isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, int) and node.slice.value >= 1
    return (
        isinstance(node, ast.Attribute)
        and node.attr == "parent"
        and isinstance(node.value, ast.Attribute)
        and node.value.attr == "parent"
    )


def scan_python(text: str, name: str) -> list[str]:
    try:
        tree = ast.parse(text)
    except SyntaxError as exc:
        return [f"{name}:{exc.lineno}: does not parse ({exc.msg})"]
    docs = _docstrings(tree)
    problems: list[str] = []
    for node in ast.walk(tree):
        line = getattr(node, "lineno", 0)
        if isinstance(node, ast.Import | ast.ImportFrom):
            modules = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            for module in modules:
                if module.split(".")[0] in NETWORK_MODULES:
                    problems.append(f"{name}:{line}: imports {module} (network access)")
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs:
            problem = _string_problem(node.value)
            if problem:
                problems.append(f"{name}:{line}: {problem}")
        elif _climbs(node):
            problems.append(f"{name}:{line}: climbs above the task folder ({ast.unparse(node)[:60]})")
    return sorted(problems, key=lambda p: int(p.split(":")[1]))


def scan_text(text: str, name: str) -> list[str]:
    problems = []
    for number, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        if stripped.startswith(("//", "#")) and not stripped.startswith("#include"):
            continue
        for token in re.findall(r"[\"']([^\"']+)[\"']|#include\s*<([^>]+)>|(?<![\w.])(/[\w.\-/]+)", line):
            value = next((t for t in token if t), "")
            if token[1] or not value:
                continue  # a system include
            problem = _string_problem(value)
            if problem:
                problems.append(f"{name}:{number}: {problem}")
        if URL.search(line) and not stripped.startswith(("//", "#")):
            problems.append(f"{name}:{number}: a URL")
    return problems


def _scalars(value: object) -> list[str]:
    if isinstance(value, dict):
        return [s for k, v in value.items() if k not in PROSE_KEYS for s in _scalars(v)]
    if isinstance(value, list):
        return [s for v in value for s in _scalars(v)]
    return [value] if isinstance(value, str) else []


def scan_yaml(text: str, name: str) -> list[str]:
    """Every string value but the prose (the prompt may cite a paper's URL)."""
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError:
        return [f"{name}: not readable YAML"]
    return [f"{name}: {problem}" for value in _scalars(data) if (problem := _string_problem(value))]


def scan_task(task_dir: Path) -> tuple[list[str], int]:
    """Every self-containment problem in the folder (`file:line: what`), and how many files were read."""
    problems: list[str] = []
    read = 0
    for path in task_files(task_dir):
        rel = path.relative_to(task_dir).as_posix()
        if path.stat().st_size > MAX_BYTES or path.suffix not in TEXT_SUFFIXES | YAML_SUFFIXES | {".py"}:
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        read += 1
        if path.suffix == ".py":
            problems += scan_python(text, rel)
        else:
            problems += scan_yaml(text, rel) if path.suffix in YAML_SUFFIXES else scan_text(text, rel)
    return problems, read
