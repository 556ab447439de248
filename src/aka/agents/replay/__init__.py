"""`replay`: scores candidates produced elsewhere (an RL policy, another agent, a human).

For each editable file of the task it copies `<solutions_dir>/<task name>/<relative path>` over
the workspace copy when that file exists. A task with no solution file at all is an agent error,
so a missing candidate is never mistaken for a deliberate no-op.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from pydantic import BaseModel, ConfigDict, field_validator

from aka.agents.registry import AgentContext, register_agent
from aka.results.task_result import AgentOutcome


class ReplayOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")

    solutions_dir: Path

    @field_validator("solutions_dir")
    @classmethod
    def _exists(cls, value: Path) -> Path:
        if not value.expanduser().is_dir():
            raise ValueError(f"solutions_dir '{value}' is not a directory (point it at DIR/<task name>/...)")
        return value.expanduser().resolve()


@register_agent("replay", options=ReplayOptions)
def launch_agent(eval_config: AgentContext, task_config_dir: Path, workspace: Path) -> AgentOutcome:
    assert isinstance(eval_config.options, ReplayOptions)
    solution_root = eval_config.options.solutions_dir / eval_config.task_name
    copied: list[str] = []
    for rel in eval_config.editable_files:
        source = solution_root / rel
        if source.is_file():
            shutil.copyfile(source, workspace / rel)
            copied.append(rel)
    if not copied:
        return AgentOutcome(
            agent=eval_config.agent_name,
            ok=False,
            exit_reason="no_solution",
            message=f"no solution files under {solution_root} for {', '.join(eval_config.editable_files)}",
            files_changed=[],
        )
    return AgentOutcome(agent=eval_config.agent_name, message=f"replayed {len(copied)} file(s)", files_changed=copied)
