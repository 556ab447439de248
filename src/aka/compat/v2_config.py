"""The original's schema-v2 `config.yaml` (`schema_version: 2`), read into our `TaskConfig` and an
`OriginalSpec`.

The fields follow the original's `task_spec.py` and its task authoring guide: `candidate`
(language, initial state, `editable` as whole files or `{path, scope: file|symbols|tree, symbols,
allow_new_helpers}`, entrypoints), `baseline` (initial_candidate or provided, correctness
policy), `evaluation` (runner argv, workloads, timeouts, per-role/action command overrides),
`workspace`, `platform_support`, `exports`. Unknown fields are warnings here (the original
rejects them). A task needing `workspace` sources or setup (a container image tree, a git
checkout) is skipped with the reason: aka does not materialize those yet.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path, PurePosixPath
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from aka.compat.arena_protocol import ArenaProtocolError, CaseManifest
from aka.compat.platform import language_skip_reason, read_platform
from aka.compat.spec import ArenaCommands, ArenaSpec, EditScope, OriginalSpec
from aka.compat.v1_config import placeholder_config
from aka.config.families import family_named
from aka.config.task_config import TaskConfig
from aka.errors import ConfigError, describe_validation_error

ROLES = ("baseline", "candidate")
ACTIONS = ("compile", "correctness", "performance")


def task_path(raw: str) -> str:
    """A normalized path inside the task folder (no absolute path, backslash, drive, `.` or `..`)."""
    path = PurePosixPath(raw)
    if (
        not raw
        or "\\" in raw
        or path.is_absolute()
        or (len(raw) > 1 and raw[1] == ":")
        or any(part in ("", ".", "..") for part in raw.split("/"))
    ):
        raise ValueError(f"'{raw}' is not a normalized path inside the task folder")
    return raw


class _Lenient(BaseModel):
    """Unknown keys are kept as extras and reported as warnings (`_extras`)."""

    model_config = ConfigDict(extra="allow")


class EditableEntry(_Lenient):
    path: str
    scope: Literal["file", "symbols", "tree"] = "file"
    symbols: list[str] | None = None
    allow_new_helpers: bool = False

    _path = field_validator("path")(task_path)

    @model_validator(mode="after")
    def _symbols(self) -> EditableEntry:
        if self.scope == "symbols":
            names = self.symbols or []
            if not names or len(set(names)) != len(names) or any(not n or "*" in n for n in names):
                raise ValueError("scope symbols needs a nonempty list of unique symbol names (no wildcards)")
        elif self.symbols is not None or self.allow_new_helpers:
            raise ValueError("symbols and allow_new_helpers belong to scope symbols only")
        return self


class Entrypoint(_Lenient):
    file: str
    kind: Literal["function", "builder", "class", "executable"]
    symbol: str | None = None

    @model_validator(mode="after")
    def _symbol(self) -> Entrypoint:
        if (self.kind == "executable") == (self.symbol is not None):
            raise ValueError(
                "symbol is required for function, builder and class entrypoints, and forbidden for executable ones"
            )
        return self


class Candidate(_Lenient):
    language: str
    initial_state: Literal["implemented", "unimplemented"] = "implemented"
    initial_language: str | None = None
    editable: list[EditableEntry] = Field(min_length=1)
    entrypoints: list[Entrypoint] = Field(default_factory=list)

    @field_validator("editable", mode="before")
    @classmethod
    def _whole_files(cls, value: Any) -> Any:
        """A plain string is a whole editable file."""
        if not isinstance(value, list):
            return value
        return [{"path": item} if isinstance(item, str) else item for item in value]


class Baseline(_Lenient):
    kind: Literal["initial_candidate", "provided"] | None = None
    language: str | None = None
    source_files: list[str] = Field(default_factory=list)
    correctness_policy: Literal["required", "diagnostic"] = "required"
    diagnostic_reason: str | None = None

    @model_validator(mode="after")
    def _diagnostic(self) -> Baseline:
        if (self.correctness_policy == "diagnostic") != bool(self.diagnostic_reason):
            raise ValueError("diagnostic_reason is required exactly when correctness_policy is diagnostic")
        return self


class ActionSpec(_Lenient):
    commands: list[list[str]] | None = None
    timeout_s: int | None = Field(default=None, gt=0)


class RoleActions(_Lenient):
    compile: ActionSpec | None = None
    correctness: ActionSpec | None = None
    performance: ActionSpec | None = None


class Evaluation(_Lenient):
    runner: list[str] | None = None
    workloads: str | None = None
    timeout_s: int = Field(default=3600, gt=0)
    task: ActionSpec | None = None
    baseline: RoleActions | None = None
    candidate: RoleActions | None = None


class Workspace(_Lenient):
    sources: list[dict[str, Any]] = Field(default_factory=list)
    setup: list[list[str]] = Field(default_factory=list)
    timeout_s: int = Field(default=3600, gt=0)


class Export(_Lenient):
    format: str
    output: str
    command: list[str] = Field(min_length=1)
    timeout_s: int = Field(default=60, gt=0)

    _output = field_validator("output")(task_path)


class TaskSpecV2(_Lenient):
    schema_version: Literal[2]
    description: str | None = None
    instructions: list[str] = Field(default_factory=list)
    kernel_identity: dict[str, Any] | None = None
    candidate: Candidate
    baseline: Baseline = Field(default_factory=Baseline)
    evaluation: Evaluation
    workspace: Workspace | None = None
    platform_support: dict[str, Any] | None = None
    evaluation_profile: dict[str, Any] | None = None
    evaluation_tools: dict[str, Any] | None = None
    exports: list[Export] = Field(default_factory=list)
    triton_versions: str | None = None  # ours: the Triton the task needs


def _extras(model: BaseModel, where: str) -> list[str]:
    found = [f"field '{where}{key}' is unknown; ignored" for key in (model.model_extra or {})]
    for name in type(model).model_fields:
        value = getattr(model, name)
        for index, item in enumerate(value if isinstance(value, list) else [value]):
            if isinstance(item, BaseModel):
                suffix = f".{index}" if isinstance(value, list) else ""
                found += _extras(item, f"{where}{name}{suffix}.")
    return found


def _family(spec: TaskSpecV2, hint: str) -> str:
    if family_named(hint) is not None:
        return hint
    derived = (
        f"{spec.baseline.language or spec.candidate.initial_language or spec.candidate.language}2"
        f"{spec.candidate.language}"
    )
    return derived if family_named(derived) is not None else hint


def _scopes(spec: TaskSpecV2, task_dir: Path, path: Path) -> list[EditScope]:
    scopes: list[EditScope] = []
    for item in spec.candidate.editable:
        if item.scope == "tree":
            tree = task_dir / item.path
            files = sorted(p.relative_to(task_dir).as_posix() for p in tree.rglob("*") if p.is_file())
            if not files:
                raise ConfigError(f"{path}: field 'candidate.editable': tree '{item.path}' holds no file")
            scopes += [EditScope(rel) for rel in files]
        else:
            scopes.append(EditScope(item.path, tuple(item.symbols or ()), item.allow_new_helpers))
    paths = [scope.path for scope in scopes]
    if len(set(paths)) != len(paths):
        raise ConfigError(f"{path}: field 'candidate.editable': a file is declared twice (overlapping declarations)")
    for scope in scopes:
        if not (task_dir / scope.path).is_file():
            raise ConfigError(f"{path}: field 'candidate.editable': '{scope.path}' does not exist in {task_dir}")
    return scopes


def _protected(spec: TaskSpecV2, scopes: list[EditScope], path: Path) -> None:
    """Files the evaluation relies on may not be editable as whole files."""
    protected = {"config.yaml", "README.md", *spec.instructions, *spec.baseline.source_files}
    if spec.evaluation.workloads:
        protected.add(spec.evaluation.workloads)
    whole = {scope.path for scope in scopes if not scope.symbols}
    clash = sorted(protected & whole)
    if clash:
        raise ConfigError(
            f"{path}: field 'candidate.editable': '{clash[0]}' is protected (config, README, "
            "instructions, workloads, baseline sources) and may not be editable"
        )


def _commands(evaluation: Evaluation, path: Path) -> ArenaCommands:
    overrides: dict[tuple[str, str], tuple[tuple[str, ...], ...]] = {}
    timeouts: dict[tuple[str, str], float] = {}
    slots: list[tuple[str, str, ActionSpec | None]] = [("task", "validate-task", evaluation.task)]
    for role in ROLES:
        actions = getattr(evaluation, role)
        slots += [(role, action, getattr(actions, action) if actions else None) for action in ACTIONS]
    for role, action, override in slots:
        if override is not None and override.commands is not None:
            if not override.commands or any(not argv for argv in override.commands):
                raise ConfigError(f"{path}: field 'evaluation.{role}': the {action} commands need at least one argv")
            overrides[(role, action)] = tuple(tuple(argv) for argv in override.commands)
        if override is not None and override.timeout_s is not None:
            timeouts[(role, action)] = float(override.timeout_s)
        if (role, action) not in overrides and not evaluation.runner:
            raise ConfigError(
                f"{path}: field 'evaluation.runner' is missing and {role} {action} has no commands; give a runner argv"
            )
    return ArenaCommands(tuple(evaluation.runner or ()), overrides, timeouts, float(evaluation.timeout_s))


def _manifest(spec: TaskSpecV2, task_dir: Path, path: Path) -> tuple[CaseManifest | None, list[str]]:
    workloads = spec.evaluation.workloads
    if not workloads:
        return None, [
            f"{path}: no evaluation.workloads: the cases an action reports are not checked against a manifest"
        ]
    file = task_dir / task_path(workloads)
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ConfigError(
            f"{path}: field 'evaluation.workloads': {workloads} is not a readable JSON file ({type(exc).__name__})"
        ) from None
    rows = data.get("cases") if isinstance(data, dict) else None
    if not isinstance(rows, list) or not all(isinstance(row, dict) for row in rows):
        return None, [
            f"{path}: {workloads} lists no cases: the cases an action reports are not checked against a manifest"
        ]
    try:
        return CaseManifest.from_rows(rows, str(file)), []
    except ArenaProtocolError as exc:
        raise ConfigError(f"{path}: field 'evaluation.workloads': {exc}") from None


def _prompt(spec: TaskSpecV2, task_dir: Path, path: Path) -> str | None:
    parts = [spec.description] if spec.description else []
    for rel in spec.instructions:
        file = task_dir / task_path(rel)
        if not file.is_file():
            raise ConfigError(f"{path}: field 'instructions': '{rel}' does not exist in {task_dir}")
        parts.append(file.read_text(encoding="utf-8", errors="replace"))
    return "\n\n".join(parts) or None


def _export_command(export: Export) -> str:
    """The export's argv, then its output copied into the run's export folder."""
    folder = str(PurePosixPath(export.output).parent)
    return (
        f'{shlex.join(export.command)} && mkdir -p "$AKA_EXPORT_DIR"/{shlex.quote(folder)} && '
        f'cp -- {shlex.quote(export.output)} "$AKA_EXPORT_DIR"/{shlex.quote(export.output)}'
    )


def load_v2(task_dir: Path, raw: dict[str, Any], family_hint: str) -> tuple[TaskConfig, OriginalSpec]:
    path = task_dir / "config.yaml"
    try:
        spec = TaskSpecV2.model_validate(raw)
    except ValidationError as exc:
        raise ConfigError(describe_validation_error(path, exc)) from exc
    platform, warnings = read_platform(spec.platform_support, str(path))
    warnings += [f"{path}: {line}" for line in _extras(spec, "")]
    family = _family(spec, family_hint)
    skip = language_skip_reason(spec.candidate.language)
    if spec.workspace is not None and (spec.workspace.sources or spec.workspace.setup):
        skip = (
            skip
            or "needs workspace sources or setup commands (an image tree or a git checkout), which aka does "
            "not materialize yet"
        )
    if skip is not None:
        return placeholder_config(family), OriginalSpec(2, (), platform, tuple(warnings), skip)
    if family_named(family) is None:
        raise ConfigError(
            f"{path}: the task's folder '{family_hint}' names no task family and candidate.language "
            f"'{spec.candidate.language}' implies none; put the task under a family folder "
            "(e.g. triton2triton/)"
        )
    scopes = _scopes(spec, task_dir, path)
    _protected(spec, scopes, path)
    commands = _commands(spec.evaluation, path)
    manifest, manifest_warnings = _manifest(spec, task_dir, path)
    kernels = [e.symbol for e in spec.candidate.entrypoints if e.kind == "function" and e.symbol]
    kernels += [s for scope in scopes for s in scope.symbols if s not in kernels]
    if not kernels:
        raise ConfigError(
            f"{path}: field 'candidate.entrypoints' names no function and no editable symbol; aka needs "
            "one to check the candidate (add a function entrypoint)"
        )
    fields: dict[str, Any] = {
        "task_type": family,
        "source_file_path": [scope.path for scope in scopes],
        "target_kernel_functions": kernels,
        **{
            f"{action}_command": [shlex.join(argv) for argv in commands.argvs("candidate", action)]
            for action in ACTIONS
        },
        **{f"{action}_timeout": commands.timeout("candidate", action) for action in ACTIONS},
        "baseline": "source",
        "prompt": {"instructions": _prompt(spec, task_dir, path)},
        "export_command": [_export_command(export) for export in spec.exports],
        "triton_versions": spec.triton_versions,
    }
    if spec.exports:
        fields["export_timeout"] = max(export.timeout_s for export in spec.exports)
    try:
        config = TaskConfig.model_validate(fields)
    except ValidationError as exc:
        raise ConfigError(describe_validation_error(path, exc)) from exc
    initial = spec.candidate.initial_state == "implemented"
    baseline_kind = spec.baseline.kind or ("initial_candidate" if initial else "provided")
    if baseline_kind == "initial_candidate" and not initial:
        raise ConfigError(
            f"{path}: field 'baseline.kind': initial_candidate needs an implemented candidate; "
            "use provided with source_files"
        )
    arena = ArenaSpec(commands, manifest, baseline_kind, spec.baseline.correctness_policy == "diagnostic")
    return config, OriginalSpec(
        2,
        tuple(scopes),
        platform,
        tuple(warnings + manifest_warnings),
        arena=arena,
        pairing=baseline_kind == "initial_candidate",
    )
