"""Run configuration (the YAML a user passes to `aka run`): seed fields, validated at load time."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from aka.agents.registry import AgentSettings, AgentSpec, agent_names, get_agent
from aka.errors import ConfigError, describe_validation_error
from aka.tasks import default_tasks_root

RUN_SUFFIX_PATTERN = re.compile(r"^[A-Za-z0-9._-]+$")
AGENT_COMMON_FIELDS = ("model", "effort", "max_iterations", "timeout_seconds")


class AgentSection(BaseModel):
    """`agent:`: the template plus overrides; other keys are the agent's own options."""

    model_config = ConfigDict(extra="allow")

    template: str
    model: str | None = None
    effort: str | None = None
    max_iterations: int | None = Field(default=None, ge=0)
    timeout_seconds: float | None = Field(default=None, gt=0)


class RunConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    agent: AgentSection
    tasks: list[str] = Field(min_length=1)
    target_gpu_model: str
    log_directory: str = "logs"
    workspace_directory_prefix: str = "workspace"
    tasks_root: str | None = None
    scorer: str = "default"
    gpu_ids: str | None = None
    num_parallel: int | None = Field(default=None, ge=1)
    run_mode: str | None = None

    @field_validator("tasks", mode="before")
    @classmethod
    def _tasks_list(cls, value: Any) -> Any:
        return [value] if isinstance(value, str) else value


class AgentFileConfig(BaseModel):
    """An agent's own `agent_config.yaml`."""

    model_config = ConfigDict(extra="forbid")

    model: str | None = None
    effort: str | None = None
    max_iterations: int | None = Field(default=None, ge=0)
    timeout_seconds: float | None = Field(default=None, gt=0)


@dataclass(frozen=True)
class LoadedRunConfig:
    """A validated run config with everything resolved to absolute paths."""

    path: Path
    config: RunConfig
    agent: AgentSpec
    agent_settings: AgentSettings
    agent_options: BaseModel
    tasks_root: Path

    @property
    def agent_name(self) -> str:
        return self.agent.name


def _read_yaml_mapping(path: Path) -> dict[str, Any]:
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise ConfigError(f"{path}: run config not found (pass an existing YAML file)") from exc
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML: {str(exc).splitlines()[0]}") from exc
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: must be a mapping with agent, tasks and target_gpu_model")
    return raw


def _agent_settings(spec: AgentSpec, section: AgentSection) -> AgentSettings:
    base = AgentFileConfig()
    if spec.config_path is not None:
        try:
            base = AgentFileConfig.model_validate(yaml.safe_load(spec.config_path.read_text()) or {})
        except ValidationError as exc:
            raise ConfigError(describe_validation_error(spec.config_path, exc)) from exc
    merged = {f: getattr(section, f) if getattr(section, f) is not None else getattr(base, f)
              for f in AGENT_COMMON_FIELDS}
    return AgentSettings(**merged)


def load_run_config(path: Path) -> LoadedRunConfig:
    """Validate a run config; every problem is one `ConfigError` line naming file, field and fix."""
    path = path.resolve()
    raw = _read_yaml_mapping(path)
    try:
        config = RunConfig.model_validate(raw)
    except ValidationError as exc:
        raise ConfigError(describe_validation_error(path, exc)) from exc
    try:
        spec = get_agent(config.agent.template)
    except KeyError:
        raise ConfigError(
            f"{path}: field 'agent.template': unknown agent '{config.agent.template}' "
            f"(registered: {', '.join(agent_names())})"
        ) from None
    try:
        options = spec.options_model.model_validate(config.agent.model_extra or {})
    except ValidationError as exc:
        message = describe_validation_error(path, exc)
        raise ConfigError(message.replace("field '", "field 'agent.", 1)) from exc
    tasks_root = Path(config.tasks_root).expanduser().resolve() if config.tasks_root else default_tasks_root()
    return LoadedRunConfig(path, config, spec, _agent_settings(spec, config.agent), options, tasks_root)


def check_run_suffix(suffix: str | None) -> None:
    if suffix is not None and not RUN_SUFFIX_PATTERN.match(suffix):
        raise ConfigError(f"--run-suffix '{suffix}': use only letters, digits, '.', '_' and '-'")
