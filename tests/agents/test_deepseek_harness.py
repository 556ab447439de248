"""`deepseek_harness`: DeepSeek's API shape through the llm loop, against the scripted server on 127.0.0.1."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path

import pytest
from scripted_model_server import Reply, ScriptedModelServer

from aka.agents import agent_names
from aka.agents.deepseek_harness import DEEPSEEK_BASE_URL, DeepSeekOptions
from aka.config.run_config import load_run_config
from aka.errors import ConfigError
from aka.results.task_result import FailureKind, TaskStatus
from aka.run.runner import run_experiment

KEY = "sk-deepseek-test-key"
OLD, NEW = "TIME_MS = 4.0", "TIME_MS = 2.0"
ServerFactory = Callable[..., ScriptedModelServer]


@pytest.fixture
def model_server(monkeypatch: pytest.MonkeyPatch) -> Iterator[ServerFactory]:
    monkeypatch.setenv("DEEPSEEK_API_KEY", KEY)
    servers: list[ScriptedModelServer] = []

    def start(*script: Reply) -> ScriptedModelServer:
        servers.append(ScriptedModelServer(list(script), lifetime_seconds=120).start())
        return servers[-1]

    yield start
    for server in servers:
        server.stop()


def test_deepseek_thinking_turns_edit_the_kernel(model_server: ServerFactory, make_toy_task, write_run_config) -> None:
    """Thinking mode: the switch and the effort reach DeepSeek's fields, and each tool-call turn's
    reasoning_content goes back with it, as DeepSeek requires."""
    server = model_server(
        replace(Reply.tool("read_file", path="kernel.py"), reasoning="Read it."),
        replace(Reply.tool("edit_file", path="kernel.py", old_string=OLD, new_string=NEW), reasoning="Halve it."),
        Reply.tool("finish", summary="Halved TIME_MS."),
    )
    make_toy_task()
    agent = {"template": "deepseek_harness", "base_url": server.base_url, "thinking": "enabled", "effort": "max"}
    result = run_experiment(write_run_config(agent=agent)).results[0]
    out = result.agent
    assert out is not None and (out.agent, out.ok, out.exit_reason, out.turns) == (
        "deepseek_harness",
        True,
        "finished",
        3,
    ), out.message
    assert (result.status, result.failure_kind, result.speedup_ratio) == (TaskStatus.PASS, FailureKind.NONE, 2.0)
    requests = server.agent_requests
    assert [r.path for r in requests] == ["/chat/completions"] * 3
    assert all(r.headers.get("Authorization") == f"Bearer {KEY}" for r in requests)
    body = requests[0].body
    assert (body["model"], body["thinking"], body["reasoning_effort"], body["max_tokens"]) == (
        "deepseek-chat",
        {"type": "enabled"},
        "max",
        32768,
    )
    assistants = [m for m in requests[2].body["messages"] if m["role"] == "assistant"]
    assert [m.get("reasoning_content") for m in assistants] == ["Read it.", "Halve it."]


def test_deepseek_defaults() -> None:
    assert "deepseek_harness" in agent_names()
    options = DeepSeekOptions()
    assert (options.base_url, options.api_key_env, options.api) == (
        DEEPSEEK_BASE_URL,
        "DEEPSEEK_API_KEY",
        "chat_completions",
    )
    chat = options.for_model("deepseek-chat")
    assert (chat.max_tokens, chat.extra_body) == (8192, {})
    assert options.for_model("deepseek-reasoner").max_tokens == 32768
    off = DeepSeekOptions(thinking="disabled", max_tokens=1000, extra_body={"top_p": 0.9})
    assert (off.for_model("deepseek-reasoner").max_tokens, off.for_model("x").extra_body) == (
        1000,
        {"top_p": 0.9, "thinking": {"type": "disabled"}},
    )


def test_deepseek_options_are_validated(write_run_config) -> None:
    with pytest.raises(ConfigError, match="agent.api"):
        load_run_config(write_run_config(agent={"template": "deepseek_harness", "api": "anthropic"}))
    with pytest.raises(ConfigError, match="agent.thinking"):
        load_run_config(write_run_config(agent={"template": "deepseek_harness", "thinking": "on"}))


def test_deepseek_without_its_key_is_not_configured(
    make_toy_task, write_run_config, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("DEEPSEEK_API_KEY", raising=False)
    make_toy_task()
    result = run_experiment(
        write_run_config(agent={"template": "deepseek_harness", "base_url": "http://127.0.0.1:9"})
    ).results[0]
    assert result.agent is not None and (result.agent.ok, result.agent.exit_reason) == (False, "not_configured")
    assert "DEEPSEEK_API_KEY" in (result.agent.message or "") and result.status is TaskStatus.FAIL
