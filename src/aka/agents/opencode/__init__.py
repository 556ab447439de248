"""`opencode`: opencode, `opencode run --format json --pure`, prompt on stdin.

Its configuration is written to the fresh home (`.config/opencode/opencode.json`): edits, shell
and web fetches allowed, no auto-update or sharing. opencode's own step limit (the build agent's
`steps`) only warns the model and still runs every tool call, so it is not used: the platform
counts steps (`step_start` ... `step_finish`, one model call each) and ends opencode once the
`max_iterations`-th step's tools have run. An endpoint (agent option `base_url`, an
OpenAI-compatible URL ending in `/v1`) becomes provider `aka` using `@ai-sdk/openai-compatible`,
and the model `aka/<model>`; without it `model` must be `provider/model` and the provider's own
key variable is used. `PWD` must be the workspace: opencode takes its project directory from it,
not from the cwd.
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
    dollars,
    number,
)
from aka.agents.cli_turns import JsonEvent, Mark
from aka.agents.registry import AgentSettings

VERSION = "1.18.33"
PROVIDER = "aka"
KEY_VARS = (
    "ANTHROPIC_API_KEY",
    "OPENAI_API_KEY",
    "GOOGLE_GENERATIVE_AI_API_KEY",
    "GEMINI_API_KEY",
    "OPENROUTER_API_KEY",
    "OPENCODE_API_KEY",
)


def _config(request: CliRequest) -> tuple[dict[str, Any], str | None]:
    """opencode.json content and the `-m` value."""
    config: dict[str, Any] = {
        "$schema": "https://opencode.ai/config.json",
        "autoupdate": False,
        "share": "disabled",
        "permission": {"edit": "allow", "bash": "allow", "webfetch": "allow"},
    }
    model = request.settings.model
    if request.base_url:
        name = model or "default"
        key = f"{{env:{request.api_key_env}}}" if request.api_key() else LOCAL_ENDPOINT_KEY
        config["provider"] = {
            PROVIDER: {
                "npm": "@ai-sdk/openai-compatible",
                "name": "aka endpoint",
                "options": {"baseURL": request.base_url, "apiKey": key},
                "models": {name: {"name": name}},
            }
        }
        model = f"{PROVIDER}/{name}"
    return config, model


def _command(request: CliRequest) -> CliCommand:
    config, model = _config(request)
    config_dir = request.home / ".config" / "opencode"
    config_dir.mkdir(parents=True, exist_ok=True)
    (config_dir / "opencode.json").write_text(json.dumps(config, indent=2), encoding="utf-8")
    argv = [str(request.binary), "run", "--format", "json", "--pure"]
    if model:
        argv += ["-m", model]
    if request.settings.effort:
        argv += ["--variant", request.settings.effort]
    env = {
        **request.env,
        "OPENCODE_DISABLE_AUTOUPDATE": "1",
        "OPENCODE_DISABLE_DEFAULT_PLUGINS": "1",
        "OPENCODE_DISABLE_LSP_DOWNLOAD": "1",
        "OPENCODE_DISABLE_CLAUDE_CODE": "1",
        "OPENCODE_DISABLE_SHARE": "1",
    }
    if request.base_url:
        env["OPENCODE_DISABLE_MODELS_FETCH"] = "1"
    return CliCommand(argv, env, stdin=request.prompt.encode())


def _error_text(event: JsonEvent) -> str:
    detail = event.get("error")
    if isinstance(detail, dict):
        data = detail.get("data")
        return str((data.get("message") if isinstance(data, dict) else None) or detail.get("name") or detail)
    return str(detail)


def _marks(event: JsonEvent) -> list[Mark]:
    """A step is one model call; one that finished for its tool calls has run them."""
    if event.get("type") == "step_start":
        return [Mark("model")]
    if event.get("type") == "step_finish" and (event.get("part") or {}).get("reason") == "tool-calls":
        return [Mark("settle")]
    return []


def _summarize(events: list[JsonEvent], settings: AgentSettings) -> RunSummary:
    steps = [e.get("part") or {} for e in events if e.get("type") == "step_finish"]
    texts = [str((e.get("part") or {}).get("text", "")) for e in events if e.get("type") == "text"]
    error = next((e for e in reversed(events) if e.get("type") == "error"), None)
    message: str | None
    if error is not None:
        reason, message = "error", _error_text(error)
    elif not steps:
        reason, message = "error", "no step_finish event in the stream"
    elif steps[-1].get("reason") == "tool-calls":
        reason, message = "error", "the stream ended in the middle of a step"
    else:
        reason, message = "finished", texts[-1] if texts else None
    tokens = [s.get("tokens") or {} for s in steps]
    costs = [cost for s in steps if (cost := dollars(s.get("cost"))) is not None]
    return RunSummary(
        reason,
        clip(message),
        tool_calls=sum(1 for e in events if e.get("type") == "tool_use"),
        input_tokens=sum(number(t.get("input")) + number((t.get("cache") or {}).get("read")) for t in tokens),
        output_tokens=sum(number(t.get("output")) + number(t.get("reasoning")) for t in tokens),
        cost_usd=sum(costs) if costs else None,
    )


SPEC = cli_agent(
    CliAgentSpec(
        name="opencode",
        package=CliPackage(
            "opencode", VERSION, f"npm install --prefix .agent-clis opencode-ai@{VERSION}", f"opencode-ai@{VERSION}"
        ),
        key_vars=KEY_VARS,
        endpoint_var=None,
        command=_command,
        summarize=_summarize,
        marks=_marks,
    ),
    __name__,
)
