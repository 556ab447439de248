"""`claude_code`: Claude Code in print mode, `claude -p --output-format stream-json`, prompt on stdin.

Edits are accepted and the listed tools allowed without asking (`--permission-mode acceptEdits
--allowedTools ...`, which also works as root, unlike bypassPermissions). `max_iterations` is
passed as `--max-turns`, a hard limit: the run then ends with a `result` event of subtype
`error_max_turns`. Turns are counted as distinct assistant messages (model responses), not as
Claude's `num_turns`, which counts one more. The endpoint is `ANTHROPIC_BASE_URL` (agent option
`base_url`, no `/v1`).
"""

from __future__ import annotations

from aka.agents.cli_runner import (
    LOCAL_ENDPOINT_KEY,
    CliAgentSpec,
    CliCommand,
    CliPackage,
    CliRequest,
    RunSummary,
    cli_agent,
    clip,
    dollars,
    number,
)
from aka.agents.cli_turns import JsonEvent, Mark
from aka.agents.registry import AgentSettings

VERSION = "2.1.197"
ALLOWED_TOOLS = "Read,Edit,Write,Bash,Glob,Grep,NotebookEdit,TodoWrite"
KEY_VARS = ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "CLAUDE_CODE_OAUTH_TOKEN")


def _command(request: CliRequest) -> CliCommand:
    settings = request.settings
    argv = [
        str(request.binary),
        "-p",
        "--output-format",
        "stream-json",
        "--verbose",
        "--permission-mode",
        "acceptEdits",
        "--allowedTools",
        ALLOWED_TOOLS,
    ]
    if settings.max_iterations:
        argv += ["--max-turns", str(settings.max_iterations)]
    if settings.model:
        argv += ["--model", settings.model]
    if settings.effort:
        argv += ["--effort", settings.effort]
    env = {
        **request.env,
        "CLAUDE_CONFIG_DIR": str(request.home / ".claude"),
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "DISABLE_AUTOUPDATER": "1",
    }
    if request.base_url:
        env["ANTHROPIC_BASE_URL"] = request.base_url
    key = request.api_key()
    if key:
        env["ANTHROPIC_API_KEY"] = key
    elif request.base_url and not any(env.get(name) for name in KEY_VARS):
        env["ANTHROPIC_API_KEY"] = LOCAL_ENDPOINT_KEY
    return CliCommand(argv, env, stdin=request.prompt.encode())


def _blocks(event: JsonEvent) -> list[JsonEvent]:
    content = (event.get("message") or {}).get("content")
    return [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []


def _marks(event: JsonEvent) -> list[Mark]:
    """An assistant event is one content block of a response, keyed by the message's id; a user
    event carries the tool results."""
    if event.get("type") == "assistant":
        message_id = (event.get("message") or {}).get("id")
        return [
            Mark("model", str(message_id) if message_id else None),
            *[Mark("call", str(b.get("id"))) for b in _blocks(event) if b.get("type") == "tool_use"],
        ]
    if event.get("type") == "user":
        return [Mark("result", str(b.get("tool_use_id"))) for b in _blocks(event) if b.get("type") == "tool_result"]
    return []


def _summarize(events: list[JsonEvent], settings: AgentSettings) -> RunSummary:
    tool_calls = sum(
        1 for e in events if e.get("type") == "assistant" for b in _blocks(e) if b.get("type") == "tool_use"
    )
    result = next((e for e in reversed(events) if e.get("type") == "result"), None)
    if result is None:
        return RunSummary("error", "no result event in the stream", tool_calls=tool_calls)
    subtype = result.get("subtype")
    if subtype == "success" and not result.get("is_error"):
        reason, message = "finished", result.get("result")
    elif subtype == "error_max_turns":
        reason, message = "max_iterations", f"stopped by --max-turns {settings.max_iterations}"
    else:
        errors = result.get("errors") or [result.get("result") or ""]
        reason, message = "error", f"{subtype}: {'; '.join(str(e) for e in errors)}"
    usage = result.get("usage") or {}
    cost = result.get("total_cost_usd")
    return RunSummary(
        reason,
        clip(message if isinstance(message, str) else None),
        tool_calls=tool_calls,
        input_tokens=sum(
            number(usage.get(k)) for k in ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")
        ),
        output_tokens=number(usage.get("output_tokens")),
        cost_usd=dollars(cost),
    )


SPEC = cli_agent(
    CliAgentSpec(
        name="claude_code",
        package=CliPackage(
            "claude",
            VERSION,
            f"npm install --prefix .agent-clis @anthropic-ai/claude-code@{VERSION}",
            f"@anthropic-ai/claude-code@{VERSION}",
        ),
        key_vars=KEY_VARS,
        endpoint_var="ANTHROPIC_BASE_URL",
        command=_command,
        summarize=_summarize,
        marks=_marks,
        own_turn_limit=True,
    ),
    __name__,
)
