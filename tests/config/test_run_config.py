from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from aka.agents.replay import ReplayOptions
from aka.config.run_config import check_run_suffix, load_run_config
from aka.errors import ConfigError


def test_defaults_and_agent_config_merge(write_run_config) -> None:
    loaded = load_run_config(write_run_config(agent={"template": "noop", "timeout_seconds": 5}))
    assert loaded.agent_name == "noop"
    assert loaded.agent_settings.timeout_seconds == 5
    assert loaded.agent_settings.max_iterations == 0  # from noop's agent_config.yaml


def test_replay_options_are_validated(write_run_config, tmp_path: Path) -> None:
    (tmp_path / "sols").mkdir()
    loaded = load_run_config(write_run_config(agent={"template": "replay", "solutions_dir": str(tmp_path / "sols")}))
    assert isinstance(loaded.agent_options, ReplayOptions)
    with pytest.raises(ConfigError, match="field 'agent.solutions_dir': required field is missing"):
        load_run_config(write_run_config(agent={"template": "replay"}))
    with pytest.raises(ConfigError, match="is not a directory"):
        load_run_config(write_run_config(agent={"template": "replay", "solutions_dir": str(tmp_path / "none")}))


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        ({"agent": {"template": "nonexistent"}}, "field 'agent.template': unknown agent 'nonexistent'"),
        ({"agent": {"template": "noop", "temperature": 1}}, "field 'agent.temperature': unknown field"),
        ({"agent": {"template": "noop", "timeout_seconds": 0}}, "field 'agent.timeout_seconds'"),
        ({"tasks": []}, "field 'tasks'"),
        ({"colour": "blue"}, "field 'colour': unknown field"),
    ],
)
def test_bad_run_configs(write_run_config, fields: dict[str, object], expected: str) -> None:
    path = write_run_config(**fields)
    with pytest.raises(ConfigError) as info:
        load_run_config(path)
    assert str(path) in str(info.value) and expected in str(info.value)


def test_missing_target_and_bad_yaml(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump({"agent": {"template": "noop"}, "tasks": ["all"]}))
    with pytest.raises(ConfigError, match="field 'target_gpu_model': required field is missing"):
        load_run_config(path)
    path.write_text("- just\n- a list\n")
    with pytest.raises(ConfigError, match="must be a mapping"):
        load_run_config(path)
    with pytest.raises(ConfigError, match="run config not found"):
        load_run_config(tmp_path / "missing.yaml")


def test_run_suffix_rules() -> None:
    check_run_suffix("ab_test-1.2")
    check_run_suffix(None)
    with pytest.raises(ConfigError, match="--run-suffix"):
        check_run_suffix("bad/suffix")
