"""Agents: built-ins (noop, replay) and the registry that third-party agents join."""

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
