"""Reading and setting a task's declared knobs in source text, exactly there and nowhere else.

A Python knob is the one module-level `NAME = value` (or `NAME: T = value`) statement, found with
`ast` so that strings, comments, functions and nested scopes are never touched. A CUDA/C++ knob is
the one object-like `#define NAME value` line. Only the characters of the value change.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Union

from aka.config.task_config import TaskConfig, Tunable

Value = Union[int, float, str, bool]
PYTHON_SUFFIXES = frozenset({".py"})


class KnobError(ValueError):
    """A declared tunable cannot be found (or not unambiguously) in its file."""


def is_python(path: str) -> bool:
    return Path(path).suffix in PYTHON_SUFFIXES


def render(value: Value, python: bool) -> str:
    """The source text of a value: a Python literal, or the `#define` body (bools as 1/0, strings verbatim)."""
    if isinstance(value, bool):
        return repr(value) if python else str(int(value))
    if isinstance(value, str):
        return repr(value) if python else value
    return repr(value)


def _line_starts(text: str) -> list[int]:
    return [0, *(m.end() for m in re.finditer(r"\r\n|\r|\n", text))]


def _char_offset(text: str, starts: list[int], lineno: int, byte_col: int) -> int:
    """`ast` columns count UTF-8 bytes; turn one into a character offset into `text`."""
    line_start = starts[lineno - 1]
    line = text[line_start:]
    return line_start + len(line.encode("utf-8")[:byte_col].decode("utf-8", errors="ignore"))


def _python_span(text: str, name: str, file: str) -> tuple[int, int]:
    try:
        tree = ast.parse(text)
    except SyntaxError as exc:
        raise KnobError(f"tunable {name}: {file} does not parse ({exc.msg}, line {exc.lineno})") from exc
    values: list[ast.expr] = []
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
            if len(node.targets) != 1:
                raise KnobError(
                    f"tunable {name}: {file} line {node.lineno} assigns it together with other names; "
                    f"give it its own `{name} = value` line"
                )
            values.append(node.value)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.target.id == name:
            if node.value is not None:
                values.append(node.value)
    if not values:
        raise KnobError(f"tunable {name}: no module-level `{name} = value` assignment in {file}")
    if len(values) > 1:
        raise KnobError(f"tunable {name}: {file} assigns it {len(values)} times at module level; keep exactly one")
    node_value = values[0]
    assert node_value.end_lineno is not None and node_value.end_col_offset is not None
    starts = _line_starts(text)
    return (
        _char_offset(text, starts, node_value.lineno, node_value.col_offset),
        _char_offset(text, starts, node_value.end_lineno, node_value.end_col_offset),
    )


def _define_span(text: str, name: str, file: str) -> tuple[int, int]:
    pattern = re.compile(rf"^[ \t]*#[ \t]*define[ \t]+{re.escape(name)}(?![A-Za-z0-9_(])([^\r\n]*)", re.MULTILINE)
    matches = list(pattern.finditer(text))
    if not matches:
        raise KnobError(f"tunable {name}: no `#define {name} value` line in {file}")
    if len(matches) > 1:
        raise KnobError(f"tunable {name}: {file} has {len(matches)} `#define {name}` lines; keep exactly one")
    match = matches[0]
    rest = match.group(1)
    comment = re.search(r"//|/\*", rest)
    body = rest[: comment.start()] if comment else rest
    if body.rstrip().endswith("\\"):
        raise KnobError(f"tunable {name}: the `#define {name}` in {file} continues over lines; keep it on one")
    stripped = body.strip()
    if not stripped:
        raise KnobError(f"tunable {name}: `#define {name}` in {file} has no value to tune")
    start = match.start(1) + (len(body) - len(body.lstrip()))
    return start, start + len(stripped)


def knob_span(text: str, name: str, file: str) -> tuple[int, int]:
    """Character offsets of the knob's value in `text`; a `KnobError` names the problem and the fix."""
    return _python_span(text, name, file) if is_python(file) else _define_span(text, name, file)


def read_knob(text: str, name: str, file: str) -> Value:
    """The knob's current value: a Python literal's value (else its source text), or a parsed `#define` body."""
    start, end = knob_span(text, name, file)
    source = text[start:end]
    if is_python(file):
        try:
            literal = ast.literal_eval(source.strip())
        except (ValueError, SyntaxError):
            return source
        return literal if isinstance(literal, int | float | str | bool) else source
    try:
        return int(source, 0)
    except ValueError:
        pass
    try:
        return float(source)
    except ValueError:
        return source


def write_knob(text: str, name: str, value: Value, file: str) -> str:
    start, end = knob_span(text, name, file)
    return text[:start] + render(value, is_python(file)) + text[end:]


@dataclass(frozen=True)
class TunedSources:
    """The editable files that hold knobs, as the agent found them, and the knobs' starting values."""

    texts: dict[str, str]
    tunables: tuple[Tunable, ...]
    files: tuple[str, ...]
    start: tuple[Value, ...]

    @classmethod
    def load(cls, workspace: Path, config: TaskConfig) -> TunedSources:
        files = tuple(config.tunable_file(t) for t in config.tunables)
        texts: dict[str, str] = {}
        for rel in dict.fromkeys(files):
            path = workspace / rel
            if not path.is_file():
                raise KnobError(f"editable file {rel} is missing from the workspace")
            try:
                texts[rel] = path.read_bytes().decode("utf-8")
            except UnicodeDecodeError as exc:
                raise KnobError(f"{rel} is not UTF-8 text: {exc}") from exc
        start = tuple(read_knob(texts[f], t.name, f) for t, f in zip(config.tunables, files, strict=True))
        return cls(texts, tuple(config.tunables), files, start)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(t.name for t in self.tunables)

    def render(self, variant: tuple[Value, ...]) -> dict[str, str]:
        """The knob files' texts with the knobs set to `variant` (knobs already at that value keep their text)."""
        texts = dict(self.texts)
        for tunable, file, current, wanted in zip(self.tunables, self.files, self.start, variant, strict=True):
            if type(wanted) is not type(current) or wanted != current:
                texts[file] = write_knob(texts[file], tunable.name, wanted, file)
        return texts

    def write(self, variant: tuple[Value, ...], directory: Path) -> list[str]:
        """Write the knob files of `variant` into `directory`; returns the files whose text changed."""
        changed = []
        for rel, text in self.render(variant).items():
            if text != self.texts[rel]:
                changed.append(rel)
            target = directory / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(text.encode("utf-8"))
        return changed
