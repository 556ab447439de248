"""Is an `llm`-protocol agent (`llm`, `deepseek_harness`) ready to run here, and a one-request live check.

It needs a model, an endpoint and, when `api_key_env` names a variable, that variable set; a
local server without authentication needs no key. The live check sends one request without
tools through the same protocol code a run uses.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping

from aka.agents.llm.protocols import (
    AnthropicMessages,
    ApiError,
    ChatCompletions,
    Conversation,
    RequestSettings,
    post_json,
)
from aka.agents.registry import AgentSettings

LIVE_SYSTEM = "This is a connectivity check of a coding agent's endpoint."
LIVE_MAX_TOKENS = 64


def llm_needs(
    settings: AgentSettings, base_url: str | None, api_key_env: str | None, env: Mapping[str, str]
) -> list[str]:
    """What is still missing, each as the fix: empty when the agent can run."""
    needs = []
    if not settings.model:
        needs.append("a model (`model:` in the run config's agent section)")
    if not base_url:
        needs.append("an endpoint (agent option `base_url`)")
    if api_key_env and not env.get(api_key_env):
        needs.append(f"its key in ${api_key_env} (not set)")
    return needs


def llm_uses(base_url: str | None, api_key_env: str | None, env: Mapping[str, str]) -> str:
    """The endpoint and key it would use (the key's variable, never its value)."""
    parts = [f"endpoint {base_url}" if base_url else "no endpoint"]
    if api_key_env:
        parts.append(f"key in {api_key_env} ({'set' if env.get(api_key_env) else 'NOT SET'})")
    else:
        parts.append("no key (a local server)")
    return "; ".join(parts)


def live_call(
    settings: AgentSettings,
    api: str,
    base_url: str,
    api_key_env: str | None,
    prompt: str,
    timeout: float,
    extra_body: Mapping[str, object] | None = None,
) -> str:
    """One request without tools: `ok (N s): <the reply>` or `FAILED (N s): <why>`."""
    assert settings.model is not None
    request = RequestSettings(settings.model, LIVE_MAX_TOKENS, None, settings.effort, dict(extra_body or {}))
    protocol = AnthropicMessages if api == "anthropic" else ChatCompletions
    conversation: Conversation = protocol(base_url, request, LIVE_SYSTEM, prompt, ())
    key = os.environ.get(api_key_env) if api_key_env else None
    started = time.monotonic()
    try:
        turn = conversation.parse(post_json(conversation.url, conversation.headers(key), conversation.body(), timeout))
    except (ApiError, TimeoutError) as exc:
        return f"FAILED ({time.monotonic() - started:.0f} s): {exc}"
    return f"ok ({time.monotonic() - started:.0f} s): {turn.text.strip()[:80]}"
