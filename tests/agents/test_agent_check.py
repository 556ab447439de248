"""`aka check-agents` for the agents that are not CLIs: what each still needs, and the llm agents'
one-request live check against the scripted server (the CLI agents: tests/agents/test_agent_clis.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from scripted_model_server import ScriptedModelServer
from typer.testing import CliRunner

from aka.agents.check import run_checks
from aka.cli import app


@pytest.fixture
def server() -> Iterator[ScriptedModelServer]:
    with ScriptedModelServer(side_text="READY", lifetime_seconds=60) as running:
        yield running


def test_what_each_agent_still_needs(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DEEPSEEK_API_KEY", raising=False)
    checks = {c.name: c for c in run_checks("noop,autotune,replay,llm,deepseek_harness", False, None)}
    assert checks["noop"].ready and checks["autotune"].ready and checks["noop"].needs == "-"
    assert not checks["replay"].ready and "`solutions_dir`" in checks["replay"].needs
    assert not checks["llm"].ready
    assert (
        checks["llm"].needs == "a model (`model:` in the run config's agent section); an endpoint (agent option "
        "`base_url`)"
    )
    deepseek = checks["deepseek_harness"]
    assert not deepseek.ready and deepseek.needs == "its key in $DEEPSEEK_API_KEY (not set)"
    assert deepseek.credentials == "endpoint https://api.deepseek.com; key in DEEPSEEK_API_KEY (NOT SET)"
    result = CliRunner().invoke(app, ["check-agents", "--agents", "llm"])
    assert result.exit_code == 1 and "base_url" in result.output


def test_llm_agents_ready_and_live_from_a_run_config(
    server: ScriptedModelServer, write_run_config, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DEEPSEEK_API_KEY", "sk-test")
    llm = write_run_config(agent={"template": "llm", "model": "m", "base_url": server.base_url + "/v1"})
    (check,) = run_checks("all", True, llm)
    assert (check.ready, check.needs, check.credentials) == (
        True,
        "-",
        f"endpoint {server.base_url}/v1; no key (a local server)",
    )
    assert check.live.startswith("ok") and check.live.endswith("READY"), check.live
    deepseek = write_run_config(agent={"template": "deepseek_harness", "base_url": server.base_url})
    (check,) = run_checks("all", True, deepseek)
    assert check.ready and check.live.startswith("ok"), check
    sent = server.requests[-1]
    assert (sent.path, sent.body["model"], sent.headers.get("Authorization")) == (
        "/chat/completions",
        "deepseek-chat",
        "Bearer sk-test",
    )
    assert "tools" not in sent.body


def test_a_failed_live_call_is_not_ready(write_run_config) -> None:
    config = write_run_config(agent={"template": "llm", "model": "m", "base_url": "http://127.0.0.1:9/v1"})
    (check,) = run_checks("all", True, config)
    assert not check.ready and check.live.startswith("FAILED") and "cannot reach" in check.live
    assert check.needs == "a working endpoint (the live call failed)"
