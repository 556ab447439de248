"""Agents: built-ins (noop, replay, autotune, llm, the agent CLIs) and the registry that plugins join."""

from aka.agents.registry import (
    AgentContext,
    AgentSettings,
    AgentSpec,
    agent_names,
    agent_type_enum,
    get_agent,
    load_agents,
    register_agent,
)

__all__ = [
    "AgentContext",
    "AgentSettings",
    "AgentSpec",
    "agent_names",
    "agent_type_enum",
    "get_agent",
    "load_agents",
    "register_agent",
]
