"""Run configuration (the YAML a user passes to `aka run`): seed fields, validated at load time."""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from aka.agents.registry import AgentSettings, AgentSpec, agent_names, get_agent
from aka.config.tasks import default_tasks_root
from aka.errors import ConfigError, describe_validation_error

RUN_SUFFIX_PATTERN = re.compile(r"^[A-Za-z0-9._-]+$")
ARM_LABEL_PATTERN = re.compile(r"^[A-Za-z0-9._-]+$")
AGENT_COMMON_FIELDS = ("model", "effort", "max_iterations", "timeout_seconds")


class AgentSection(BaseModel):
    """`agent:`: the template plus overrides; other keys are the agent's own options."""

    model_config = ConfigDict(extra="allow")

    template: str
    model: str | None = None
    effort: str | None = None
    max_iterations: int | None = Field(default=None, ge=0)
    timeout_seconds: float | None = Field(default=None, gt=0)


class ArmSection(BaseModel):
    """One arm of a multi-arm experiment: a label and the agent it runs, with its overrides."""

    model_config = ConfigDict(extra="forbid")

    label: str
    agent: AgentSection


class RunConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    agent: AgentSection | None = None
    arms: list[ArmSection] | None = None
    repeats: int = Field(default=1, ge=1)
    schedule_seed: int | None = None
    tasks: list[str] = Field(min_length=1)
    target_gpu_model: str
    log_directory: str = "logs"
    workspace_directory_prefix: str = "workspace"
    tasks_root: str | None = None
    scorer: str = "default"
    gpu_ids: str | int | list[int] | None = None  # GPUs of a parallel run (aka.parallel.executor.device_slots)
    num_parallel: int | None = Field(default=None, ge=1)  # workers per GPU (or CPU workers without gpu_ids)
    run_mode: str | None = None
    report_format: Literal["aka", "original"] = "aka"  # "original": the original's report files (aka.compat)
    # "during": an accepted candidate of a task with a hidden heldout.py is also evaluated on its
    # held-out cases in the run (twice the GPU time of an accepted trial); "after": left to
    # `aka heldout RUN`, which an A/B experiment that compares arms on their own cases may skip.
    heldout: Literal["during", "after"] = "during"

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
class LoadedArm:
    """An arm with its agent resolved: spec, merged settings, validated options."""

    label: str | None
    agent: AgentSpec
    agent_settings: AgentSettings
    agent_options: BaseModel


@dataclass(frozen=True)
class LoadedRunConfig:
    """A validated run config with everything resolved to absolute paths.

    `agent`, `agent_settings` and `agent_options` are the (first) arm's; `for_arm` gives the same
    config seen from another arm, which is what a task of that arm runs with."""

    path: Path
    config: RunConfig
    agent: AgentSpec
    agent_settings: AgentSettings
    agent_options: BaseModel
    tasks_root: Path
    arms: tuple[LoadedArm, ...] = ()

    @property
    def agent_name(self) -> str:
        return self.agent.name

    @property
    def multi_arm(self) -> bool:
        return self.config.arms is not None

    @property
    def experiment_name(self) -> str:
        """The agent's name, or `arms-<label>-<label>...` for a multi-arm run (the experiment folder's name)."""
        return "arms-" + "-".join(str(a.label) for a in self.arms) if self.multi_arm else self.agent_name

    def for_arm(self, arm: LoadedArm) -> LoadedRunConfig:
        return replace(self, agent=arm.agent, agent_settings=arm.agent_settings, agent_options=arm.agent_options)


def _read_yaml_mapping(path: Path) -> dict[str, Any]:
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise ConfigError(f"{path}: run config not found (pass an existing YAML file)") from exc
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not a UTF-8 text file (byte {exc.start}); pass the run config's YAML") from exc
    except OSError as exc:
        raise ConfigError(f"{path}: cannot be read ({exc.strerror}); check the path and its permissions") from exc
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
    merged = {
        f: getattr(section, f) if getattr(section, f) is not None else getattr(base, f) for f in AGENT_COMMON_FIELDS
    }
    return AgentSettings(**merged)


def _load_arm(path: Path, section: AgentSection, field: str, label: str | None) -> LoadedArm:
    try:
        spec = get_agent(section.template)
    except KeyError:
        raise ConfigError(
            f"{path}: field '{field}.template': unknown agent '{section.template}' "
            f"(registered: {', '.join(agent_names())})"
        ) from None
    try:
        options = spec.options_model.model_validate(section.model_extra or {})
    except ValidationError as exc:
        message = describe_validation_error(path, exc)
        raise ConfigError(message.replace("field '", f"field '{field}.", 1)) from exc
    return LoadedArm(label, spec, _agent_settings(spec, section), options)


def _check_arms(path: Path, config: RunConfig) -> None:
    if (config.agent is None) == (config.arms is None):
        raise ConfigError(
            f"{path}: fields 'agent' and 'arms': give exactly one (agent: for one agent, "
            "arms: a list of {label, agent} for an experiment)"
        )
    if config.arms is None:
        return
    if len(config.arms) < 2:
        raise ConfigError(f"{path}: field 'arms': list at least two arms (or use agent: for one)")
    seen: set[str] = set()
    for i, arm in enumerate(config.arms):
        if not ARM_LABEL_PATTERN.match(arm.label) or "__" in arm.label:
            raise ConfigError(
                f"{path}: field 'arms.{i}.label': '{arm.label}': use letters, digits, '.', '_' and '-' (no '__')"
            )
        if arm.label in seen:
            raise ConfigError(f"{path}: field 'arms.{i}.label': '{arm.label}' is used twice; labels are unique")
        seen.add(arm.label)


def load_run_config(path: Path) -> LoadedRunConfig:
    """Validate a run config; every problem is one `ConfigError` line naming file, field and fix."""
    path = path.resolve()
    raw = _read_yaml_mapping(path)
    try:
        config = RunConfig.model_validate(raw)
    except ValidationError as exc:
        raise ConfigError(describe_validation_error(path, exc)) from exc
    _check_arms(path, config)
    if config.arms is not None:
        arms = tuple(_load_arm(path, arm.agent, f"arms.{i}.agent", arm.label) for i, arm in enumerate(config.arms))
    else:
        assert config.agent is not None
        arms = (_load_arm(path, config.agent, "agent", None),)
    tasks_root = Path(config.tasks_root).expanduser().resolve() if config.tasks_root else default_tasks_root()
    first = arms[0]
    return LoadedRunConfig(path, config, first.agent, first.agent_settings, first.agent_options, tasks_root, arms)


def check_run_suffix(suffix: str | None) -> None:
    if suffix is not None and not RUN_SUFFIX_PATTERN.match(suffix):
        raise ConfigError(f"--run-suffix '{suffix}': use only letters, digits, '.', '_' and '-'")
