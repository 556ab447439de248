"""`noop`: leaves the workspace untouched, so the candidate is the baseline (the A/A control)."""

from __future__ import annotations

from pathlib import Path

from aka.agents.registry import AgentContext, register_agent
from aka.results.task_result import AgentOutcome


@register_agent("noop")
def launch_agent(eval_config: AgentContext, task_config_dir: Path, workspace: Path) -> AgentOutcome:
    return AgentOutcome(agent=eval_config.agent_name, message="no changes by design")
