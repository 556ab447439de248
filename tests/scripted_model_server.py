"""A scripted model server on 127.0.0.1 that speaks the wire protocols real agent CLIs use.

Tests point a CLI (or an SDK loop) at `server.base_url` and give the server a short script: one
`Reply` per *agent turn*, i.e. per request that offers tools. Requests without tools (titles,
summaries, classifiers) get `side_text`. Every request is recorded for assertions.

Protocols (chosen by path, answered streaming or not as the request asks):

- Anthropic Messages: `POST /v1/messages` (SSE when `"stream": true`, else a Message JSON),
  `POST /v1/messages/count_tokens`, and `HEAD`/`GET` on any path (200).
- OpenAI Responses: `POST /v1/responses` (SSE: `response.created`, one `response.output_item.done`
  per item, `response.completed`).
- Gemini: `POST /v1beta/models/M:streamGenerateContent?alt=sse`, `:generateContent`, `:countTokens`.
- OpenAI Chat Completions: `POST /v1/chat/completions` (chunks + `[DONE]` when streaming, with
  `tool_calls` deltas; a `chat.completion` object otherwise).

A script step is a `Reply` or a function of the `RecordedRequest` that returns one (for arguments
only known at request time, such as an absolute path). When the script runs out, agent turns get a
final text answer, so a CLI always ends. `hang=True` accepts requests and never answers (for
timeout tests). The server stops itself after `lifetime_seconds`.

    with ScriptedModelServer([Reply.tool("Bash", command="ls"), Reply.final("done")]) as server:
        run_the_cli(env={"ANTHROPIC_BASE_URL": server.base_url})
        assert server.agent_requests[0].body["tools"]
"""

from __future__ import annotations

import itertools
import json
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit


@dataclass(frozen=True)
class ToolCall:
    """A tool call the model makes. `arguments` is a str for freeform tools (codex's apply_patch)."""

    name: str
    arguments: Mapping[str, Any] | str


@dataclass(frozen=True)
class Reply:
    """`reasoning` is sent as Chat Completions' `reasoning_content` (DeepSeek's thinking mode)."""

    text: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    reasoning: str = ""

    @classmethod
    def tool(cls, name: str, raw: str | None = None, **arguments: Any) -> Reply:
        return cls(tool_calls=(ToolCall(name, raw if raw is not None else arguments),))

    @classmethod
    def final(cls, text: str) -> Reply:
        return cls(text=text)


@dataclass
class RecordedRequest:
    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]
    body: Any
    protocol: str
    agent_turn: bool
    model: str | None = None
    tool_names: list[str] = field(default_factory=list)


Step = Reply | Callable[[RecordedRequest], Reply]


def _tool_names(protocol: str, body: Any) -> list[str]:
    if not isinstance(body, dict):
        return []
    tools = body.get("tools") or []
    if protocol == "gemini":
        return [d.get("name", "") for t in tools for d in t.get("functionDeclarations", [])]
    if protocol == "chat":
        return [t.get("function", {}).get("name", "") for t in tools]
    return [t.get("name", "") for t in tools]


class ScriptedModelServer:
    def __init__(
        self,
        script: Sequence[Step] = (),
        *,
        side_text: str = "OK",
        final_text: str = "Done.",
        hang: bool = False,
        lifetime_seconds: float = 300.0,
        input_tokens: int = 120,
        output_tokens: int = 12,
        host: str = "127.0.0.1",
    ) -> None:
        self.script = list(script)
        self.host = host
        self.side_text, self.final_text, self.hang = side_text, final_text, hang
        self.lifetime_seconds = lifetime_seconds
        self.input_tokens, self.output_tokens = input_tokens, output_tokens
        self._requests: list[RecordedRequest] = []
        self._lock = threading.Lock()
        self._next_step = 0
        self._ids = itertools.count(1)
        self._stopped = threading.Event()
        self._httpd: ThreadingHTTPServer | None = None

    @property
    def base_url(self) -> str:
        assert self._httpd is not None, "start the server first"
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self._httpd.server_address[1]}"

    @property
    def requests(self) -> list[RecordedRequest]:
        with self._lock:
            return list(self._requests)

    @property
    def agent_requests(self) -> list[RecordedRequest]:
        return [r for r in self.requests if r.agent_turn]

    def start(self) -> ScriptedModelServer:
        self._httpd = ThreadingHTTPServer((self.host, 0), _handler_class(self))
        self._httpd.daemon_threads = True
        threading.Thread(target=self._httpd.serve_forever, daemon=True).start()
        timer = threading.Timer(self.lifetime_seconds, self.stop)
        timer.daemon = True
        timer.start()
        return self

    def stop(self) -> None:
        self._stopped.set()
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()

    def __enter__(self) -> ScriptedModelServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def new_id(self, prefix: str) -> str:
        return f"{prefix}_{next(self._ids):04d}"

    def record(self, request: RecordedRequest) -> Reply:
        """Store the request and pick its reply: the next script step for agent turns."""
        with self._lock:
            self._requests.append(request)
            if not request.agent_turn:
                schema = _requested_schema(request.body)
                return Reply.final(json.dumps(_example(schema)) if schema else self.side_text)
            if self._next_step >= len(self.script):
                return Reply.final(self.final_text)
            step = self.script[self._next_step]
            self._next_step += 1
        return step(request) if callable(step) else step

    def wait_forever(self) -> None:
        self._stopped.wait()


def _handler_class(server: ScriptedModelServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            return

        def do_HEAD(self) -> None:
            self._send(200, b"", "text/plain")

        def do_GET(self) -> None:
            payload = {"object": "list", "data": [], "models": []}
            self._send(200, json.dumps(payload).encode(), "application/json")

        def do_POST(self) -> None:
            url = urlsplit(self.path)
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            try:
                body: Any = json.loads(raw) if raw else None
            except json.JSONDecodeError:
                body = raw.decode("utf-8", errors="replace")
            protocol, streaming, model = _classify(url.path, body)
            names = _tool_names(protocol, body)
            request = RecordedRequest(
                "POST",
                url.path,
                parse_qs(url.query),
                dict(self.headers.items()),
                body,
                protocol,
                bool(names) and protocol != "count",
                model,
                names,
            )
            reply = server.record(request)
            if server.hang:
                server.wait_forever()
                return
            if protocol == "other":
                self._send(404, b'{"error": "unknown path"}', "application/json")
                return
            status, content_type, chunks = render(server, protocol, streaming, model or "scripted", reply, request)
            if streaming:
                self._stream(status, content_type, chunks)
            else:
                self._send(status, b"".join(chunks), content_type)

        def _send(self, status: int, payload: bytes, content_type: str) -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(payload)

        def _stream(self, status: int, content_type: str, chunks: Iterator[bytes]) -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Cache-Control", "no-cache")
            self.send_header("Connection", "close")
            self.end_headers()
            for chunk in chunks:
                self.wfile.write(chunk)
                self.wfile.flush()
                time.sleep(0.001)
            self.close_connection = True

    return Handler


def _requested_schema(body: Any) -> dict[str, Any] | None:
    """The JSON schema a side request wants its answer in (Gemini's routing classifier, OpenAI json_schema)."""
    if not isinstance(body, dict):
        return None
    config = body.get("generationConfig") or {}
    response_format = body.get("response_format") or (body.get("text") or {}).get("format") or {}
    schema = (
        config.get("responseJsonSchema")
        or config.get("responseSchema")
        or (response_format.get("json_schema") or {}).get("schema")
        or response_format.get("schema")
    )
    return schema if isinstance(schema, dict) else None


def _example(schema: dict[str, Any]) -> Any:
    """A minimal value that satisfies `schema`: first enum values, 1 for numbers, empty lists."""
    kind = str(schema.get("type", "object")).lower()
    if schema.get("enum"):
        return schema["enum"][0]
    if kind == "object":
        return {name: _example(sub) for name, sub in (schema.get("properties") or {}).items()}
    return {"string": "ok", "integer": 1, "number": 1, "boolean": False, "array": []}.get(kind)


def _classify(path: str, body: Any) -> tuple[str, bool, str | None]:
    """(protocol, streaming, model) from the request path and body."""
    fields = body if isinstance(body, dict) else {}
    model = fields.get("model")
    if path.endswith("/count_tokens") or path.endswith(":countTokens"):
        return "count", False, model
    if path.endswith("/messages"):
        return "anthropic", bool(fields.get("stream")), model
    if path.endswith("/responses"):
        return "responses", bool(fields.get("stream", True)), model
    if path.endswith("/chat/completions"):
        return "chat", bool(fields.get("stream")), model
    if ":streamGenerateContent" in path or ":generateContent" in path:
        model = path.rsplit("/", 1)[-1].split(":", 1)[0]
        return "gemini", ":streamGenerateContent" in path, model
    return "other", False, model


# --- encoders: one Reply in each wire format -------------------------------------------------


def _sse(event: str | None, data: Any) -> bytes:
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {json.dumps(data) if not isinstance(data, str) else data}\n\n".encode()


def _arguments_json(call: ToolCall) -> str:
    return call.arguments if isinstance(call.arguments, str) else json.dumps(dict(call.arguments))


def render(
    server: ScriptedModelServer, protocol: str, streaming: bool, model: str, reply: Reply, request: RecordedRequest
) -> tuple[int, str, Iterator[bytes]]:
    """(status, content type, body chunks) for `reply` in `protocol`."""
    usage = (server.input_tokens, server.output_tokens)
    if protocol == "count":
        key = "totalTokens" if request.path.endswith(":countTokens") else "input_tokens"
        return 200, "application/json", iter([json.dumps({key: usage[0]}).encode()])
    encoder = {"anthropic": _anthropic, "responses": _responses, "gemini": _gemini, "chat": _chat}[protocol]
    chunks = encoder(server, streaming, model, reply, usage)
    return 200, "text/event-stream" if streaming else "application/json", chunks


def _anthropic(
    server: ScriptedModelServer, streaming: bool, model: str, reply: Reply, usage: tuple[int, int]
) -> Iterator[bytes]:
    blocks: list[dict[str, Any]] = [{"type": "text", "text": reply.text}] if reply.text else []
    blocks += [
        {"type": "tool_use", "id": server.new_id("toolu"), "name": c.name, "input": json.loads(_arguments_json(c))}
        for c in reply.tool_calls
    ]
    stop = "tool_use" if reply.tool_calls else "end_turn"
    message = {
        "id": server.new_id("msg"),
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": blocks,
        "stop_reason": stop,
        "stop_sequence": None,
        "usage": {"input_tokens": usage[0], "output_tokens": usage[1]},
    }
    if not streaming:
        yield json.dumps(message).encode()
        return
    start = {**message, "content": [], "stop_reason": None, "usage": {"input_tokens": usage[0], "output_tokens": 1}}
    yield _sse("message_start", {"type": "message_start", "message": start})
    for index, block in enumerate(blocks):
        empty = {**block, "text": ""} if block["type"] == "text" else {**block, "input": {}}
        yield _sse("content_block_start", {"type": "content_block_start", "index": index, "content_block": empty})
        delta = (
            {"type": "text_delta", "text": block["text"]}
            if block["type"] == "text"
            else {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
        )
        yield _sse("content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta})
        yield _sse("content_block_stop", {"type": "content_block_stop", "index": index})
    yield _sse(
        "message_delta",
        {
            "type": "message_delta",
            "delta": {"stop_reason": stop, "stop_sequence": None},
            "usage": {"output_tokens": usage[1]},
        },
    )
    yield _sse("message_stop", {"type": "message_stop"})


def _responses(
    server: ScriptedModelServer, streaming: bool, model: str, reply: Reply, usage: tuple[int, int]
) -> Iterator[bytes]:
    items: list[dict[str, Any]] = []
    if reply.text:
        items.append(
            {
                "type": "message",
                "id": server.new_id("msg"),
                "role": "assistant",
                "status": "completed",
                "content": [{"type": "output_text", "text": reply.text, "annotations": []}],
            }
        )
    for call in reply.tool_calls:
        if isinstance(call.arguments, str):
            items.append(
                {
                    "type": "custom_tool_call",
                    "id": server.new_id("ctc"),
                    "call_id": server.new_id("call"),
                    "name": call.name,
                    "input": call.arguments,
                    "status": "completed",
                }
            )
        else:
            items.append(
                {
                    "type": "function_call",
                    "id": server.new_id("fc"),
                    "call_id": server.new_id("call"),
                    "name": call.name,
                    "arguments": _arguments_json(call),
                    "status": "completed",
                }
            )
    response = {
        "id": server.new_id("resp"),
        "object": "response",
        "model": model,
        "status": "completed",
        "output": items,
        "usage": {
            "input_tokens": usage[0],
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": usage[1],
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": sum(usage),
        },
    }
    if not streaming:
        yield json.dumps(response).encode()
        return
    yield _sse(
        "response.created",
        {"type": "response.created", "response": {**response, "output": [], "status": "in_progress"}},
    )
    for index, item in enumerate(items):
        yield _sse(
            "response.output_item.done", {"type": "response.output_item.done", "output_index": index, "item": item}
        )
    yield _sse("response.completed", {"type": "response.completed", "response": response})


def _gemini(
    server: ScriptedModelServer, streaming: bool, model: str, reply: Reply, usage: tuple[int, int]
) -> Iterator[bytes]:
    parts: list[dict[str, Any]] = [{"text": reply.text}] if reply.text else []
    parts += [{"functionCall": {"name": c.name, "args": json.loads(_arguments_json(c))}} for c in reply.tool_calls]
    chunk = {
        "candidates": [{"content": {"role": "model", "parts": parts}, "finishReason": "STOP", "index": 0}],
        "usageMetadata": {
            "promptTokenCount": usage[0],
            "candidatesTokenCount": usage[1],
            "totalTokenCount": sum(usage),
        },
        "modelVersion": model,
    }
    yield _sse(None, chunk) if streaming else json.dumps(chunk).encode()


def _chat(
    server: ScriptedModelServer, streaming: bool, model: str, reply: Reply, usage: tuple[int, int]
) -> Iterator[bytes]:
    calls = [
        {"id": server.new_id("call"), "type": "function", "function": {"name": c.name, "arguments": _arguments_json(c)}}
        for c in reply.tool_calls
    ]
    finish = "tool_calls" if calls else "stop"
    head = {"id": server.new_id("chatcmpl"), "created": int(time.time()), "model": model}
    counts = {"prompt_tokens": usage[0], "completion_tokens": usage[1], "total_tokens": sum(usage)}
    if not streaming:
        message: dict[str, Any] = {"role": "assistant", "content": reply.text or None}
        if reply.reasoning:
            message["reasoning_content"] = reply.reasoning
        if calls:
            message["tool_calls"] = calls
        yield json.dumps(
            {
                **head,
                "object": "chat.completion",
                "usage": counts,
                "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            }
        ).encode()
        return

    def chunk(delta: dict[str, Any], finish_reason: str | None = None, **extra: Any) -> bytes:
        choices = [{"index": 0, "delta": delta, "finish_reason": finish_reason}]
        return _sse(None, {**head, "object": "chat.completion.chunk", "choices": choices, **extra})

    yield chunk({"role": "assistant", "content": ""})
    if reply.reasoning:
        yield chunk({"reasoning_content": reply.reasoning})
    if reply.text:
        yield chunk({"content": reply.text})
    for index, call in enumerate(calls):
        yield chunk({"tool_calls": [{"index": index, **call}]})
    yield chunk({}, finish, usage=counts)
    yield _sse(None, "[DONE]")
