"""The agent registry: launchers register by decorator; third-party packages by entry point.

A launcher has the seed's signature `launch_agent(eval_config, task_config_dir, workspace)`.
Each agent may declare a pydantic model of its own run-config options (e.g. replay's
`solutions_dir`), so that `agent:` sections are validated field by field.
"""

from __future__ import annotations

import importlib
import logging
import pkgutil
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from importlib.metadata import entry_points
from pathlib import Path
from typing import Protocol

from pydantic import BaseModel, ConfigDict

from aka.config.tasks import Task
from aka.device import DeviceInfo
from aka.evaluation.baseline import BaselineRecord
from aka.results.task_result import AgentOutcome

logger = logging.getLogger(__name__)

ENTRY_POINT_GROUP = "aka.agents"


class NoOptions(BaseModel):
    """Agents without options of their own accept no extra `agent:` fields."""

    model_config = ConfigDict(extra="forbid")


@dataclass(frozen=True)
class AgentSettings:
    """The agent's `agent_config.yaml` values after run-level overrides."""

    model: str | None
    effort: str | None
    max_iterations: int | None
    timeout_seconds: float | None


@dataclass(frozen=True)
class AgentContext:
    """What a launcher gets as `eval_config`: who it is, its settings, the task and its prompt.

    `task`, `device` and `baseline` let built-in agents evaluate their own candidates through
    `aka.evaluation.steps.evaluate_candidate`, exactly as the final evaluation will.
    """

    agent_name: str
    settings: AgentSettings
    options: BaseModel
    task_name: str
    prompt: str
    editable_files: tuple[str, ...]
    log_path: Path
    task: Task
    device: DeviceInfo
    baseline: BaselineRecord


class AgentLauncher(Protocol):
    def __call__(self, eval_config: AgentContext, task_config_dir: Path, workspace: Path) -> AgentOutcome: ...


@dataclass(frozen=True)
class AgentSpec:
    name: str
    launch: AgentLauncher
    options_model: type[BaseModel]
    config_path: Path | None


_REGISTRY: dict[str, AgentSpec] = {}


def register_agent(name: str, options: type[BaseModel] = NoOptions) -> Callable[[AgentLauncher], AgentLauncher]:
    """Register `launch_agent` under `name`; its `agent_config.yaml` sits next to its module."""

    def decorator(launch: AgentLauncher) -> AgentLauncher:
        if name in _REGISTRY and _REGISTRY[name].launch is not launch:
            raise ValueError(f"agent '{name}' is already registered")
        module = importlib.import_module(launch.__module__)
        module_file = getattr(module, "__file__", None)
        config = Path(module_file).with_name("agent_config.yaml") if module_file else None
        _REGISTRY[name] = AgentSpec(name, launch, options, config if config and config.is_file() else None)
        return launch

    return decorator


def load_agents() -> None:
    """Import the built-in agents (each a subpackage of `aka.agents`) and every `aka.agents` entry point."""
    package = importlib.import_module("aka.agents")
    for module in pkgutil.iter_modules(package.__path__):
        if module.ispkg:
            importlib.import_module(f"aka.agents.{module.name}")
    for entry in entry_points(group=ENTRY_POINT_GROUP):
        try:
            entry.load()
        except Exception as exc:  # a broken plugin must not take the platform down
            logger.warning("agent plugin %s failed to load: %s", entry.name, exc)


def agent_names() -> list[str]:
    load_agents()
    return sorted(_REGISTRY)


def agent_type_enum() -> type[Enum]:
    """The selectable agent names as an enum (the seed's `AgentType`)."""
    return Enum("AgentType", {name: name for name in agent_names()})  # type: ignore[return-value]


def get_agent(name: str) -> AgentSpec:
    load_agents()
    try:
        return _REGISTRY[name]
    except KeyError:
        raise KeyError(name) from None
