"""The real agent CLIs, end to end through `run_experiment`, against the scripted model server.

The pinned CLIs are installed from npm into `.agent-clis/` once per session (a failed install
fails these tests: CI installs them). Cursor cannot be pointed at another endpoint, so its
launcher runs a stand-in executable that replays a recorded stream-json transcript.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from conftest import processes_under
from network_services import RecordingService, machine_ipv4, probe_results, write_probe
from scripted_model_server import RecordedRequest, Reply, ScriptedModelServer
from typer.testing import CliRunner

from aka.agents.check import run_checks
from aka.agents.cli_runner import (
    AGENT_CLI_DIR_ENV,
    PROMPT_FILE_NAME,
    agent_cli_dir,
    cli_agents,
    npm_specs,
)
from aka.cli import app
from aka.device import detect_device
from aka.errors import ConfigError
from aka.results.task_result import FailureKind, TaskResult, TaskStatus
from aka.run.layout import AGENT_HOME_DIR
from aka.run.runner import run_experiment

pytestmark = pytest.mark.slow
PINS_FILE = "aka-pins.txt"
KEY = "sk-scripted-test-key"
OLD, NEW = "TIME_MS = 4.0", "TIME_MS = 2.0"
PATCH = f"*** Begin Patch\n*** Update File: kernel.py\n@@\n-{OLD}\n+{NEW}\n*** End Patch\n"
ServerFactory = Callable[..., ScriptedModelServer]


@pytest.fixture(scope="session")
def agent_clis() -> Path:
    """Install the pinned CLIs unless `.agent-clis/aka-pins.txt` already lists exactly these versions."""
    root, specs = agent_cli_dir(), npm_specs()
    stamp = root / PINS_FILE
    if not stamp.is_file() or stamp.read_text().strip() != " ".join(specs):
        npm = shutil.which("npm")
        if npm is None:
            pytest.fail("npm (Node.js 20+) is needed to install the agent CLIs under test")
        done = subprocess.run(
            [npm, "install", "--prefix", str(root), "--no-audit", "--no-fund", "--save-exact", *specs],
            capture_output=True,
            text=True,
            timeout=900,
            check=False,
        )
        if done.returncode != 0:
            pytest.fail(f"npm install {' '.join(specs)} failed:\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}")
        stamp.write_text(" ".join(specs) + "\n")
    return Path(root / "node_modules" / ".bin")


@pytest.fixture
def model_server() -> Iterator[ServerFactory]:
    servers: list[ScriptedModelServer] = []

    def start(*script: Reply | Callable[[RecordedRequest], Reply], **options: object) -> ScriptedModelServer:
        server = ScriptedModelServer(list(script), lifetime_seconds=240, **options)  # type: ignore[arg-type]
        servers.append(server.start())
        return server

    yield start
    for server in servers:
        server.stop()


def _kernel(root: Path) -> str:
    return str(next(root.glob("workspace_*/run_*/*/work/kernel.py")))


def _shell(agent: str, command: str) -> Reply:
    """`command` through the CLI's own shell tool (codex's waits up to 30 s for it, not 10, before
    handing it back to the model still running: importing torch took longer on a loaded machine)."""
    return {
        "claude_code": Reply.tool("Bash", command=command),
        "codex": Reply.tool("exec_command", cmd=command, yield_time_ms=30000),
        "gemini": Reply.tool("run_shell_command", command=command),
        "opencode": Reply.tool("bash", command=command, description="run"),
    }[agent]


# What the agent's shell must offer: the platform's interpreter with torch and aka.harness, and the
# evaluator's device variables (TRITON_INTERPRET=1 on a CPU machine).
IMPORT_PROBE = (
    'python3 -c "import os, sys, torch, aka.harness; env = os.environ.get; '
    "print('AKA-SHELL', env('TRITON_INTERPRET'), env('AKA_DEVICE'), sys.executable)\""
)
PROBE_OUTPUT = re.compile(r"AKA-SHELL (\S+) (\S+) ([^\s\\\"]+)")


def _device_variables() -> tuple[str, str]:
    """What the probe must print for TRITON_INTERPRET and AKA_DEVICE on this machine."""
    return ("None", "cuda") if detect_device().is_gpu else ("1", "cpu")


def _probe_answer(server: ScriptedModelServer) -> tuple[str, str, Path]:
    """What the probe printed (TRITON_INTERPRET, AKA_DEVICE, the interpreter), as the CLI sent it
    back to the model."""
    sent = [json.dumps(r.body) for r in server.agent_requests]
    found = next((m for body in sent if (m := PROBE_OUTPUT.search(body))), None)
    errors = [m[0] for body in sent for m in re.finditer(r"\w*Error\b[^\"]{0,300}", body)]
    assert found is not None, f"the probe's output never reached the model; errors sent: {errors[-3:]}"
    return found[1], found[2], Path(found[3])


def _script(agent: str, root: Path) -> list[Reply | Callable[[RecordedRequest], Reply]]:
    """Per CLI: run the import probe in its shell, read the kernel, edit it with that CLI's own
    edit tool, then answer in text."""
    done = Reply.final("Halved TIME_MS.")
    edit = {"old_string": OLD, "new_string": NEW}
    scripts: dict[str, list[Reply | Callable[[RecordedRequest], Reply]]] = {
        "claude_code": [
            lambda r: Reply.tool("Read", file_path=_kernel(root)),
            lambda r: Reply.tool("Edit", file_path=_kernel(root), **edit),
            done,
        ],
        "codex": [Reply.tool("exec_command", cmd="cat kernel.py"), Reply.tool("apply_patch", raw=PATCH), done],
        "gemini": [
            lambda r: Reply.tool("read_file", file_path=_kernel(root)),
            lambda r: Reply.tool("replace", file_path=_kernel(root), instruction="halve TIME_MS", **edit),
            done,
        ],
        "opencode": [
            lambda r: Reply.tool("read", filePath=_kernel(root)),
            lambda r: Reply.tool("edit", filePath=_kernel(root), oldString=OLD, newString=NEW),
            done,
        ],
    }
    return [_shell(agent, IMPORT_PROBE), *scripts[agent]]


def _activated(monkeypatch: pytest.MonkeyPatch, active: bool) -> None:
    """This process's environment as a user's shell would have it, with the platform's virtual
    environment activated or not (`aka` started as `.venv/bin/aka`, no other python with torch)."""
    venv_bin = Path(sys.executable).parent
    path = [d for d in os.environ["PATH"].split(os.pathsep) if d and Path(d).resolve() != venv_bin.resolve()]
    if active:
        monkeypatch.setenv("VIRTUAL_ENV", str(venv_bin.parent))
        path.insert(0, str(venv_bin))
    else:
        monkeypatch.delenv("VIRTUAL_ENV", raising=False)
    monkeypatch.setenv("PATH", os.pathsep.join(path))


def _agent_section(agent: str, server: ScriptedModelServer, **settings: object) -> dict[str, object]:
    base_url = server.base_url + ("/v1" if agent in ("codex", "opencode") else "")
    model = "gpt-5.5" if agent == "codex" else "scripted-model"
    return {"template": agent, "base_url": base_url, "api_key_env": "AKA_TEST_MODEL_KEY", "model": model, **settings}


def _run_one(make_toy_task, write_run_config, agent: dict[str, object]) -> tuple[TaskResult, Path]:
    make_toy_task()
    outcome = run_experiment(write_run_config(agent=agent))
    workspace = next(p for p in outcome.run_dir.iterdir() if p.name.startswith("triton2triton_toy_answer_"))
    return outcome.results[0], workspace


CLI_AGENTS = ["claude_code", "codex", "gemini", "opencode"]


@pytest.mark.parametrize("agent", CLI_AGENTS)
def test_cli_edits_the_kernel_and_the_platform_scores_it(
    agent: str,
    agent_clis: Path,
    model_server: ServerFactory,
    make_toy_task,
    write_run_config,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Also: the platform's environment reaches the CLI's shell with no virtual environment activated."""
    monkeypatch.setenv("AKA_TEST_MODEL_KEY", KEY)
    _activated(monkeypatch, False)
    server = model_server(*_script(agent, tmp_path))
    result, workspace = _run_one(
        make_toy_task, write_run_config, _agent_section(agent, server, max_iterations=7, timeout_seconds=240)
    )
    out = result.agent
    assert out is not None
    assert (out.ok, out.exit_reason, out.limit) == (True, "finished", None), (
        f"{out.message}\n{(workspace / 'agent.log').read_text()}"
    )
    assert (result.status, result.failure_kind) == (TaskStatus.PASS, FailureKind.NONE)
    assert result.speedup_ratio == pytest.approx(2.0) and out.files_changed == ["kernel.py"]
    assert NEW in (workspace / "work" / "kernel.py").read_text()
    assert (out.turns, out.tool_calls) == (4, 3), "three tool turns and the final answer"
    assert (out.input_tokens or 0) > 0 and (out.output_tokens or 0) > 0 and out.wall_seconds > 0
    assert (out.cost_usd is not None) == (agent in ("claude_code", "opencode")), "cost is reported by these two"
    transcript = Path(out.transcript or "")
    assert transcript == workspace / "agent_transcript.jsonl"
    assert [json.loads(line) for line in transcript.read_text().splitlines() if line.strip()]
    assert (workspace / "agent_home").is_dir() and not (workspace / "work" / PROMPT_FILE_NAME).exists()
    turns = server.agent_requests
    assert len(turns) == 4 and "toy_kernel" in json.dumps(turns[0].body), "the task prompt did not arrive"
    assert all(any(KEY in value for value in r.headers.values()) for r in turns), "api_key_env was not used"
    interpret, device, python = _probe_answer(server)
    assert (interpret, device, python.parent) == (*_device_variables(), Path(sys.executable).parent)
    if agent == "claude_code":
        assert "--max-turns 7" in (workspace / "agent.log").read_text(), "max_iterations was not passed to claude"
    if agent == "gemini":
        settings = json.loads((workspace / "agent_home/.gemini/settings.json").read_text())
        assert settings["model"]["maxSessionTurns"] == 7, "max_iterations was not passed to gemini"


def _marker_turn(agent: str, root: Path) -> Callable[[RecordedRequest], Reply]:
    """A turn past the limit: answered after a model's usual latency, touching a marker file."""

    def late(request: RecordedRequest) -> Reply:
        time.sleep(3)
        return _shell(agent, f"touch {root / 'turn_past_the_limit_ran'}")

    return late


@pytest.mark.parametrize("agent", CLI_AGENTS)
def test_max_iterations_stops_every_cli_at_that_many_turns(
    agent: str,
    agent_clis: Path,
    model_server: ServerFactory,
    make_toy_task,
    write_run_config,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A model that never stops calling tools, under max_iterations 3: claude and gemini stop
    themselves, codex and opencode are ended by the platform once the third turn's tool has run.
    Also: the platform's environment reaches the CLI's shell with the virtual environment activated
    (codex's login shell would reset PATH), and a tool started in a session of its own (out of the
    CLI's process group) is killed after the run."""
    _activated(monkeypatch, True)
    escaped = "setsid sleep 300 </dev/null >/dev/null 2>&1 & echo started"
    server = model_server(
        _shell(agent, IMPORT_PROBE),
        _shell(agent, escaped),
        _shell(agent, "echo third"),
        *[_marker_turn(agent, tmp_path)] * 20,
    )
    result, workspace = _run_one(
        make_toy_task, write_run_config, _agent_section(agent, server, api_key_env=None, max_iterations=3)
    )
    out = result.agent
    assert out is not None
    assert (out.ok, out.exit_reason, out.limit, out.turns) == (True, "max_iterations", "turns", 3), (
        f"{out}\n{(workspace / 'agent.log').read_text()[-3000:]}"
    )
    assert (result.failure_kind, result.status) == (FailureKind.NONE, TaskStatus.PASS), "a limit is no agent error"
    assert _probe_answer(server)[:2] == _device_variables()
    assert not (tmp_path / "turn_past_the_limit_ran").exists(), "a turn past the limit ran its tool"
    requests = len(server.agent_requests)
    # a CLI ended by the platform may already have sent its fourth request, never answered to it
    assert requests == 3 if agent in ("claude_code", "gemini") else requests in (3, 4), requests
    assert processes_under(tmp_path) == [], "a CLI or tool process outlived the run"


SLEEP = {
    "gemini": Reply.tool("run_shell_command", command="sleep 300"),
    "opencode": Reply.tool("bash", command="sleep 300", description="wait"),
}


@pytest.mark.parametrize("agent", ["gemini", "opencode"])
def test_timeout_kills_the_cli_and_its_tools(
    agent: str, agent_clis: Path, model_server: ServerFactory, make_toy_task, write_run_config, tmp_path: Path
) -> None:
    """Every turn runs `sleep 300` through the CLI's shell tool; gemini's and opencode's shells start
    their own session, so only the run-marker sweep catches them (claude's and codex's stay in the
    CLI's process group; the turn-limit test has every CLI start a tool in a session of its own)."""
    server = model_server(*[SLEEP[agent]] * 5)
    result, _ = _run_one(
        make_toy_task, write_run_config, _agent_section(agent, server, api_key_env=None, timeout_seconds=45)
    )
    out = result.agent
    assert out is not None and (out.ok, out.exit_reason, out.limit) == (True, "timeout", "time"), out.message
    assert result.failure_kind is FailureKind.NONE, "a limit hit after the model answered is no agent error"
    # 45 s: a node CLI took over 25 s to send its first request on a loaded two-core machine
    assert 44 <= out.wall_seconds < 90 and server.agent_requests, "the CLI never reached the server"
    assert processes_under(tmp_path) == [], "a CLI or tool process outlived the timeout"


@pytest.mark.parametrize("agent", CLI_AGENTS)
def test_every_cli_reaches_a_remote_model_through_the_gate_and_nothing_else(
    agent: str,
    agent_clis: Path,
    model_server: ServerFactory,
    make_toy_task,
    write_run_config,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The model endpoint on this machine's own address, as a remote one would be (no relay listens
    for it inside): the CLI reaches it only through the proxy its environment names (the gate opens
    it as a named endpoint); its shell reaches no service on the machine's loopback."""
    node_address = machine_ipv4()
    if node_address is None:
        pytest.skip("this machine has no address but loopback")
    monkeypatch.setenv("AKA_TEST_MODEL_KEY", KEY)
    cluster = RecordingService()
    probe = f'python3 {write_probe(tmp_path)} "$HOME/net_probe.json" {cluster.url}'
    try:
        server = model_server(_shell(agent, probe), Reply.final("Probed."), host=node_address)
        result, workspace = _run_one(
            make_toy_task, write_run_config, _agent_section(agent, server, timeout_seconds=240)
        )
    finally:
        cluster.stop()
    out = result.agent
    assert out is not None and (out.ok, out.exit_reason) == (True, "finished"), (
        f"{out and out.message}\n{(workspace / 'agent.log').read_text()[-3000:]}"
    )
    assert len(server.agent_requests) == 2, "the CLI reached its model only through the gate"
    seen = probe_results(workspace / AGENT_HOME_DIR / "net_probe.json")
    assert cluster.paths == [] and len(seen) == 2 and all(v.startswith("closed") for v in seen.values()), seen


@pytest.mark.parametrize("agent", ["claude_code", "codex"])
def test_timeout_when_the_model_never_answers(
    agent: str, agent_clis: Path, model_server: ServerFactory, make_toy_task, write_run_config, tmp_path: Path
) -> None:
    server = model_server(hang=True)
    result, _ = _run_one(
        make_toy_task, write_run_config, _agent_section(agent, server, api_key_env=None, timeout_seconds=20)
    )
    out = result.agent
    assert out is not None and (out.ok, out.exit_reason, out.limit, out.turns) == (False, "timeout", "time", 0)
    assert result.failure_kind is FailureKind.AGENT_TIMEOUT and result.status is TaskStatus.FAIL, (
        "an agent that never ran hands over no candidate"
    )
    # 20 s: the CLI's first request took over 5 s on a loaded two-core machine
    assert out.message == "killed after 20 s (timeout_seconds)" and server.requests
    assert processes_under(tmp_path) == [], "a CLI process outlived the timeout"


STAND_IN = textwrap.dedent("""\
    #!{python}
    # A stand-in for cursor-agent: records how it was called and what a command in its shell gets,
    # edits the kernel, replays a transcript (a tool call "runs" when its start is printed: a file).
    # Its record goes to its home: behind the guard nothing else outside its workspace is writable.
    import json, os, pathlib, subprocess, sys, time
    record = pathlib.Path(os.environ["HOME"]) / "stand_in_record.json"
    prompt = pathlib.Path("AKA_PROMPT.md").read_text()
    probe = subprocess.run(["/bin/bash", "-c", os.environ["STAND_IN_PROBE"]], capture_output=True, text=True)
    record.write_text(json.dumps(
        {{"argv": sys.argv[1:], "home": os.environ["HOME"], "key": os.environ.get("CURSOR_API_KEY"),
          "prompt": prompt, "stdin": sys.stdin.read(), "probe": probe.stdout + probe.stderr}}))
    kernel = pathlib.Path("kernel.py")
    kernel.write_text(kernel.read_text().replace("{old}", "{new}"))
    for line in pathlib.Path(os.environ["STAND_IN_TRANSCRIPT"]).read_text().splitlines():
        event = json.loads(line)
        if event["type"] == "tool_call" and event["subtype"] == "started":
            (record.parent / ("ran-" + event["call_id"])).touch()
        print(line, flush=True)
        time.sleep(float(os.environ["STAND_IN_PAUSE"]))
""")
SESSION = "00000000-0000-4000-8000-000000000001"
CURSOR_TRANSCRIPT = [  # shapes as printed by cursor-agent 2026.08.11-e8db854 (see docs/agents.md)
    {
        "type": "system",
        "subtype": "init",
        "apiKeySource": "env",
        "cwd": "/w",
        "session_id": SESSION,
        "model": "Auto",
        "permissionMode": "default",
    },
    {
        "type": "user",
        "message": {"role": "user", "content": [{"type": "text", "text": "Read AKA_PROMPT.md"}]},
        "session_id": SESSION,
    },
    {
        "type": "tool_call",
        "subtype": "started",
        "call_id": "call-read-0",
        "tool_call": {"readToolCall": {"args": {"path": "AKA_PROMPT.md"}}},
        "session_id": SESSION,
    },
    {
        "type": "tool_call",
        "subtype": "completed",
        "call_id": "call-read-0",
        "tool_call": {"readToolCall": {"args": {"path": "AKA_PROMPT.md"}, "result": {"success": {}}}},
        "session_id": SESSION,
    },
    {
        "type": "tool_call",
        "subtype": "started",
        "call_id": "call-edit-1",
        "tool_call": {"editToolCall": {"args": {"path": "kernel.py"}}},
        "session_id": SESSION,
    },
    {
        "type": "tool_call",
        "subtype": "completed",
        "call_id": "call-edit-1",
        "tool_call": {"editToolCall": {"args": {"path": "kernel.py"}, "result": {"success": {"linesAdded": 1}}}},
        "session_id": SESSION,
    },
    {
        "type": "assistant",
        "message": {"role": "assistant", "content": [{"type": "text", "text": "Halved it."}]},
        "session_id": SESSION,
    },
    {
        "type": "result",
        "subtype": "success",
        "duration_ms": 4889,
        "is_error": False,
        "result": "Halved it.",
        "session_id": SESSION,
        "request_id": "00000001",
        "usage": {"inputTokens": 14948, "outputTokens": 103},
    },
]


@pytest.fixture
def cursor_stand_in(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Callable[..., None]:
    """Put the stand-in `cursor-agent` first on PATH; returns a function that sets what it replays
    (events, the pause after each, the command it runs as its shell would). Its record is
    `stand_in_record(workspace)`."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    stand_in = bin_dir / "cursor-agent"
    stand_in.write_text(STAND_IN.format(python=sys.executable, old=OLD, new=NEW))
    stand_in.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")

    def prepare(events: list[dict[str, object]], pause: float = 0.0, probe: str = "true") -> None:
        replay = tmp_path / "cursor.jsonl"
        replay.write_text("".join(json.dumps(event) + "\n" for event in events))
        for name, value in {
            AGENT_CLI_DIR_ENV: str(tmp_path / "none"),
            "STAND_IN_TRANSCRIPT": str(replay),
            "STAND_IN_PAUSE": str(pause),
            "STAND_IN_PROBE": probe,
            "MY_CURSOR_KEY": KEY,
        }.items():
            monkeypatch.setenv(name, value)

    return prepare


def stand_in_record(workspace: Path) -> Path:
    return workspace / AGENT_HOME_DIR / "stand_in_record.json"


def test_cursor_launcher_with_a_stand_in(
    cursor_stand_in: Callable[..., None], make_toy_task, write_run_config, monkeypatch: pytest.MonkeyPatch
) -> None:
    _activated(monkeypatch, False)
    cursor_stand_in(CURSOR_TRANSCRIPT, probe=IMPORT_PROBE)
    result, workspace = _run_one(
        make_toy_task, write_run_config, {"template": "cursor", "model": "auto", "api_key_env": "MY_CURSOR_KEY"}
    )
    out = result.agent
    assert out is not None and (out.ok, out.exit_reason) == (True, "finished"), out.message
    assert result.status is TaskStatus.PASS and result.speedup_ratio == pytest.approx(2.0)
    assert (out.turns, out.tool_calls, out.input_tokens, out.output_tokens) == (3, 2, 14948, 103)
    called = json.loads(stand_in_record(workspace).read_text())
    assert called["argv"][:6] == ["-p", "--output-format", "stream-json", "--force", "--trust", "--model"]
    assert PROMPT_FILE_NAME in called["argv"][-1] and "toy_kernel" in called["prompt"] and called["stdin"] == ""
    assert called["key"] == KEY and called["home"] == str(workspace / "agent_home")
    probe = PROBE_OUTPUT.search(called["probe"])
    assert probe is not None and probe.groups()[:2] == _device_variables(), called["probe"]
    assert Path(probe[3]).parent == Path(sys.executable).parent
    assert not (workspace / "work" / PROMPT_FILE_NAME).exists(), "the prompt file must not be evaluated"
    assert Path(out.transcript or "").read_text().count("\n") == len(CURSOR_TRANSCRIPT)


def _cursor_tool_turn(index: int) -> list[dict[str, object]]:
    call = {
        "type": "tool_call",
        "call_id": f"call-{index}",
        "session_id": SESSION,
        "tool_call": {"shellToolCall": {"args": {"command": "true"}}},
    }
    return [
        {
            "type": "assistant",
            "message": {"role": "assistant", "content": [{"type": "text", "text": "Next."}]},
            "session_id": SESSION,
        },
        {**call, "subtype": "started"},
        {**call, "subtype": "completed"},
    ]


def test_cursor_is_ended_by_the_platform_at_max_iterations(
    cursor_stand_in: Callable[..., None], make_toy_task, write_run_config, tmp_path: Path
) -> None:
    """cursor-agent has no turn limit: the platform counts its turns and ends it after the third
    turn's tool call returned, before the fourth starts."""
    cursor_stand_in([event for index in range(10) for event in _cursor_tool_turn(index)], pause=0.3)
    result, workspace = _run_one(
        make_toy_task, write_run_config, {"template": "cursor", "max_iterations": 3, "timeout_seconds": 60}
    )
    out = result.agent
    assert out is not None
    assert (out.ok, out.exit_reason, out.limit, out.turns, out.tool_calls) == (True, "max_iterations", "turns", 3, 3)
    assert out.message == "stopped by the platform after 3 model turns (max_iterations=3)" and out.wall_seconds < 30
    ran = stand_in_record(workspace).parent.glob("ran-*")
    assert sorted(p.name for p in ran) == ["ran-call-0", "ran-call-1", "ran-call-2"]
    assert result.status is TaskStatus.PASS and result.failure_kind is FailureKind.NONE
    assert processes_under(tmp_path) == []


def test_missing_cli_is_not_installed(
    make_toy_task, write_run_config, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    binaries = [spec.package.binary for spec in cli_agents().values()]
    path = [d for d in os.environ["PATH"].split(os.pathsep) if not any((Path(d) / b).exists() for b in binaries)]
    monkeypatch.setenv("PATH", os.pathsep.join(path))
    monkeypatch.setenv(AGENT_CLI_DIR_ENV, str(tmp_path / "empty"))
    result, _ = _run_one(make_toy_task, write_run_config, {"template": "claude_code"})
    assert result.agent is not None and (result.agent.ok, result.agent.exit_reason) == (False, "not_installed")
    assert "npm install --prefix .agent-clis @anthropic-ai/claude-code@" in (result.agent.message or "")
    checks = {c.name: c for c in run_checks("claude_code,codex,gemini,opencode,cursor,noop", False, None)}
    assert checks["noop"].ready and not any(checks[name].ready for name in [*CLI_AGENTS, "cursor"])
    assert all(checks[name].binary.startswith("not installed") for name in [*CLI_AGENTS, "cursor"])
    assert checks["codex"].needs == f"the CLI: {cli_agents()['codex'].package.install}"
    assert CliRunner().invoke(app, ["check-agents", "--agents", "claude_code"]).exit_code == 1


def test_check_agents_with_the_clis(
    agent_clis: Path, model_server: ServerFactory, write_run_config, monkeypatch: pytest.MonkeyPatch
) -> None:
    server = model_server(side_text="READY", final_text="READY")
    for name in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "CODEX_API_KEY", "GEMINI_API_KEY", "OPENAI_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    offline = {c.name: c for c in run_checks("all", False, None)}
    pinned = {name: spec.package.version for name, spec in cli_agents().items()}
    for name in CLI_AGENTS:
        assert offline[name].version == pinned[name] and Path(offline[name].binary).is_file()
        assert not offline[name].ready and offline[name].credentials == "none found"
    assert (
        offline["codex"].needs == "a key ($CODEX_API_KEY, $OPENAI_API_KEY) or an endpoint (agent option "
        "`base_url` or $OPENAI_BASE_URL)"
    )
    assert offline["noop"].ready and not offline["replay"].ready and not offline["llm"].ready

    monkeypatch.setenv("ANTHROPIC_BASE_URL", server.base_url)
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    monkeypatch.setenv("GEMINI_API_KEY", KEY)
    monkeypatch.setenv("GOOGLE_GEMINI_BASE_URL", server.base_url)
    live = {c.name: c for c in run_checks("claude_code,gemini,noop", True, None)}
    assert all(c.ready for c in live.values()), live
    assert live["claude_code"].live.startswith("ok") and "ANTHROPIC_BASE_URL" in live["claude_code"].credentials
    config = write_run_config(
        agent={"template": "opencode", "base_url": server.base_url + "/v1", "model": "scripted-model"}
    )
    (from_config,) = run_checks("all", True, config)
    assert from_config.name == "opencode" and from_config.ready and from_config.live.startswith("ok"), from_config
    assert CliRunner().invoke(app, ["check-agents", "--agents", "noop,autotune"]).exit_code == 0


def test_cli_agent_options_are_validated(make_toy_task, write_run_config) -> None:
    make_toy_task()
    with pytest.raises(ConfigError, match="agent.base_url.*unknown field"):
        run_experiment(write_run_config(agent={"template": "cursor", "base_url": "http://127.0.0.1:9"}))
    with pytest.raises(ConfigError, match="agent.endpoint"):
        run_experiment(write_run_config(agent={"template": "claude_code", "endpoint": "x"}))


def _post(url: str, body: dict[str, object]) -> str:
    request = urllib.request.Request(url, json.dumps(body).encode(), {"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=10) as response:
        return str(response.read().decode())


def test_scripted_server_speaks_each_protocol(model_server: ServerFactory) -> None:
    """Non-streaming and streaming answers in all four formats, side requests, and the request log."""
    write = Reply.tool("write", path="k.py", content="x")
    server = model_server(write, write, write, write, write, Reply.final("done"))
    url, tools = server.base_url, [{"name": "write", "input_schema": {}}]
    message = json.loads(_post(f"{url}/v1/messages", {"model": "m", "tools": tools, "messages": []}))
    assert message["stop_reason"] == "tool_use" and message["content"][0]["input"] == {"path": "k.py", "content": "x"}
    sse = _post(f"{url}/v1/messages", {"model": "m", "stream": True, "tools": tools, "messages": []})
    assert "event: message_start" in sse and "input_json_delta" in sse
    assert sse.rstrip().endswith('{"type": "message_stop"}')
    chat_tools = [{"type": "function", "function": {"name": "write", "parameters": {}}}]
    chat = json.loads(_post(f"{url}/v1/chat/completions", {"model": "m", "tools": chat_tools, "messages": []}))
    assert chat["choices"][0]["finish_reason"] == "tool_calls"
    assert json.loads(chat["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"])["path"] == "k.py"
    chunks = _post(f"{url}/v1/chat/completions", {"model": "m", "stream": True, "tools": chat_tools, "messages": []})
    assert '"tool_calls": [{"index": 0' in chunks and chunks.rstrip().endswith("data: [DONE]")
    responses = _post(f"{url}/v1/responses", {"model": "m", "stream": True, "tools": tools, "input": []})
    assert "response.output_item.done" in responses and '"type": "function_call"' in responses
    gemini = _post(
        f"{url}/v1beta/models/g:streamGenerateContent?alt=sse",
        {"contents": [], "tools": [{"functionDeclarations": [{"name": "write"}]}]},
    )
    assert gemini.startswith("data: ") and "Done." not in gemini and "done" in gemini
    title = json.loads(_post(f"{url}/v1/chat/completions", {"model": "m", "messages": []}))
    assert title["choices"][0]["message"]["content"] == "OK"
    schema = {"type": "OBJECT", "properties": {"score": {"type": "INTEGER"}, "why": {"type": "STRING"}}}
    routed = json.loads(
        _post(f"{url}/v1beta/models/g:generateContent", {"generationConfig": {"responseJsonSchema": schema}})
    )
    assert json.loads(routed["candidates"][0]["content"]["parts"][0]["text"]) == {"score": 1, "why": "ok"}
    assert [r.protocol for r in server.agent_requests] == [
        "anthropic",
        "anthropic",
        "chat",
        "chat",
        "responses",
        "gemini",
    ]
    assert len(server.requests) == 8 and server.requests[-1].model == "g"


def test_a_hung_agent_whose_children_ignore_sigterm_is_gone_at_its_timeout(
    cursor_stand_in: Callable[..., None], make_toy_task, write_run_config, tmp_path: Path
) -> None:
    """The stand-in's shell starts children that ignore SIGTERM, one of them in a session of its
    own, and then waits on them forever: at the timeout every one of them is gone."""
    stubborn = "trap '' TERM; exec sleep 300"
    cursor_stand_in(CURSOR_TRANSCRIPT, probe=f'(bash -c "{stubborn}") & setsid bash -c "{stubborn}" & wait')
    result, _ = _run_one(make_toy_task, write_run_config, {"template": "cursor", "timeout_seconds": 8})
    out = result.agent
    assert out is not None and (out.exit_reason, out.limit, out.turns) == ("timeout", "time", 0), out.message
    assert out.wall_seconds < 40
    assert result.failure_kind is FailureKind.AGENT_TIMEOUT, "an agent that never answered hands over nothing"
    assert processes_under(tmp_path) == [], "a child that ignored SIGTERM outlived the agent's timeout"
