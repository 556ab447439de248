"""The built-in `llm` agent, end to end through `run_experiment`, against scripted model servers.

Both protocols (Chat Completions, Anthropic Messages) drive the same toy task: read the kernel,
halve its TIME_MS, evaluate, finish. Then the confinement of the file tools, every limit the loop
enforces, broken servers, and option validation. No network beyond 127.0.0.1.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from conftest import TOY_KERNEL
from scripted_model_server import RecordedRequest, Reply, ScriptedModelServer

from aka.agents.llm.protocols import AnthropicMessages, ChatCompletions, RequestSettings
from aka.agents.llm.tools import TOOL_SPECS
from aka.config.run_config import load_run_config
from aka.errors import ConfigError
from aka.results.task_result import AgentOutcome, FailureKind, TaskResult, TaskStatus
from aka.run.runner import run_experiment

KEY_ENV, KEY = "AKA_TEST_LLM_KEY", "sk-llm-test-key"
OLD, NEW = "TIME_MS = 4.0", "TIME_MS = 2.0"
APIS = ["chat_completions", "anthropic"]
ServerFactory = Callable[..., ScriptedModelServer]


@pytest.fixture
def model_server(monkeypatch: pytest.MonkeyPatch) -> Iterator[ServerFactory]:
    monkeypatch.setenv(KEY_ENV, KEY)
    servers: list[ScriptedModelServer] = []

    def start(*script: Reply | Callable[[RecordedRequest], Reply], **options: Any) -> ScriptedModelServer:
        server = ScriptedModelServer(list(script), lifetime_seconds=120, **options)
        servers.append(server.start())
        return server

    yield start
    for server in servers:
        server.stop()


def _agent(base_url: str, api: str = "chat_completions", **extra: object) -> dict[str, object]:
    url = base_url + ("/v1" if api == "chat_completions" else "")
    return {"template": "llm", "api": api, "base_url": url, "model": "scripted-model", "api_key_env": KEY_ENV, **extra}


def _run(make_toy_task, write_run_config, agent: dict[str, object]) -> tuple[TaskResult, AgentOutcome, Path]:
    make_toy_task()
    outcome = run_experiment(write_run_config(agent=agent))
    workspace = next(p for p in outcome.run_dir.iterdir() if p.name.startswith("triton2triton_toy_answer_"))
    result = outcome.results[0]
    assert result.agent is not None
    return result, result.agent, workspace


def _work(tmp_path: Path) -> Path:
    return next(tmp_path.glob("workspace_*/run_*/*/work"))


def _tool_results(request: RecordedRequest) -> list[str]:
    """Every tool result the model has been sent so far, in order, in either protocol."""
    results: list[str] = []
    for message in request.body["messages"]:
        if message["role"] == "tool":
            results.append(message["content"])
        elif message["role"] == "user" and isinstance(message["content"], list):
            results += [b["content"] for b in message["content"] if b.get("type") == "tool_result"]
    return results


def _header(request: RecordedRequest, name: str) -> str | None:
    return next((v for k, v in request.headers.items() if k.lower() == name), None)


@pytest.mark.parametrize("api", APIS)
def test_model_edits_evaluates_and_finishes(
    api: str, model_server: ServerFactory, make_toy_task, write_run_config, tmp_path: Path
) -> None:
    server = model_server(
        Reply.tool("read_file", path="kernel.py"),
        Reply.tool("edit_file", path="kernel.py", old_string=OLD, new_string=NEW),
        Reply.tool("run_evaluation"),
        Reply.tool("finish", summary="Halved TIME_MS."),
    )
    result, agent, workspace = _run(make_toy_task, write_run_config, _agent(server.base_url, api))

    assert (result.status, result.failure_kind) == (TaskStatus.PASS, FailureKind.NONE)
    assert result.speedup_ratio == pytest.approx(2.0)
    assert (agent.ok, agent.exit_reason, agent.message) == (True, "finished", "Halved TIME_MS.")
    assert (agent.turns, agent.tool_calls, agent.input_tokens, agent.output_tokens) == (4, 4, 480, 48)
    assert agent.files_changed == ["kernel.py"] and agent.wall_seconds > 0

    requests = server.agent_requests
    assert len(requests) == 4 and all(r.model == "scripted-model" for r in requests)
    assert set(requests[0].tool_names) == {
        "list_files",
        "read_file",
        "write_file",
        "edit_file",
        "run_evaluation",
        "finish",
    }
    assert "toy_kernel" in json.dumps(requests[0].body["messages"][-1])
    assert OLD in _tool_results(requests[1])[-1]
    assert _tool_results(requests[2])[-1] == "edited kernel.py"
    evaluation = _tool_results(requests[3])[-1]
    assert "correctness: pass" in evaluation and "mean speedup 2.000x" in evaluation, evaluation
    assert "c1: 2.000x (4.0000 ms -> 2.0000 ms)" in evaluation
    if api == "anthropic":
        assert requests[0].path == "/v1/messages" and requests[0].body["system"].startswith("You optimize")
        assert _header(requests[0], "x-api-key") == KEY and _header(requests[0], "anthropic-version") == "2023-06-01"
    else:
        assert requests[0].path == "/v1/chat/completions" and requests[0].body["messages"][0]["role"] == "system"
        assert _header(requests[0], "authorization") == f"Bearer {KEY}"

    assert agent.transcript == str(workspace / "agent_transcript.jsonl")
    lines = [json.loads(line) for line in Path(agent.transcript).read_text().splitlines()]
    kinds = [line["type"] for line in lines]
    assert kinds.count("request") == 4 == kinds.count("response") and kinds.count("tool") == 4
    assert kinds[0] == "start" and lines[-1]["type"] == "end" and lines[-1]["exit_reason"] == "finished"
    assert KEY not in Path(agent.transcript).read_text()
    sent = [line["body"] for line in lines if line["type"] == "request"]
    assert [body["messages_from"] for body in sent] == [0, *(len(r.body["messages"]) for r in requests[:-1])]
    assert [m for body in sent for m in body["messages"]] == requests[-1].body["messages"]
    assert sent[0]["tools"] == requests[0].body["tools"] and "tools" not in sent[1]
    assert (workspace / "llm_evaluations" / "001" / "candidate" / "kernel.py").read_text().count(NEW) == 1
    assert sorted(p.name for p in (workspace / "work").iterdir()) == [
        ".aka_baseline",
        "config.yaml",
        "harness.py",
        "kernel.py",
        "send.py",
    ]


def test_file_tools_stay_in_the_workspace(
    model_server: ServerFactory, make_toy_task, write_run_config, tmp_path: Path
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("secret")
    (outside / "kernel.py").write_text(TOY_KERNEL)

    def plant_symlinks(request: RecordedRequest) -> Reply:
        work = _work(tmp_path)
        (work / "escape").symlink_to(outside)
        (work / "kernel.py").unlink()
        (work / "kernel.py").symlink_to(outside / "kernel.py")
        return Reply.tool("write_file", path="kernel.py", content="VALUE = 0\n")

    def restore_kernel(request: RecordedRequest) -> Reply:
        work = _work(tmp_path)
        (work / "kernel.py").unlink()
        (work / "kernel.py").write_text(TOY_KERNEL)
        return Reply.tool("read_file", path="escape/secret.txt")

    server = model_server(
        Reply.tool("write_file", path="harness.py", content="raise SystemExit(0)\n"),
        Reply.tool("write_file", path="../x", content="x"),
        lambda r: Reply.tool("write_file", path=str(_work(tmp_path) / "kernel.py"), content="VALUE = 0\n"),
        plant_symlinks,
        restore_kernel,
        Reply.tool("edit_file", path="kernel.py", old_string="NOT THERE", new_string="x"),
        Reply.tool("write_file", raw='{"path": "kernel.py", '),
        Reply.tool("bash", command="cat /etc/passwd"),
        Reply.tool("finish", summary="tried to escape"),
    )
    result, agent, workspace = _run(make_toy_task, write_run_config, _agent(server.base_url))

    errors = _tool_results(server.agent_requests[-1])
    assert len(errors) == 8 and all(e.startswith("error: ") for e in errors), errors
    assert "not an editable file" in errors[0] and "kernel.py" in errors[0]
    assert "'..' is refused" in errors[1]
    assert "absolute paths are refused" in errors[2]
    assert "outside the workspace" in errors[3] and "outside the workspace" in errors[4]
    assert "occurs 0 times" in errors[5]
    assert "not a JSON object" in errors[6] and "unknown tool 'bash'" in errors[7]
    assert (outside / "kernel.py").read_text() == TOY_KERNEL
    assert not (workspace / "x").exists()
    assert "raise SystemExit" not in (workspace / "work" / "harness.py").read_text()
    assert (workspace / "work" / "kernel.py").read_text() == TOY_KERNEL
    assert (agent.ok, agent.exit_reason) == (True, "finished")
    assert (result.status, result.failure_kind, result.tampered_files) == (TaskStatus.PASS, FailureKind.NONE, [])
    assert result.speedup_ratio == pytest.approx(1.0)


def test_max_iterations_stops_the_loop(model_server: ServerFactory, make_toy_task, write_run_config) -> None:
    """The same outcome as every CLI agent's under max_iterations 3 (tests/agents/test_agent_clis.py)."""
    server = model_server(
        Reply.tool("read_file", path="kernel.py"), Reply.tool("list_files"), *[Reply.tool("run_evaluation")] * 5
    )
    result, agent, workspace = _run(make_toy_task, write_run_config, _agent(server.base_url, max_iterations=3))
    assert len(server.agent_requests) == 3
    assert (agent.ok, agent.exit_reason, agent.limit, agent.turns) == (True, "max_iterations", "turns", 3)
    assert "max_iterations=3" in (agent.message or "")
    assert not (workspace / "llm_evaluations").exists(), "an evaluation no one will read was run"
    assert result.status is TaskStatus.PASS


def test_token_budget_stops_the_loop(model_server: ServerFactory, make_toy_task, write_run_config) -> None:
    server = model_server(*[Reply.tool("list_files")] * 5, input_tokens=1000, output_tokens=10)
    _, agent, _ = _run(make_toy_task, write_run_config, _agent(server.base_url, "anthropic", token_budget=2500))
    assert len(server.agent_requests) == 3
    assert (agent.ok, agent.exit_reason, agent.input_tokens, agent.output_tokens) == (True, "token_budget", 3000, 30)
    assert agent.limit == "tokens"
    assert "kernel.py" in _tool_results(server.agent_requests[-1])[-1]


def test_timeout_when_the_model_never_answers(model_server: ServerFactory, make_toy_task, write_run_config) -> None:
    """No model turn at all: the agent failed (the untouched task would otherwise pass)."""
    server = model_server(hang=True)
    result, agent, _ = _run(make_toy_task, write_run_config, _agent(server.base_url, timeout_seconds=3))
    assert (agent.ok, agent.exit_reason, agent.limit, agent.turns) == (False, "timeout", "time", 0)
    assert 2.5 < agent.wall_seconds < 8 and len(server.requests) == 1
    assert "the model never answered" in (agent.message or "")
    assert result.failure_kind is FailureKind.AGENT_TIMEOUT
    assert (result.status, result.score, result.pass_compilation) == (TaskStatus.FAIL, 0.0, False)
    assert "no candidate was evaluated" in (result.failure_message or "")


def test_an_agent_that_edited_before_its_timeout_is_judged_on_its_edit(
    model_server: ServerFactory, make_toy_task, write_run_config
) -> None:
    """A timeout after the model has worked is how the loop ends, not a failure: its edit is evaluated."""

    def never_in_time(request: RecordedRequest) -> Reply:
        time.sleep(30)
        return Reply.tool("finish", summary="late")

    server = model_server(Reply.tool("edit_file", path="kernel.py", old_string=OLD, new_string=NEW), never_in_time)
    result, agent, _ = _run(make_toy_task, write_run_config, _agent(server.base_url, timeout_seconds=4))
    assert (agent.ok, agent.exit_reason, agent.limit, agent.turns) == (True, "timeout", "time", 1)
    assert (result.status, result.failure_kind) == (TaskStatus.PASS, FailureKind.NONE)
    assert result.speedup_ratio == pytest.approx(2.0) and result.score > 0


class _TricklingServer:
    """Answers every POST with headers at once, then one byte of the body every 0.3 s: each read
    is quick, the whole answer never comes."""

    def __init__(self) -> None:
        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", "100000")
                self.end_headers()
                try:
                    for _ in range(100000):
                        self.wfile.write(b" ")
                        self.wfile.flush()
                        time.sleep(0.3)
                except OSError:
                    return

            def log_message(self, format: str, *args: Any) -> None:
                return

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        self.base_url = f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def test_a_server_that_trickles_its_answer_is_cut_off_at_the_deadline(
    make_toy_task, write_run_config, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(KEY_ENV, KEY)
    server = _TricklingServer()
    try:
        started = time.monotonic()
        result, agent, _ = _run(make_toy_task, write_run_config, _agent(server.base_url, timeout_seconds=3))
    finally:
        server.close()
    assert (agent.ok, agent.exit_reason, agent.turns) == (False, "timeout", 0), agent.message
    assert agent.wall_seconds < 8 and time.monotonic() - started < 60
    assert result.failure_kind is FailureKind.AGENT_TIMEOUT


def test_request_timeout_is_an_api_error(model_server: ServerFactory, make_toy_task, write_run_config) -> None:
    server = model_server(hang=True)
    result, agent, _ = _run(
        make_toy_task, write_run_config, _agent(server.base_url, timeout_seconds=60, request_timeout_seconds=1)
    )
    assert (agent.ok, agent.exit_reason) == (False, "api_error")
    assert "request_timeout_seconds=1" in (agent.message or "")
    assert result.failure_kind is FailureKind.AGENT_ERROR


class _BrokenServer:
    """Answers every POST with one fixed status and body."""

    def __init__(self, status: int, body: bytes) -> None:
        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                return

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        self.base_url = f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.mark.parametrize(
    ("api", "status", "body", "expected"),
    [
        ("chat_completions", 500, b'{"error": {"message": "overloaded"}}', "HTTP 500.*overloaded"),
        ("chat_completions", 200, b"this is not json{", "not JSON"),
        ("chat_completions", 200, b'{"id": "x", "choices": []}', "no choices"),
        ("anthropic", 200, b'{"type": "error", "error": {"type": "overloaded_error"}}', "overloaded_error"),
    ],
)
def test_broken_server_is_an_api_error(
    api: str, status: int, body: bytes, expected: str, make_toy_task, write_run_config, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(KEY_ENV, KEY)
    server = _BrokenServer(status, body)
    try:
        result, agent, workspace = _run(make_toy_task, write_run_config, _agent(server.base_url, api))
    finally:
        server.close()
    assert (agent.ok, agent.exit_reason, agent.turns) == (False, "api_error", 0)
    assert agent.message is not None
    assert re.search(expected, agent.message), agent.message
    assert result.failure_kind is FailureKind.AGENT_ERROR and not result.pass_correctness and result.score == 0
    assert "error" in [json.loads(line)["type"] for line in (workspace / "agent_transcript.jsonl").open()]


def test_protocols_keep_what_the_server_needs_back() -> None:
    settings = RequestSettings("m", 100, 0.2, "high", {"chat_template_kwargs": {"enable_thinking": False}})
    chat = ChatCompletions("http://h/v1/", settings, "sys", "task", TOOL_SPECS)
    body = chat.body()
    assert chat.url == "http://h/v1/chat/completions"
    assert (body["max_tokens"], body["temperature"], body["reasoning_effort"]) == (100, 0.2, "high")
    assert body["chat_template_kwargs"] == {"enable_thinking": False}
    calls = [{"id": "c1", "type": "function", "function": {"name": "read_file", "arguments": "{not json"}}]
    turn = chat.parse(
        {
            "choices": [
                {
                    "message": {"role": "assistant", "content": None, "reasoning_content": "hmm", "tool_calls": calls},
                    "finish_reason": "tool_calls",
                }
            ],
            "usage": {"prompt_tokens": 7, "completion_tokens": 3},
        }
    )
    assert (turn.input_tokens, turn.output_tokens, turn.stop_reason) == (7, 3, "tool_calls")
    assert turn.calls[0].arguments is None and turn.calls[0].raw_arguments == "{not json"
    assert chat.messages[-1]["reasoning_content"] == "hmm" and chat.messages[-1]["tool_calls"][0]["id"] == "c1"

    anthropic = AnthropicMessages("https://api.anthropic.com/v1", settings, "sys", "task", TOOL_SPECS)
    assert anthropic.url == "https://api.anthropic.com/v1/messages" and "reasoning_effort" not in anthropic.body()
    content = [
        {"type": "thinking", "thinking": "hmm", "signature": "sig"},
        {"type": "tool_use", "id": "t1", "name": "list_files", "input": {}},
    ]
    turn = anthropic.parse(
        {
            "type": "message",
            "content": content,
            "stop_reason": "tool_use",
            "usage": {"input_tokens": 5, "cache_read_input_tokens": 10, "output_tokens": 2},
        }
    )
    assert (turn.input_tokens, turn.output_tokens, turn.calls[0].arguments) == (15, 2, {})
    assert anthropic.messages[-1] == {"role": "assistant", "content": content}


def test_options_are_validated(write_run_config) -> None:
    base = {"template": "llm", "model": "m", "base_url": "http://127.0.0.1:9/v1"}
    load_run_config(write_run_config(agent=base))
    with pytest.raises(ConfigError, match="field 'agent.bogus': unknown field"):
        load_run_config(write_run_config(agent={**base, "bogus": 1}))
    with pytest.raises(ConfigError, match="field 'agent.base_url': required field is missing"):
        load_run_config(write_run_config(agent={"template": "llm", "model": "m"}))
    with pytest.raises(ConfigError, match="agent.base_url.*must start with http"):
        load_run_config(write_run_config(agent={**base, "base_url": "127.0.0.1:8000"}))
    with pytest.raises(ConfigError, match="agent.api"):
        load_run_config(write_run_config(agent={**base, "api": "responses"}))
    with pytest.raises(ConfigError, match="max_tokens is required"):
        load_run_config(write_run_config(agent={**base, "api": "anthropic", "max_tokens": None}))
    with pytest.raises(ConfigError, match="extra_body may not set messages"):
        load_run_config(write_run_config(agent={**base, "extra_body": {"messages": []}}))


def test_missing_model_or_key_is_not_configured(make_toy_task, write_run_config, monkeypatch) -> None:
    monkeypatch.delenv(KEY_ENV, raising=False)
    make_toy_task()
    base = {"template": "llm", "base_url": "http://127.0.0.1:9/v1"}
    for agent, message in [(base, "needs a model"), ({**base, "model": "m", "api_key_env": KEY_ENV}, KEY_ENV)]:
        outcome = run_experiment(write_run_config(agent=agent))
        result = outcome.results[0]
        assert result.agent is not None and (result.agent.ok, result.agent.exit_reason) == (False, "not_configured")
        assert message in (result.agent.message or "") and result.failure_kind is FailureKind.AGENT_ERROR
