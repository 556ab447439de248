"""`deepseek_harness`: DeepSeek's API through the `llm` agent's Chat Completions loop, with DeepSeek's defaults.

DeepSeek ships no headless coding CLI of its own (npm's `deepseek-harness` is a reserved name
with no program in it, 0.0.1), so this is the `llm` agent's tool loop (file tools and
`run_evaluation`, the same limits and transcript) with DeepSeek's settings filled in: the
endpoint `https://api.deepseek.com` (OpenAI-compatible, `/chat/completions`), the key in
`DEEPSEEK_API_KEY`, the model `deepseek-chat` (non-thinking) or `deepseek-reasoner` (thinking),
`thinking: enabled|disabled` sent as DeepSeek's `thinking` switch, `effort` as `reasoning_effort`,
and `max_tokens` by mode (DeepSeek counts the chain of thought in it). In a thinking turn that
calls tools, DeepSeek wants the assistant's `reasoning_content` back, which the loop keeps.
See docs/agents-llm.md.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Literal

from pydantic import Field

from aka.agents.llm import LlmOptions
from aka.agents.llm import launch_agent as launch_llm
from aka.agents.registry import AgentContext, register_agent
from aka.results.task_result import AgentOutcome

DEEPSEEK_BASE_URL = "https://api.deepseek.com"
DEEPSEEK_KEY_ENV = "DEEPSEEK_API_KEY"
THINKING_MODEL = "deepseek-reasoner"
MAX_TOKENS = 8192  # deepseek-chat's most output per response
THINKING_MAX_TOKENS = 32768  # DeepSeek's default in thinking mode, chain of thought included


class DeepSeekOptions(LlmOptions):
    """`agent:` options of `deepseek_harness`: the `llm` options with DeepSeek's defaults, plus `thinking`.

    `max_tokens` left out is 8192 without thinking and 32768 with it; `base_url` may point
    elsewhere (a proxy, or the scripted test server on 127.0.0.1)."""

    api: Literal["chat_completions"] = "chat_completions"
    base_url: str = DEEPSEEK_BASE_URL
    api_key_env: str | None = DEEPSEEK_KEY_ENV
    max_tokens: int | None = Field(default=None, gt=0)
    thinking: Literal["enabled", "disabled"] | None = None

    def for_model(self, model: str | None) -> LlmOptions:
        """The `llm` agent's options for one run of `model`."""
        thinking = self.thinking == "enabled" or (model == THINKING_MODEL and self.thinking != "disabled")
        extra_body = dict(self.extra_body)
        if self.thinking is not None:
            extra_body["thinking"] = {"type": self.thinking}
        fields = self.model_dump(exclude={"thinking", "max_tokens", "extra_body"})
        return LlmOptions.model_validate(
            {
                **fields,
                "extra_body": extra_body,
                "max_tokens": self.max_tokens or (THINKING_MAX_TOKENS if thinking else MAX_TOKENS),
            }
        )


@register_agent("deepseek_harness", options=DeepSeekOptions)
def launch_agent(eval_config: AgentContext, task_config_dir: Path, workspace: Path) -> AgentOutcome:
    options = eval_config.options
    assert isinstance(options, DeepSeekOptions)
    llm_options = options.for_model(eval_config.settings.model)
    return launch_llm(replace(eval_config, options=llm_options), task_config_dir, workspace)
