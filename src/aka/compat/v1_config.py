"""The original's schema-v1 `config.yaml`, read into our `TaskConfig` and an `OriginalSpec`.

Every field of the original's configs (snapshot d6f7c8a, docs/original-tasks.md) is either mapped
or named in a warning; an unknown field is a warning, never an error. The mapping:

- `source_file_path`: a list or one string; empty (all of instruction2triton/rocmbench) means the
  file that defines the first target kernel (`<task folder name>.py` first, as the original's
  instruction tasks name it).
- `target_kernel_functions`: a list, or one comma-joined string (rocmbench's MXFP/randn/randint).
- `*_command`: lists of shell lines; a leading `pytest` runs as `python3 -m pytest`, as the
  original's `normalize_python_command` does (`python`/`python3` are the platform's interpreter).
- `prompt`: `source_code`, `instructions`, `cheatsheet` (`prompt.task_type` is always null: ignored).
- `harness_path`: a protected harness (every non-editable file is; named for the record).
- `platform_support`: `aka.compat.platform`. `task_result_template`: legacy, ignored as the
  original ignores it.
- An editable file that also holds the task's pytest tests (rocmbench) is editable only in its
  target kernels and new helpers (`EditScope.symbols`), as the original's v2 migration declares:
  the tests in it are the harness.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from aka.compat.platform import language_skip_reason, read_platform
from aka.compat.spec import EditScope, OriginalSpec
from aka.config.families import family_named
from aka.config.task_config import TaskConfig
from aka.errors import ConfigError, describe_validation_error

COMMAND_FIELDS = ("compile_command", "correctness_command", "performance_command")
TIMEOUT_FIELDS = ("compile_timeout", "correctness_timeout", "performance_timeout")
MAPPED_FIELDS = frozenset(
    {
        "task_type",
        "source_file_path",
        "target_kernel_functions",
        *COMMAND_FIELDS,
        *TIMEOUT_FIELDS,
        "prompt",
        "platform_support",
        "harness_path",
        "task_result_template",
        "image_repo_path",
        "repo_url",
        "repository_language",
        "repo_subdir",
        "post_clone_install",
        "post_clone_install_mode",
        "triton_versions",
    }
)
UNUSED_FIELDS = frozenset(
    {  # the original's, read by nothing that decides a Triton task's verdict
        "target_file_path",
        "kernel_identity",
        "source_origin",
        "supported_archs",
        "editable_sources",
        "aiter_commit",
        "image_repo_exclude",
    }
)
PROMPT_FIELDS = ("source_code", "instructions", "cheatsheet")
PYTEST_LINE = re.compile(r"^\s*pytest(\s|$)")


def as_list(value: object) -> list[Any]:
    if value is None:
        return []
    return list(value) if isinstance(value, list) else [value]


def kernel_names(value: object) -> list[str]:
    """`target_kernel_functions`: a list, or a string of comma-joined names."""
    names = [part.strip() for item in as_list(value) for part in str(item).split(",")]
    return [name for name in names if name]


def normalized_command(line: str) -> str:
    """`pytest ...` -> `python3 -m pytest ...` (the platform's interpreter), as the original does."""
    return PYTEST_LINE.sub("python3 -m pytest ", line, count=1).rstrip() if PYTEST_LINE.match(line) else line


def top_level_functions(path: Path) -> set[str] | None:
    try:
        tree = ast.parse(path.read_text(encoding="utf-8", errors="replace"))
    except SyntaxError:
        return None
    return {node.name for node in tree.body if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)}


def defining_file(task_dir: Path, kernel: str) -> str | None:
    """The task's Python file that defines `kernel` at top level: `<folder name>.py` first."""
    candidates = sorted(p for p in task_dir.rglob("*.py") if "__pycache__" not in p.parts)
    preferred = [p for p in candidates if p.stem == task_dir.name] + [p for p in candidates if p.stem != task_dir.name]
    for path in preferred:
        if kernel in (top_level_functions(path) or set()):
            return path.relative_to(task_dir).as_posix()
    return None


def edit_scope(task_dir: Path, rel: str, kernels: list[str]) -> EditScope:
    """A file that holds pytest tests too is editable in its target kernels (and new helpers) only."""
    names = top_level_functions(task_dir / rel) or set()
    if not any(name.startswith("test_") for name in names):
        return EditScope(rel)
    return EditScope(rel, tuple(k for k in kernels if k in names), allow_new_helpers=True)


def _warnings(raw: dict[str, Any], where: str) -> list[str]:
    own = set(TaskConfig.model_fields)
    found = []
    for key in raw:
        if key in UNUSED_FIELDS:
            found.append(f"{where}: field '{key}' is not used by aka; ignored")
        elif key not in MAPPED_FIELDS and key not in own:
            found.append(f"{where}: field '{key}' is unknown; ignored")
    prompt = raw.get("prompt")
    if isinstance(prompt, dict):
        found += [
            f"{where}: field 'prompt.{key}' is not used by aka; ignored"
            for key in prompt
            if key not in PROMPT_FIELDS and not (key == "task_type" and prompt[key] is None)
        ]
    return found


def placeholder_config(task_type: str) -> TaskConfig:
    """The config of a task that will not run here (skipped, or not loadable): never validated,
    never executed; reports only read its family."""
    return TaskConfig.model_construct(task_type=task_type, compile_command=[], correctness_command=[])


def _skip_reason(raw: dict[str, Any], family: str) -> str | None:
    known = family_named(family)
    if known is not None and (reason := language_skip_reason(known.language)):
        return reason
    if raw.get("repository_language") and (reason := language_skip_reason(str(raw["repository_language"]))):
        return reason
    if raw.get("image_repo_path"):
        return (
            f"runs inside the original's ROCm container image (image_repo_path {raw['image_repo_path']}), "
            "whose tree aka does not materialize"
        )
    if family == "repository":
        return "the original's repository tasks clone an unpinned revision (repo_url without repo_revision)"
    return None


def load_v1(task_dir: Path, raw: dict[str, Any]) -> tuple[TaskConfig, OriginalSpec]:
    """Map a schema-v1 config; a problem that stops the task from running is a `ConfigError`
    naming the file, the field and the fix."""
    path = task_dir / "config.yaml"
    family = str(raw.get("task_type") or task_dir.name)
    platform, platform_warnings = read_platform(raw.get("platform_support"), str(path))
    warnings = _warnings(raw, str(path)) + platform_warnings
    skip = _skip_reason(raw, family)
    if skip is not None:
        return placeholder_config(family), OriginalSpec(1, (), platform, tuple(warnings), skip)
    kernels = kernel_names(raw.get("target_kernel_functions"))
    sources = [str(s) for s in as_list(raw.get("source_file_path"))]
    if not sources and kernels:
        found = defining_file(task_dir, kernels[0])
        if found is None:
            raise ConfigError(
                f"{path}: field 'source_file_path' is empty and no Python file of the task defines "
                f"'{kernels[0]}'; list the file that holds the target kernel"
            )
        sources = [found]
    prompt: dict[str, Any] = raw["prompt"] if isinstance(raw.get("prompt"), dict) else {}
    own = {key: raw[key] for key in TaskConfig.model_fields if key in raw and key not in MAPPED_FIELDS}
    fields: dict[str, Any] = {
        **own,
        "task_type": family,
        "source_file_path": sources,
        "target_kernel_functions": kernels,
        **{key: [normalized_command(str(c)) for c in as_list(raw[key])] for key in COMMAND_FIELDS if key in raw},
        **{key: raw[key] for key in TIMEOUT_FIELDS if raw.get(key) is not None},
        "baseline": raw.get("baseline", "source"),
        "prompt": {key: prompt.get(key) for key in PROMPT_FIELDS},
        "triton_versions": raw.get("triton_versions"),
    }
    try:
        config = TaskConfig.model_validate(fields)
    except ValidationError as exc:
        raise ConfigError(describe_validation_error(path, exc)) from exc
    for rel in config.source_file_path:
        if not (task_dir / rel).is_file():
            raise ConfigError(f"{path}: field 'source_file_path': '{rel}' does not exist in {task_dir}")
    harness = raw.get("harness_path")
    if harness and not (task_dir / str(harness)).is_file():
        warnings.append(f"{path}: field 'harness_path': '{harness}' does not exist; ignored")
    scopes = tuple(edit_scope(task_dir, rel, kernels) for rel in config.source_file_path)
    return config, OriginalSpec(1, scopes, platform, tuple(warnings))
