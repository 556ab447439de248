from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import BaseModel

from aka.agents import AgentContext, AgentSettings, agent_names, agent_type_enum, get_agent, register_agent
from aka.agents.replay import ReplayOptions
from aka.config.task_config import BaselineSource
from aka.config.tasks import Task, select_tasks
from aka.device import DeviceInfo
from aka.evaluation.baseline import BaselineRecord
from aka.results.task_result import AgentOutcome


def _context(name: str, options: BaseModel, toy: Task, task: str = "fam/suite/t") -> AgentContext:
    baseline = BaselineRecord(task_name=task, task_identity="x", device="cpu", source=BaselineSource.SOURCE)
    return AgentContext(
        agent_name=name,
        settings=AgentSettings(None, None, None, None),
        options=options,
        task_name=task,
        prompt="p",
        editable_files=("kernel.py", "sub/helper.py"),
        log_path=Path("/dev/null"),
        task=toy,
        device=DeviceInfo("cpu", "cpu", "cpu", None, 0),
        baseline=baseline,
    )


def test_builtins_are_registered_with_configs() -> None:
    assert {"noop", "replay"} <= set(agent_names())
    assert {member.value for member in agent_type_enum()} == set(agent_names())
    assert get_agent("noop").config_path is not None and get_agent("noop").config_path.name == "agent_config.yaml"


def test_register_agent_decorator_and_duplicates() -> None:
    @register_agent("test_echo")
    def launch_agent(eval_config: AgentContext, task_config_dir: Path, workspace: Path) -> AgentOutcome:
        return AgentOutcome(agent=eval_config.agent_name)

    assert get_agent("test_echo").launch is launch_agent
    with pytest.raises(ValueError, match="already registered"):
        register_agent("test_echo")(lambda eval_config, task_config_dir, workspace: AgentOutcome(agent="x"))


def test_replay_copies_only_existing_editable_files(tmp_path: Path, tasks_root: Path, make_toy_task) -> None:
    make_toy_task()
    toy = select_tasks(tasks_root, ["all"])[0]
    solutions, work = tmp_path / "solutions", tmp_path / "work"
    (solutions / "fam/suite/t").mkdir(parents=True)
    (solutions / "fam/suite/t/kernel.py").write_text("new")
    (solutions / "fam/suite/t/harness.py").write_text("tampered harness")
    (work / "sub").mkdir(parents=True)
    (work / "kernel.py").write_text("old")
    (work / "sub/helper.py").write_text("helper")
    (work / "harness.py").write_text("harness")
    options = ReplayOptions(solutions_dir=solutions)
    outcome = get_agent("replay").launch(_context("replay", options, toy), tmp_path, work)
    assert outcome.ok and outcome.files_changed == ["kernel.py"]
    assert (work / "kernel.py").read_text() == "new" and (work / "harness.py").read_text() == "harness"

    missing = get_agent("replay").launch(_context("replay", options, toy, task="fam/suite/other"), tmp_path, work)
    assert not missing.ok and missing.exit_reason == "no_solution"
