"""`gemini`: Gemini CLI headless, `gemini -p ... --output-format stream-json --yolo`, prompt on stdin.

`-p` gets a one-line instruction that the CLI appends to the prompt read from stdin. The fresh
home gets `.gemini/settings.json` selecting API-key auth, switching off auto-update and usage
statistics, and setting `model.maxSessionTurns` from `max_iterations` (a hard limit: the run ends
with a `result` event of status `error`, exit status 53). The endpoint is `GOOGLE_GEMINI_BASE_URL`.
"""

from __future__ import annotations

import json
from typing import Any

from aka.agents.cli_runner import (
    LOCAL_ENDPOINT_KEY,
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

VERSION = "0.61.0"
KEY_VARS = ("GEMINI_API_KEY",)
HEADLESS_INSTRUCTION = "Carry out the task described above."


def _settings_file(request: CliRequest) -> dict[str, Any]:
    settings: dict[str, Any] = {
        "security": {"auth": {"selectedType": "gemini-api-key"}},
        "general": {"enableAutoUpdate": False, "enableAutoUpdateNotification": False},
        "privacy": {"usageStatisticsEnabled": False},
    }
    if request.settings.max_iterations:
        settings["model"] = {"maxSessionTurns": request.settings.max_iterations}
    return settings


def _command(request: CliRequest) -> CliCommand:
    config_dir = request.home / ".gemini"
    config_dir.mkdir(exist_ok=True)
    (config_dir / "settings.json").write_text(json.dumps(_settings_file(request), indent=2), encoding="utf-8")
    argv = [str(request.binary), "-p", HEADLESS_INSTRUCTION, "--output-format", "stream-json", "--yolo", "--skip-trust"]
    if request.settings.model:
        argv += ["-m", request.settings.model]
    env = dict(request.env)
    if request.base_url:
        env["GOOGLE_GEMINI_BASE_URL"] = request.base_url
    key = request.api_key()
    if key:
        env["GEMINI_API_KEY"] = key
    elif request.base_url and not any(env.get(name) for name in KEY_VARS):
        env["GEMINI_API_KEY"] = LOCAL_ENDPOINT_KEY
    return CliCommand(argv, env, stdin=request.prompt.encode())


def _marks(event: JsonEvent) -> list[Mark]:
    """A response is a run of assistant messages and tool_use events; tool_result ends it."""
    kind = event.get("type")
    if kind == "message" and event.get("role") == "assistant":
        return [Mark("model")]
    if kind == "tool_use":
        return [Mark("call", str(event.get("tool_id")))]
    if kind == "tool_result":
        return [Mark("result", str(event.get("tool_id")))]
    return []


def _summarize(events: list[JsonEvent], settings: AgentSettings) -> RunSummary:
    tool_calls = sum(1 for e in events if e.get("type") == "tool_use")
    result = next((e for e in reversed(events) if e.get("type") == "result"), None)
    if result is None:
        return RunSummary("error", "no result event in the stream", tool_calls=tool_calls)
    last_reply = ""
    for event in events:
        if event.get("type") == "tool_result":
            last_reply = ""
        elif event.get("type") == "message" and event.get("role") == "assistant":
            last_reply += str(event.get("content", ""))
    error = result.get("error") or {}
    error_text = f"{error.get('type', '')} {error.get('message', '')}".strip()
    if result.get("status") == "success":
        reason, message = "finished", last_reply
    elif "TurnLimited" in error_text or "max session turns" in error_text.lower():
        reason, message = "max_iterations", f"stopped by maxSessionTurns {settings.max_iterations}"
    else:
        reason, message = "error", error_text or f"status {result.get('status')}"
    stats = result.get("stats") or {}
    return RunSummary(
        reason,
        clip(message),
        tool_calls=tool_calls,
        input_tokens=number(stats.get("input_tokens")),
        output_tokens=number(stats.get("output_tokens")),
    )


SPEC = cli_agent(
    CliAgentSpec(
        name="gemini",
        package=CliPackage(
            "gemini",
            VERSION,
            f"npm install --prefix .agent-clis @google/gemini-cli@{VERSION}",
            f"@google/gemini-cli@{VERSION}",
        ),
        key_vars=KEY_VARS,
        endpoint_var="GOOGLE_GEMINI_BASE_URL",
        command=_command,
        summarize=_summarize,
        marks=_marks,
        own_turn_limit=True,
    ),
    __name__,
)
