"""Task configuration (`config.yaml` in a task folder): the seed's fields as a validated model."""

from __future__ import annotations

from enum import Enum
from pathlib import Path, PurePosixPath
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from aka.compat.triton_versions import valid_specifier
from aka.config.families import FAMILIES, family_named
from aka.errors import ConfigError, describe_validation_error

TASK_CONFIG_NAME = "config.yaml"
DEFAULT_STEP_TIMEOUT = 3600.0

REPOSITORY_FAMILY = "repository"


class BaselineSource(str, Enum):
    """What the baseline time measures: the task's original source, or the PyTorch reference."""

    SOURCE = "source"
    REFERENCE = "reference"


class PromptSection(BaseModel):
    model_config = ConfigDict(extra="forbid")

    source_code: str | None = None
    instructions: str | None = None
    cheatsheet: str | None = None


class PlatformSupport(BaseModel):
    model_config = ConfigDict(extra="forbid")

    status: Literal["active", "skip"] = "active"
    required_arch: str | None = None
    reason: str | None = None


class Tunable(BaseModel):
    """A knob a search may set: a module-level `NAME = value` line (Python) or `#define NAME value`
    (CUDA/C++) in `file` (default: the first editable file). The first value is not special."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    file: str | None = None
    values: list[int | float | str | bool] = Field(min_length=1)


def _as_list(value: Any) -> Any:
    return [value] if isinstance(value, str) else value


class TaskConfig(BaseModel):
    """One task's `config.yaml`. Commands run in the evaluation directory through the shell."""

    model_config = ConfigDict(extra="forbid")

    task_type: str
    source_file_path: list[str] = Field(default_factory=list)
    target_kernel_functions: list[str] = Field(default_factory=list)
    compile_command: list[str]
    correctness_command: list[str]
    performance_command: list[str] = Field(default_factory=list)
    export_command: list[str] = Field(default_factory=list)
    compile_timeout: float = Field(default=DEFAULT_STEP_TIMEOUT, gt=0)
    correctness_timeout: float = Field(default=DEFAULT_STEP_TIMEOUT, gt=0)
    performance_timeout: float = Field(default=DEFAULT_STEP_TIMEOUT, gt=0)
    export_timeout: float = Field(default=DEFAULT_STEP_TIMEOUT, gt=0)
    baseline: BaselineSource | None = None
    prompt: PromptSection = Field(default_factory=PromptSection)
    platform_support: PlatformSupport = Field(default_factory=PlatformSupport)
    tunables: list[Tunable] = Field(default_factory=list)
    hidden_files: list[str] = Field(default_factory=list)
    task_result_template: Any = None
    repo_url: str | None = None
    repo_revision: str | None = None  # the pinned commit (or tag) of repo_url; ours, not in the seed
    repository_language: str | None = None
    post_clone_install: list[str] = Field(default_factory=list)
    post_clone_install_mode: str | None = None
    repo_subdir: str | None = None
    triton_versions: str | None = None  # a PEP 440 specifier of the Triton the task needs (aka.compat.triton_versions)

    _list_fields = field_validator(
        "source_file_path",
        "target_kernel_functions",
        "compile_command",
        "correctness_command",
        "performance_command",
        "export_command",
        "post_clone_install",
        "hidden_files",
        mode="before",
    )(_as_list)

    @field_validator("task_type")
    @classmethod
    def _known_family(cls, value: str) -> str:
        if family_named(value) is None:
            raise ValueError(f"unknown task type '{value}'; allowed: {', '.join(sorted(FAMILIES))}")
        return value

    @field_validator("triton_versions")
    @classmethod
    def _specifier(cls, value: str | None) -> str | None:
        return valid_specifier(value) if value is not None else None

    @field_validator("source_file_path", "hidden_files")
    @classmethod
    def _relative_paths(cls, paths: list[str]) -> list[str]:
        for raw in paths:
            path = PurePosixPath(raw)
            if path.is_absolute() or ".." in path.parts or not raw.strip():
                raise ValueError(f"'{raw}' must be a path inside the task folder")
        return paths

    @field_validator("compile_command", "correctness_command")
    @classmethod
    def _non_empty_commands(cls, commands: list[str]) -> list[str]:
        if not commands or any(not c.strip() for c in commands):
            raise ValueError("needs at least one non-empty command")
        return commands

    @model_validator(mode="after")
    def _family_requirements(self) -> TaskConfig:
        if self.task_type == REPOSITORY_FAMILY:
            if not self.repo_url or not self.repository_language:
                raise ValueError("repository tasks need repo_url and repository_language")
        elif not self.source_file_path or not self.target_kernel_functions:
            raise ValueError("kernel tasks need source_file_path and target_kernel_functions")
        if set(self.hidden_files) & set(self.source_file_path):
            raise ValueError("hidden_files may not include editable files (source_file_path)")
        for tunable in self.tunables:
            if tunable.file is not None and tunable.file not in self.source_file_path:
                raise ValueError(f"tunable {tunable.name}: file '{tunable.file}' is not in source_file_path")
        return self

    def tunable_file(self, tunable: Tunable) -> str:
        return tunable.file or self.source_file_path[0]

    @property
    def baseline_source(self) -> BaselineSource:
        """Explicit `baseline`, else the family's default (aka.config.families: torch2* and instruction2*
        start from a PyTorch reference, and time it)."""
        if self.baseline is not None:
            return self.baseline
        family = family_named(self.task_type)
        return BaselineSource(family.baseline) if family is not None else BaselineSource.SOURCE


def read_task_yaml(task_dir: Path) -> dict[str, Any]:
    """The raw mapping of `task_dir/config.yaml`; a missing file, bad YAML or a non-mapping is a `ConfigError`."""
    path = task_dir / TASK_CONFIG_NAME
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise ConfigError(f"{path}: task config not found (every task folder needs a {TASK_CONFIG_NAME})") from exc
    except (yaml.YAMLError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: not valid YAML: {str(exc).splitlines()[0]}") from exc
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: must be a mapping of task fields")
    return raw


def validate_task_config(task_dir: Path, raw: dict[str, Any]) -> TaskConfig:
    """Our schema, strictly: every problem is a one-line `ConfigError`."""
    path = task_dir / TASK_CONFIG_NAME
    try:
        config = TaskConfig.model_validate(raw)
    except ValidationError as exc:
        raise ConfigError(describe_validation_error(path, exc)) from exc
    for rel in config.source_file_path:
        if config.task_type != REPOSITORY_FAMILY and not (task_dir / rel).is_file():
            raise ConfigError(f"{path}: field 'source_file_path': '{rel}' does not exist in {task_dir}")
    for rel in config.hidden_files:
        if not (task_dir / rel).is_file():
            raise ConfigError(f"{path}: field 'hidden_files': '{rel}' does not exist in {task_dir}")
    return config


def load_task_config(task_dir: Path) -> TaskConfig:
    """Load and validate `task_dir/config.yaml` in our schema; every problem is a one-line `ConfigError`."""
    return validate_task_config(task_dir, read_task_yaml(task_dir))
