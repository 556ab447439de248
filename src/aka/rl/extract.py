"""Candidate files from a model completion: fenced code blocks that name the file they hold.

A block is named by its info string (```` ```python kernel.py ````, ```` ```kernel.py ````,
```` ```python title="kernel.py" ````) or by a first-line comment (`# file: kernel.py`,
`// kernel.cu`); a block so named for a file the task does not let the policy edit is an error.
The line just above a block (`` `kernel.py`: ``, `**File: kernel.py**`, `### kernel.py`) names it
only when it names an editable file (a quoted harness is just a quote). With one editable file,
an unnamed block in that file's language (or none) is that file. The last block for a file wins
(models revise); reasoning inside `<think>` is ignored. Every problem is one `CompletionError` line.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import PurePosixPath

from aka.errors import AkaError

_LINE_BREAK = re.compile(r"\r\n|\r|\n")  # CommonMark's line endings
_FENCE = re.compile(r"^(?P<indent> {0,3})(?P<fence>`{3,}|~{3,})(?P<info>.*)$")
_THINK = re.compile(r"<think>.*?(</think>|\Z)", re.DOTALL)
_PATHLIKE = re.compile(r"^[\w./-]*\w\.[A-Za-z0-9]{1,5}$")
_LABEL = re.compile(r"^(?:file(?:name)?|path)\s*[:=]\s*", re.IGNORECASE)
_QUOTED = re.compile(r"`([^`\s]+)`")
_COMMENT = re.compile(
    r"^\s*(?:#|//|/\*|--)\s*(?:(?:file(?:name)?|path)\s*[:=]\s*)?(?P<name>\S+?)\s*(?:\*/)?\s*$", re.IGNORECASE
)
# A comment that names a file is short; the pattern above backtracks in the square of a line's
# length (a red team's `#a` + 50,000 spaces + `x` held the reward server's event loop 9.7 s).
MAX_COMMENT_CHARS = 512
_LANGUAGES = {
    ".py": {"python", "py", "python3"},
    ".cu": {"cuda", "cu", "cpp", "c++"},
    ".cuh": {"cuda", "cu", "cpp", "c++"},
    ".cpp": {"cpp", "c++", "cuda"},
    ".h": {"cpp", "c++", "c", "cuda"},
    ".hip": {"hip", "cpp", "c++"},
}


class CandidateError(AkaError):
    """A candidate that cannot be evaluated (unknown task, a file it may not edit), in one line."""


class CompletionError(CandidateError):
    """A completion no candidate can be taken from: the policy's fault, scored as not compiling."""


def not_text(text: str) -> str | None:
    """Why `text` cannot be written as UTF-8 (a lone surrogate: a string, not text), or None."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        return f"{exc.reason} at character {exc.start}"
    return None


def _clean_name(text: str) -> str | None:
    text = text.strip().strip("*_`#>:- ").strip()
    text = _LABEL.sub("", text).strip().strip("`'\"*: ")
    return text if _PATHLIKE.match(text) else None


def _above_name(line: str) -> str | None:
    """`kernel.py:` or `**File: kernel.py**` alone, or a sentence ending in ':' that quotes the name."""
    name = _clean_name(line)
    if name is None and line.rstrip().endswith(":"):
        quoted = [_clean_name(token) for token in _QUOTED.findall(line)]
        name = next((q for q in reversed(quoted) if q), None)
    return name


def _info_name(info: str) -> tuple[str, str | None]:
    """The block's language and the file its info string names."""
    tokens = info.replace("{", " ").replace("}", " ").split()
    language = tokens[0].lower() if tokens and not _PATHLIKE.match(tokens[0].split(":")[-1]) else ""
    for token in tokens:
        value = token.split("=", 1)[1] if "=" in token else token
        value = value.split(":", 1)[1] if ":" in value and not _PATHLIKE.match(value) else value
        name = _clean_name(value)
        if name:
            return language.split(":")[0], name
    return language.split(":")[0], None


def _blocks(text: str) -> tuple[list[tuple[str, str | None, str, str]], bool]:
    """(language, named file, the line above, body) per closed block; and whether one was left open."""
    lines = _LINE_BREAK.split(text)  # not `splitlines`: it also breaks at U+0085, U+2028, \f, \v...,
    # where Markdown and Python see none, so a fence hidden in a comment changed the judged code
    blocks: list[tuple[str, str | None, str, str]] = []
    index = 0
    while index < len(lines):
        match = _FENCE.match(lines[index])
        if not match:
            index += 1
            continue
        fence = match.group("fence")
        closer = fence[0] * len(fence)  # once a block: rebuilt a line, a 2 MB fence took 28 us a line
        language, name = _info_name(match.group("info"))
        above = next((line for line in reversed(lines[max(0, index - 2) : index]) if line.strip()), "")
        body: list[str] = []
        end = index + 1
        while end < len(lines):
            close = lines[end].strip()
            if close.startswith(closer) and not close.strip(fence[0]):
                break
            body.append(lines[end])
            end += 1
        if end >= len(lines):
            return blocks, True
        blocks.append((language, name, above, "\n".join(body)))
        index = end + 1
    return blocks, False


def _resolve(name: str, editable: Sequence[str]) -> str | None:
    clean = PurePosixPath(name.lstrip("./")).as_posix()
    if clean in editable:
        return clean
    by_base = [rel for rel in editable if PurePosixPath(rel).name == PurePosixPath(clean).name]
    return by_base[0] if len(by_base) == 1 else None


def extract_files(completion: str, editable: Sequence[str], task_id: str = "the task") -> dict[str, str]:
    """The editable files a completion gives, name -> source text (see the module docstring)."""
    text = _THINK.sub("", completion or "")
    if not text.strip():
        raise CompletionError(f"{task_id}: the completion is empty (expected fenced code blocks with the files)")
    why = not_text(completion)
    if why is not None:
        raise CompletionError(f"{task_id}: the completion is not valid text ({why})")
    blocks, left_open = _blocks(text)
    allowed = ", ".join(editable)
    files: dict[str, str] = {}
    unnamed: list[tuple[str, str]] = []
    for language, name, above, body in blocks:
        first = body.splitlines()[0] if body.strip() else ""
        comment = _COMMENT.match(first) if 0 < len(first) <= MAX_COMMENT_CHARS else None
        named = name or (_clean_name(comment.group("name")) if comment else None)
        mentioned = _above_name(above)
        if named is None and mentioned is not None and _resolve(mentioned, editable) is not None:
            named = mentioned
        if named is None:
            unnamed.append((language, body))
            continue
        rel = _resolve(named, editable)
        if rel is None:
            raise CompletionError(
                f"{task_id}: the completion gives '{named}', which is not an editable file (editable: {allowed})"
            )
        files[rel] = body.rstrip("\n") + "\n"
    if not files and len(editable) == 1:
        suffix = PurePosixPath(editable[0]).suffix
        fitting = [body for language, body in unnamed if not language or language in _LANGUAGES.get(suffix, set())]
        if fitting:
            files[editable[0]] = fitting[-1].rstrip("\n") + "\n"
    if files:
        return files
    if left_open and not blocks:
        raise CompletionError(f"{task_id}: the completion's code block is never closed (was it cut off?)")
    if not blocks:
        raise CompletionError(f"{task_id}: the completion has no fenced code block (expected one per file: {allowed})")
    raise CompletionError(f"{task_id}: no code block of the completion names an editable file (editable: {allowed})")
