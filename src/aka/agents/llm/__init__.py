"""`llm`: a tool-calling loop for local or hosted models, without any vendor SDK.

It speaks OpenAI-compatible Chat Completions (vLLM, SGLang, Ollama, DeepSeek, OpenAI) or the
native Anthropic Messages API, offers file tools confined to the workspace and `run_evaluation`
(the platform's own compile / correctness / performance steps, as the final evaluation runs them),
and enforces `max_iterations`, a token budget and `timeout_seconds` itself. Every request and
response is kept in `agent_transcript.jsonl` next to the agent log. See docs/agents-llm.md.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, JsonValue, field_validator, model_validator

from aka.agents.llm.loop import AgentLoop, Limits
from aka.agents.llm.protocols import AnthropicMessages, ChatCompletions, Conversation, RequestSettings
from aka.agents.llm.tools import TOOL_SPECS, Toolbox, Workspace
from aka.agents.registry import AgentContext, register_agent
from aka.results.task_result import AgentOutcome

DEFAULT_TIMEOUT_SECONDS = 3600.0
RESERVED_BODY_KEYS = frozenset({"model", "messages", "tools", "system"})
SYSTEM_PROMPT = (
    "You optimize a GPU kernel for speed while keeping it correct. You work only through the tools: "
    "list_files, read_file, write_file and edit_file act on the task workspace (paths relative to its "
    "root; only the editable files can be written), run_evaluation runs the task's compile, correctness "
    "and performance steps on your current files and reports the speedup per test case, and finish ends "
    "the session. You cannot run shell commands. When you are done, call finish with a short summary; "
    "the editable files as you leave them are evaluated independently."
)


class LlmOptions(BaseModel):
    """`agent:` options of the `llm` agent; `model` comes from the common agent settings."""

    model_config = ConfigDict(extra="forbid")

    api: Literal["chat_completions", "anthropic"] = "chat_completions"
    base_url: str
    api_key_env: str | None = None
    max_tokens: int | None = Field(default=8192, gt=0)
    token_budget: int | None = Field(default=None, gt=0)
    temperature: float | None = Field(default=None, ge=0, le=2)
    request_timeout_seconds: float = Field(default=600.0, gt=0)
    extra_body: dict[str, JsonValue] = Field(default_factory=dict)

    @field_validator("base_url")
    @classmethod
    def _http(cls, value: str) -> str:
        if not value.startswith(("http://", "https://")):
            raise ValueError(
                f"base_url '{value}' must start with http:// or https:// "
                "(e.g. http://127.0.0.1:8000/v1 for chat_completions)"
            )
        return value

    @field_validator("extra_body")
    @classmethod
    def _not_reserved(cls, value: dict[str, JsonValue]) -> dict[str, JsonValue]:
        reserved = sorted(RESERVED_BODY_KEYS & set(value))
        if reserved:
            raise ValueError(f"extra_body may not set {', '.join(reserved)}: the agent sends those itself")
        return value

    @model_validator(mode="after")
    def _anthropic_needs_max_tokens(self) -> LlmOptions:
        if self.api == "anthropic" and self.max_tokens is None:
            raise ValueError("max_tokens is required by the Anthropic Messages API; give a number")
        return self


def _not_configured(name: str, message: str) -> AgentOutcome:
    return AgentOutcome.ended(name, "not_configured", None, message=message)


@register_agent("llm", options=LlmOptions)
def launch_agent(eval_config: AgentContext, task_config_dir: Path, workspace: Path) -> AgentOutcome:
    options, settings, name = eval_config.options, eval_config.settings, eval_config.agent_name
    assert isinstance(options, LlmOptions)
    if not settings.model:
        return _not_configured(
            name,
            "the llm agent needs a model: set `model:` in the run config's `agent:` "
            "section (the name the server knows, e.g. Qwen/Qwen3-32B or claude-sonnet-4-5)",
        )
    api_key = None
    if options.api_key_env is not None:
        api_key = os.environ.get(options.api_key_env)
        if not api_key:
            return _not_configured(name, f"agent option api_key_env names '{options.api_key_env}', which is not set")
    timeout = settings.timeout_seconds or DEFAULT_TIMEOUT_SECONDS
    deadline = time.monotonic() + timeout
    request = RequestSettings(
        settings.model, options.max_tokens, options.temperature, settings.effort, dict(options.extra_body)
    )
    protocol = AnthropicMessages if options.api == "anthropic" else ChatCompletions
    conversation: Conversation = protocol(options.base_url, request, SYSTEM_PROMPT, eval_config.prompt, TOOL_SPECS)
    toolbox = Toolbox(eval_config, Workspace(workspace, eval_config.editable_files), deadline)
    limits = Limits(settings.max_iterations, options.token_budget, deadline, options.request_timeout_seconds)
    eval_config.log_path.parent.mkdir(parents=True, exist_ok=True)
    return AgentLoop(name, conversation, api_key, toolbox, limits, eval_config.log_path).run()
