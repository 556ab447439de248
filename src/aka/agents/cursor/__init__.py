"""`cursor`: Cursor Agent CLI, `cursor-agent -p --output-format stream-json --force --trust`.

`cursor-agent` takes the prompt only as an argument, so the prompt is written to `AKA_PROMPT.md`
in the workspace for the run (and removed afterwards) and the argument tells the agent to read it.
Cursor talks only to Cursor's service: there is no endpoint override (no `base_url` option) and no
turn limit of its own, so the platform counts turns in its stream (a run of assistant text and
tool calls started; their completions end it) and ends it at `max_iterations`. The key is
`CURSOR_API_KEY`; a `cursor-agent login` does not carry over, because every run gets a fresh
home. It is installed by Cursor's own script, not npm, and could not be run here: its flags and
stream format follow Cursor's published documentation and captures of the pinned version.
"""

from __future__ import annotations

from aka.agents.cli_runner import (
    PROMPT_FILE_NAME,
    CliAgentSpec,
    CliCommand,
    CliOptions,
    CliPackage,
    CliRequest,
    RunSummary,
    cli_agent,
    clip,
    number,
)
from aka.agents.cli_turns import JsonEvent, Mark
from aka.agents.registry import AgentSettings

VERSION = "2026.08.11-e8db854"
KEY_VARS = ("CURSOR_API_KEY",)
INSTRUCTION = (
    f"Read the file {PROMPT_FILE_NAME} in the current directory and carry out the task it "
    f"describes. Do not edit or delete {PROMPT_FILE_NAME}."
)


def _command(request: CliRequest) -> CliCommand:
    argv = [str(request.binary), "-p", "--output-format", "stream-json", "--force", "--trust"]
    if request.settings.model:
        argv += ["--model", request.settings.model]
    env = dict(request.env)
    key = request.api_key()
    if key:
        env["CURSOR_API_KEY"] = key
    return CliCommand([*argv, INSTRUCTION], env, prompt_file=True)


def _marks(event: JsonEvent) -> list[Mark]:
    if event.get("type") == "assistant":
        return [Mark("model")]
    if event.get("type") == "tool_call" and event.get("subtype") in ("started", "completed"):
        return [Mark("call" if event["subtype"] == "started" else "result", str(event.get("call_id")))]
    return []


def _summarize(events: list[JsonEvent], settings: AgentSettings) -> RunSummary:
    tool_calls = sum(1 for e in events if e.get("type") == "tool_call" and e.get("subtype") == "completed")
    result = next((e for e in reversed(events) if e.get("type") == "result"), None)
    if result is None:
        return RunSummary("error", "no result event in the stream", tool_calls=tool_calls)
    ok = result.get("subtype") == "success" and result.get("is_error") is False
    text = result.get("result") if isinstance(result.get("result"), str) else None
    usage = result.get("usage") or {}
    return RunSummary(
        "finished" if ok else "error",
        clip(text if ok else f"{result.get('subtype')}: {text or ''}"),
        tool_calls=tool_calls,
        input_tokens=number(usage.get("inputTokens")) + number(usage.get("cacheReadTokens")),
        output_tokens=number(usage.get("outputTokens")),
    )


SPEC = cli_agent(
    CliAgentSpec(
        name="cursor",
        package=CliPackage("cursor-agent", VERSION, "curl https://cursor.com/install -fsS | bash"),
        key_vars=KEY_VARS,
        endpoint_var=None,
        command=_command,
        summarize=_summarize,
        marks=_marks,
        options_model=CliOptions,
    ),
    __name__,
)
