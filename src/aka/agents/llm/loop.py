"""The tool-calling loop: request, run the tool calls, send their results back, until a stop.

Limits are checked before every request: `max_iterations` (model responses), the token budget
(input + output tokens as the server reports them) and the wall clock (a request is not started
with less than `MIN_REQUEST_SECONDS` left, and its HTTP timeout is the time that remains). A reply
without tool calls, or a `finish` call, ends the session; a session in which the model never
answered (out of time before its first response) is the agent's failure. Every request and response goes to the
transcript as one JSON line (a request with only the messages it adds, so the file grows linearly);
the API key is in the headers, which are never written.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path

from aka.agents.llm.protocols import ApiError, Conversation, JsonObject, ModelTurn, ToolCall, ToolOutput, post_json
from aka.agents.llm.tools import TOOL_SPECS, Toolbox
from aka.results.task_result import AgentOutcome

TRANSCRIPT_NAME = "agent_transcript.jsonl"
TRANSCRIPT_FORMAT = "aka-llm-transcript/1"
MIN_REQUEST_SECONDS = 1.0
MESSAGE_CHARS = 1000


@dataclass(frozen=True)
class Limits:
    max_iterations: int | None
    token_budget: int | None
    deadline: float | None
    request_timeout: float


class Transcript:
    """`agent_transcript.jsonl`: one JSON object a line, each with `type` and `t` (seconds since start)."""

    def __init__(self, path: Path, started: float) -> None:
        self.path, self.started = path, started
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("", encoding="utf-8")

    def write(self, kind: str, **fields: object) -> None:
        record = {"type": kind, "t": round(time.monotonic() - self.started, 3), **fields}
        with self.path.open("a", encoding="utf-8") as handle:
            handle.write(json.dumps(record, default=str) + "\n")


def clip(text: str) -> str:
    text = text.strip()
    return text if len(text) <= MESSAGE_CHARS else text[: MESSAGE_CHARS - 3] + "..."


class AgentLoop:
    def __init__(
        self,
        agent: str,
        conversation: Conversation,
        api_key: str | None,
        toolbox: Toolbox,
        limits: Limits,
        log_path: Path,
    ) -> None:
        self.agent, self.conversation, self.api_key = agent, conversation, api_key
        self.toolbox, self.limits, self.log_path = toolbox, limits, log_path
        self.started = time.monotonic()
        self.transcript = Transcript(log_path.parent / TRANSCRIPT_NAME, self.started)
        self.turns = self.tool_calls = self.input_tokens = self.output_tokens = 0
        self._logged_messages = 0

    @property
    def tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    def run(self) -> AgentOutcome:
        self.transcript.write(
            "start", format=TRANSCRIPT_FORMAT, url=self.conversation.url, tools=[spec.name for spec in TOOL_SPECS]
        )
        while True:
            stop = self._limit_reached()
            if stop is not None:
                return self._end(stop, self._stopped_message(stop))
            try:
                turn = self._request()
            except TimeoutError as exc:
                return self._end(*self._timed_out(exc))
            except ApiError as exc:
                self.transcript.write("error", message=str(exc))
                return self._end("api_error", str(exc))
            if not turn.calls:
                cut = "the response was cut at max_tokens; " if turn.stop_reason in ("length", "max_tokens") else ""
                return self._end("finished", cut + (turn.text or "the model ended without a tool call"))
            summary = self._run_tools(turn)
            if summary is not None:
                return self._end("finished", summary)

    def _remaining(self) -> float | None:
        return None if self.limits.deadline is None else self.limits.deadline - time.monotonic()

    def _limit_reached(self) -> str | None:
        limits, remaining = self.limits, self._remaining()
        if limits.max_iterations is not None and self.turns >= limits.max_iterations:
            return "max_iterations"
        if limits.token_budget is not None and self.tokens >= limits.token_budget:
            return "token_budget"
        if remaining is not None and remaining < MIN_REQUEST_SECONDS:
            return "timeout"
        return None

    def _request(self) -> ModelTurn:
        remaining = self._remaining()
        timeout = self.limits.request_timeout if remaining is None else min(remaining, self.limits.request_timeout)
        body = self.conversation.body()
        iteration = self.turns + 1
        self.transcript.write(
            "request",
            iteration=iteration,
            url=self.conversation.url,
            timeout=round(timeout, 3),
            body=self._new_part(body),
        )
        sent = time.monotonic()
        payload = post_json(self.conversation.url, self.conversation.headers(self.api_key), body, timeout)
        self.transcript.write("response", iteration=iteration, seconds=round(time.monotonic() - sent, 3), body=payload)
        turn = self.conversation.parse(payload)
        self.turns += 1
        self.tool_calls += len(turn.calls)
        self.input_tokens += turn.input_tokens
        self.output_tokens += turn.output_tokens
        names = ", ".join(call.name for call in turn.calls) or "no tool call"
        self._log(
            f"response {iteration}: {names}; {turn.input_tokens}+{turn.output_tokens} tokens, "
            f"stop reason {turn.stop_reason}"
        )
        return turn

    def _new_part(self, body: JsonObject) -> JsonObject:
        """The request body with only the messages not logged yet (`messages_from` says where they start)
        and the tools only the first time, so the transcript grows linearly yet holds every request."""
        messages = body.get("messages", [])
        part = {k: v for k, v in body.items() if k != "messages" and (k != "tools" or not self._logged_messages)}
        part.update(messages_from=self._logged_messages, messages=messages[self._logged_messages :])
        self._logged_messages = len(messages)
        return part

    def _timed_out(self, exc: TimeoutError) -> tuple[str, str]:
        remaining = self._remaining()
        self.transcript.write("error", message=f"request timed out: {exc}")
        if remaining is not None and remaining < MIN_REQUEST_SECONDS:
            return "timeout", self._stopped_message("timeout")
        return "api_error", (
            f"no answer from {self.conversation.url} within request_timeout_seconds={self.limits.request_timeout:g}"
        )

    def _run_tools(self, turn: ModelTurn) -> str | None:
        """Run the calls in order; returns the summary when one of them is `finish`."""
        last_turn = self._limit_reached() in ("max_iterations", "token_budget")
        results: list[tuple[ToolCall, ToolOutput]] = []
        for call in turn.calls:
            started, remaining = time.monotonic(), self._remaining()
            if remaining is not None and remaining <= 0:
                output = ToolOutput("not run: the session's time is up", True)
            else:
                output = self.toolbox.call(call, evaluate=not last_turn)
            arguments = call.arguments if call.arguments is not None else call.raw_arguments
            self.transcript.write(
                "tool",
                id=call.id,
                name=call.name,
                arguments=arguments,
                seconds=round(time.monotonic() - started, 3),
                is_error=output.is_error,
                output=output.text,
            )
            if call.name == "finish" and not output.is_error:
                return output.text
            results.append((call, output))
        self.conversation.add_tool_results(results)
        return None

    def _stopped_message(self, reason: str) -> str:
        what = {
            "max_iterations": f"max_iterations={self.limits.max_iterations} responses",
            "token_budget": f"token_budget={self.limits.token_budget} tokens ({self.tokens} used)",
            "timeout": "timeout_seconds",
        }[reason]
        last = self.toolbox.last_evaluation
        if not self.turns:
            return f"stopped at {what}: the model never answered ({self.conversation.url})"
        return f"stopped at {what}" + (f"; last evaluation: {last}" if last else "; no evaluation was run")

    def _end(self, reason: str, message: str) -> AgentOutcome:
        """`AgentOutcome.ended`'s rule: a limit is `ok` once the model answered (a session it never
        answered in is the agent's failure, not a pass of the untouched task)."""
        outcome = AgentOutcome.ended(
            self.agent,
            reason,
            self.turns,
            message=clip(message),
            wall_seconds=round(time.monotonic() - self.started, 3),
            tool_calls=self.tool_calls,
            input_tokens=self.input_tokens,
            output_tokens=self.output_tokens,
            transcript=str(self.transcript.path),
        )
        summary: JsonObject = outcome.model_dump(mode="json", exclude={"files_changed"})
        self.transcript.write("end", evaluations=self.toolbox.evaluations, **summary)
        self._log(f"end: {reason} ({message[:200]})")
        return outcome

    def _log(self, line: str) -> None:
        with self.log_path.open("a", encoding="utf-8") as handle:
            handle.write(line + "\n")
