"""The two wire protocols the `llm` agent speaks, non-streaming, over the standard library's HTTP client.

Each protocol keeps the conversation in its own native message format (so a server sees exactly
what its API documents) and turns a response into a neutral `ModelTurn`. Anything that is not a
well-formed response is an `ApiError`; a request that runs out of time raises `TimeoutError`.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import socket
import threading
import urllib.error
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from aka.evaluation.wire import valid_text

JsonObject = dict[str, Any]
ANTHROPIC_VERSION = "2023-06-01"
SNIPPET_CHARS = 500
MAX_TOKENS = 2**40
MAX_RESPONSE_BYTES = 64 * 2**20  # no model answer is near this; a server streaming junk is cut off
REASONING_FIELDS = ("reasoning_content", "reasoning")


class ApiError(Exception):
    """The server answered with an HTTP error, or with something that is not a valid response."""


@dataclass(frozen=True)
class ToolSpec:
    """A function tool offered to the model; `parameters` is its JSON schema."""

    name: str
    description: str
    parameters: JsonObject


@dataclass(frozen=True)
class ToolCall:
    """A call the model made. `arguments` is None when `raw_arguments` is not a JSON object."""

    id: str
    name: str
    arguments: JsonObject | None
    raw_arguments: str


@dataclass(frozen=True)
class ToolOutput:
    text: str
    is_error: bool = False


@dataclass(frozen=True)
class ModelTurn:
    text: str
    calls: tuple[ToolCall, ...]
    input_tokens: int
    output_tokens: int
    stop_reason: str | None


@dataclass(frozen=True)
class RequestSettings:
    """What every request carries besides the conversation."""

    model: str
    max_tokens: int | None
    temperature: float | None
    effort: str | None
    extra_body: JsonObject


class Conversation(Protocol):
    url: str

    def headers(self, api_key: str | None) -> dict[str, str]: ...

    def body(self) -> JsonObject: ...

    def parse(self, payload: JsonObject) -> ModelTurn:
        """Read a response and append the assistant's message to the conversation."""
        ...

    def add_tool_results(self, results: Sequence[tuple[ToolCall, ToolOutput]]) -> None: ...


def snippet(value: object) -> str:
    text = value if isinstance(value, str) else json.dumps(value)[: SNIPPET_CHARS * 2]
    return text if len(text) <= SNIPPET_CHARS else text[:SNIPPET_CHARS] + "..."


class _Deadline:
    """A whole request's time limit: urllib's `timeout` bounds each socket read, so a server that
    trickles a byte now and then would hold a request forever. At the deadline every socket the
    request opened is shut down, which ends whatever read is waiting on it."""

    def __init__(self, seconds: float) -> None:
        self.sockets: list[socket.socket] = []
        self.expired = False
        self._lock = threading.Lock()
        self._timer = threading.Timer(seconds, self._expire)
        self._timer.daemon = True
        self._timer.start()

    def watch(self, sock: socket.socket) -> None:
        with self._lock:
            self.sockets.append(sock)
            if self.expired:
                self._shut(sock)

    def _expire(self) -> None:
        with self._lock:
            self.expired = True
            for sock in self.sockets:
                self._shut(sock)

    @staticmethod
    def _shut(sock: socket.socket) -> None:
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)

    def cancel(self) -> None:
        self._timer.cancel()


def _watched(base: type[http.client.HTTPConnection], deadline: _Deadline) -> type[http.client.HTTPConnection]:
    class Watched(base):  # type: ignore[valid-type, misc]
        def connect(self) -> None:
            super().connect()
            deadline.watch(self.sock)

    return Watched


class _HTTPHandler(urllib.request.HTTPHandler):
    def __init__(self, deadline: _Deadline) -> None:
        super().__init__()
        self.deadline = deadline

    def http_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
        return self.do_open(_watched(http.client.HTTPConnection, self.deadline), req)


class _HTTPSHandler(urllib.request.HTTPSHandler):
    def __init__(self, deadline: _Deadline) -> None:
        super().__init__()
        self.deadline = deadline

    def https_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
        return self.do_open(_watched(http.client.HTTPSConnection, self.deadline), req, context=self._context)  # type: ignore[attr-defined]


def _read_capped(response: http.client.HTTPResponse, url: str) -> bytes:
    chunks, size = [], 0
    while chunk := response.read(1 << 16):
        size += len(chunk)
        if size > MAX_RESPONSE_BYTES:
            raise ApiError(f"the response from {url} is larger than {MAX_RESPONSE_BYTES // 2**20} MiB")
        chunks.append(chunk)
    return b"".join(chunks)


def post_json(url: str, headers: dict[str, str], body: JsonObject, timeout: float) -> JsonObject:
    """POST `body` as JSON and return the JSON object answered; `TimeoutError` when `timeout` passes,
    for the whole request (connecting, the headers and the body together)."""
    request = urllib.request.Request(
        url,
        data=json.dumps(body).encode("utf-8"),
        method="POST",
        headers={"Content-Type": "application/json", **headers},
    )
    deadline = _Deadline(timeout)
    opener = urllib.request.build_opener(_HTTPHandler(deadline), _HTTPSHandler(deadline))
    try:
        with opener.open(request, timeout=timeout) as response:
            raw = _read_capped(response, url)
    except Exception as exc:
        if deadline.expired:
            raise TimeoutError(f"no complete answer within {timeout:g} s") from exc
        error = _request_error(exc, url)
        if error is exc:
            raise
        raise error from exc
    finally:
        deadline.cancel()
    if deadline.expired:  # the body's reads ended because its socket was shut down
        raise TimeoutError(f"no complete answer within {timeout:g} s")
    return _parsed(raw, url)


def _request_error(exc: Exception, url: str) -> Exception:
    """What a failed request means to the loop: `TimeoutError`, or an `ApiError` that says why."""
    if isinstance(exc, urllib.error.HTTPError):
        detail = exc.read().decode("utf-8", errors="replace")
        return ApiError(f"HTTP {exc.code} from {url}: {snippet(detail) or exc.reason}")
    if isinstance(exc, urllib.error.URLError):
        if isinstance(exc.reason, TimeoutError):
            return TimeoutError(str(exc.reason))
        return ApiError(f"cannot reach {url}: {exc.reason}")
    if isinstance(exc, TimeoutError):
        return exc
    if isinstance(exc, http.client.HTTPException | OSError):
        return ApiError(f"connection to {url} failed: {type(exc).__name__}: {exc}")
    return exc


def _parsed(raw: bytes, url: str) -> JsonObject:
    """The answer as a JSON object, or an `ApiError` that quotes what came instead."""
    try:
        payload = valid_text(json.loads(raw))  # a lone surrogate is no text to write to a file
    except (json.JSONDecodeError, UnicodeDecodeError, RecursionError) as exc:
        raise ApiError(f"the response from {url} is not JSON: {snippet(raw.decode('utf-8', 'replace'))}") from exc
    if not isinstance(payload, dict):
        raise ApiError(f"the response from {url} is not a JSON object: {snippet(payload)}")
    if "error" in payload and not payload.get("choices") and not payload.get("content"):
        raise ApiError(f"the server reported an error: {snippet(payload['error'])}")
    return payload


def _tokens(usage: object, *keys: str) -> int:
    if not isinstance(usage, dict):
        return 0
    return sum(  # a count, not anything a server sends (1e30 tokens broke the Parquet export)
        v for k in keys if isinstance(v := usage.get(k), int) and not isinstance(v, bool) and 0 <= v <= MAX_TOKENS
    )


def _arguments(raw: object) -> tuple[JsonObject | None, str]:
    if isinstance(raw, dict):
        return raw, json.dumps(raw)
    text = raw if isinstance(raw, str) else ""
    try:
        parsed = json.loads(text or "{}")
    except json.JSONDecodeError:
        return None, text
    return (parsed if isinstance(parsed, dict) else None), text


class ChatCompletions:
    """OpenAI-compatible `POST {base_url}/chat/completions` (vLLM, SGLang, Ollama, DeepSeek, OpenAI).

    An assistant message goes back with its reasoning text (`reasoning_content`, `reasoning`) when the
    server sent one: DeepSeek's thinking mode refuses tool-call turns without it."""

    def __init__(
        self, base_url: str, settings: RequestSettings, system: str, prompt: str, tools: Sequence[ToolSpec]
    ) -> None:
        self.url = base_url.rstrip("/") + "/chat/completions"
        self.settings = settings
        self.messages: list[JsonObject] = [{"role": "system", "content": system}, {"role": "user", "content": prompt}]
        self.tools = [
            {"type": "function", "function": {"name": t.name, "description": t.description, "parameters": t.parameters}}
            for t in tools
        ]

    def headers(self, api_key: str | None) -> dict[str, str]:
        return {"Authorization": f"Bearer {api_key}"} if api_key else {}

    def body(self) -> JsonObject:
        s = self.settings
        body: JsonObject = {"model": s.model, "messages": self.messages}
        if self.tools:  # an empty list is refused by some servers
            body["tools"] = self.tools
        if s.max_tokens is not None:
            body["max_tokens"] = s.max_tokens
        if s.temperature is not None:
            body["temperature"] = s.temperature
        if s.effort is not None:
            body["reasoning_effort"] = s.effort
        return {**body, **s.extra_body}

    def parse(self, payload: JsonObject) -> ModelTurn:
        choices = payload.get("choices")
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
            raise ApiError(f"no choices in the response: {snippet(payload)}")
        message = choices[0].get("message")
        if not isinstance(message, dict):
            raise ApiError(f"the first choice has no message: {snippet(payload)}")
        content = message.get("content")
        if isinstance(content, list):
            content = "".join(p.get("text", "") for p in content if isinstance(p, dict))
        text = content if isinstance(content, str) else ""
        calls: list[ToolCall] = []
        for index, raw in enumerate(message.get("tool_calls") or []):
            function = raw.get("function") if isinstance(raw, dict) else None
            if not isinstance(function, dict) or not isinstance(function.get("name"), str):
                raise ApiError(f"malformed tool call in the response: {snippet(raw)}")
            arguments, raw_arguments = _arguments(function.get("arguments"))
            call_id = raw.get("id") if isinstance(raw.get("id"), str) else f"call_{len(self.messages)}_{index}"
            calls.append(ToolCall(call_id, function["name"], arguments, raw_arguments))
        assistant: JsonObject = {"role": "assistant", "content": text or None}
        assistant.update({k: message[k] for k in REASONING_FIELDS if isinstance(message.get(k), str)})
        if calls:
            assistant["tool_calls"] = [
                {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.raw_arguments}}
                for c in calls
            ]
        self.messages.append(assistant)
        usage = payload.get("usage")
        return ModelTurn(
            text,
            tuple(calls),
            _tokens(usage, "prompt_tokens"),
            _tokens(usage, "completion_tokens"),
            choices[0].get("finish_reason"),
        )

    def add_tool_results(self, results: Sequence[tuple[ToolCall, ToolOutput]]) -> None:
        self.messages += [{"role": "tool", "tool_call_id": call.id, "content": out.text} for call, out in results]


class AnthropicMessages:
    """The native Anthropic Messages API, `POST {base_url}/v1/messages`."""

    def __init__(
        self, base_url: str, settings: RequestSettings, system: str, prompt: str, tools: Sequence[ToolSpec]
    ) -> None:
        base = base_url.rstrip("/")
        self.url = base + ("/messages" if base.endswith("/v1") else "/v1/messages")
        self.settings = settings
        self.system = system
        self.messages: list[JsonObject] = [{"role": "user", "content": prompt}]
        self.tools = [{"name": t.name, "description": t.description, "input_schema": t.parameters} for t in tools]

    def headers(self, api_key: str | None) -> dict[str, str]:
        headers = {"anthropic-version": ANTHROPIC_VERSION}
        if api_key:
            headers["x-api-key"] = api_key
        return headers

    def body(self) -> JsonObject:
        s = self.settings
        body: JsonObject = {
            "model": s.model,
            "max_tokens": s.max_tokens,
            "system": self.system,
            "messages": self.messages,
        }
        if self.tools:
            body["tools"] = self.tools
        if s.temperature is not None:
            body["temperature"] = s.temperature
        return {**body, **s.extra_body}

    def parse(self, payload: JsonObject) -> ModelTurn:
        content = payload.get("content")
        if payload.get("type") == "error" or not isinstance(content, list):
            raise ApiError(f"not a Messages response: {snippet(payload)}")
        texts: list[str] = []
        calls: list[ToolCall] = []
        for block in content:
            if not isinstance(block, dict):
                raise ApiError(f"malformed content block: {snippet(block)}")
            if block.get("type") == "text" and isinstance(block.get("text"), str):
                texts.append(block["text"])
            elif block.get("type") == "tool_use":
                if not isinstance(block.get("id"), str) or not isinstance(block.get("name"), str):
                    raise ApiError(f"malformed tool_use block: {snippet(block)}")
                arguments, raw_arguments = _arguments(block.get("input"))
                calls.append(ToolCall(block["id"], block["name"], arguments, raw_arguments))
        if content:
            self.messages.append({"role": "assistant", "content": content})
        usage = payload.get("usage")
        return ModelTurn(
            "\n".join(texts),
            tuple(calls),
            _tokens(usage, "input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens"),
            _tokens(usage, "output_tokens"),
            payload.get("stop_reason"),
        )

    def add_tool_results(self, results: Sequence[tuple[ToolCall, ToolOutput]]) -> None:
        blocks = [
            {"type": "tool_result", "tool_use_id": call.id, "content": out.text, "is_error": out.is_error}
            for call, out in results
        ]
        self.messages.append({"role": "user", "content": blocks})
