"""`codex`: OpenAI Codex CLI, `codex exec --json`, prompt on stdin (`-`), `CODEX_HOME` per task.

Codex runs unsandboxed (`--dangerously-bypass-approvals-and-sandbox`, as the seed did): its
workspace-write sandbox confines writes to the workspace, while kernel work also writes elsewhere
(compiler caches in the home, GPU device files); the platform's isolation is the task workspace and
the independent evaluation. Its shell commands run without a login shell (`allow_login_shell=false`):
a login shell reads the system profile, which resets PATH and so loses the platform's interpreter.
Codex has no turn limit and its stream does not mark model round trips, so the platform counts
tool steps (each tool call, and a final message, is one turn) and ends Codex at `max_iterations`.
An endpoint (agent option `base_url`, or `OPENAI_BASE_URL`, which Codex itself ignores) becomes a
custom model provider speaking the Responses API; its `env_key` is `api_key_env`, else
CODEX_API_KEY or OPENAI_API_KEY if set.
"""

from __future__ import annotations

import json

from aka.agents.cli_runner import (
    CliAgentSpec,
    CliCommand,
    CliPackage,
    CliRequest,
    RunSummary,
    cli_agent,
    clip,
    number,
)
from aka.agents.cli_turns import JsonEvent, Mark
from aka.agents.registry import AgentSettings

VERSION = "0.171.0"
PROVIDER = "aka"
KEY_VARS = ("CODEX_API_KEY", "OPENAI_API_KEY")
TOOL_ITEMS = {"command_execution", "file_change", "mcp_tool_call", "web_search"}
MODEL_ITEMS = {"agent_message", "reasoning"}


def _command(request: CliRequest) -> CliCommand:
    settings = request.settings
    argv = [
        str(request.binary),
        "exec",
        "--json",
        "--skip-git-repo-check",
        "--dangerously-bypass-approvals-and-sandbox",
        "--color",
        "never",
        "-C",
        str(request.workspace),
        "-c",
        "allow_login_shell=false",
    ]
    if settings.model:
        argv += ["-m", settings.model]
    if settings.effort:
        argv += ["-c", f"model_reasoning_effort={json.dumps(settings.effort)}"]
    env = {**request.env, "CODEX_HOME": str(request.home / ".codex")}
    (request.home / ".codex").mkdir(exist_ok=True)
    base_url = request.base_url or request.env.get("OPENAI_BASE_URL")
    if base_url:
        argv += [
            "-c",
            f"model_provider={PROVIDER}",
            "-c",
            f'model_providers.{PROVIDER}.name="{PROVIDER}"',
            "-c",
            f"model_providers.{PROVIDER}.base_url={json.dumps(base_url)}",
        ]
        request.api_key()
        key_var = request.api_key_env or next((name for name in KEY_VARS if request.env.get(name)), None)
        if key_var:
            argv += ["-c", f"model_providers.{PROVIDER}.env_key={json.dumps(key_var)}"]
    elif request.api_key_env:
        env["CODEX_API_KEY"] = request.api_key() or ""
    argv.append("-")
    return CliCommand(argv, env, stdin=request.prompt.encode())


def _marks(event: JsonEvent) -> list[Mark]:
    """Each tool item is a step of its own (its start, or its completion when no start was printed),
    returning at its completion; messages and reasoning are model output. Codex's stream does not
    show model round trips, and parallel calls of one response look like a command that outlived
    its yield (Codex hands it back to the model running) followed by the next call."""
    item, kind = event.get("item"), event.get("type")
    if not isinstance(item, dict) or kind not in ("item.started", "item.completed"):
        return []
    if item.get("type") in TOOL_ITEMS:
        step = Mark("step", str(item.get("id")))
        return [step] if kind == "item.started" else [step, Mark("result", str(item.get("id")))]
    return [Mark("model")] if item.get("type") in MODEL_ITEMS else []


def _summarize(events: list[JsonEvent], settings: AgentSettings) -> RunSummary:
    items = [e["item"] for e in events if e.get("type") == "item.completed" and isinstance(e.get("item"), dict)]
    tool_calls = sum(1 for item in items if item.get("type") in TOOL_ITEMS)
    messages = [str(item.get("text", "")) for item in items if item.get("type") == "agent_message"]
    usages = [e.get("usage") or {} for e in events if e.get("type") == "turn.completed"]
    final = next((e for e in reversed(events) if e.get("type") in ("turn.completed", "turn.failed")), None)
    if final is not None and final["type"] == "turn.completed":
        reason, message = "finished", messages[-1] if messages else None
    elif final is not None:
        reason, message = "error", str((final.get("error") or {}).get("message", "turn.failed"))
    else:
        error = next((e for e in reversed(events) if e.get("type") == "error"), None)
        reason, message = "error", str(error.get("message")) if error else "no turn.completed event in the stream"
    return RunSummary(
        reason,
        clip(message),
        tool_calls=tool_calls,
        input_tokens=sum(number(u.get("input_tokens")) for u in usages),
        output_tokens=sum(number(u.get("output_tokens")) for u in usages),
    )


SPEC = cli_agent(
    CliAgentSpec(
        name="codex",
        package=CliPackage(
            "codex", VERSION, f"npm install --prefix .agent-clis @openai/codex@{VERSION}", f"@openai/codex@{VERSION}"
        ),
        key_vars=KEY_VARS,
        endpoint_var="OPENAI_BASE_URL",
        command=_command,
        summarize=_summarize,
        marks=_marks,
    ),
    __name__,
)
