"""Turns counted from each CLI's event stream, the stream read as it arrives (the platform's own turn
limit), and the sweep of processes a CLI left behind. Fast: no CLI, real child processes."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from aka.agents.claude_code import _marks as claude_marks
from aka.agents.cli_runner import RUN_MARKER_ENV, kill_escaped
from aka.agents.cli_stream import EventStream, parse_line
from aka.agents.cli_turns import JsonEvent, MarkEvent, TurnCounter
from aka.agents.codex import _marks as codex_marks
from aka.agents.cursor import _marks as cursor_marks
from aka.agents.gemini import _marks as gemini_marks
from aka.agents.opencode import _marks as opencode_marks


def _fed(marks: MarkEvent, events: list[JsonEvent]) -> tuple[int, list[int]]:
    """Turns at the end, and the turn count at each event that settled a turn."""
    counter = TurnCounter(marks)
    settled = [counter.turns for event in events if counter.feed(event)]
    return counter.turns, settled


def _claude(message: str, *blocks: JsonEvent) -> JsonEvent:
    return {"type": "assistant", "message": {"id": message, "content": list(blocks)}}


def test_claude_turns_are_its_messages_not_its_num_turns() -> None:
    """One response printed block by block is one turn; `num_turns` (one more) is not used."""
    use = {"type": "tool_use", "id": "t1", "name": "Bash"}
    events = [
        {"type": "system", "subtype": "init"},
        _claude("m1", {"type": "text", "text": "Let me look."}),
        _claude("m1", use),
        {"type": "user", "message": {"content": [{"type": "tool_result", "tool_use_id": "t1"}]}},
        _claude("m2", {"type": "text", "text": "Done."}),
        {"type": "result", "num_turns": 3},
    ]
    assert _fed(claude_marks, events) == (2, [1])


def test_gemini_turns_are_runs_of_model_output() -> None:
    events: list[JsonEvent] = [
        {"type": "init"},
        {"type": "message", "role": "user", "content": "task"},
        {"type": "message", "role": "assistant", "content": "Reading", "delta": True},
        {"type": "tool_use", "tool_id": "a"},
        {"type": "tool_use", "tool_id": "b"},
        {"type": "tool_result", "tool_id": "a"},
        {"type": "tool_result", "tool_id": "b"},
        {"type": "tool_use", "tool_id": "c"},
        {"type": "tool_result", "tool_id": "c"},
        {"type": "message", "role": "assistant", "content": "Done", "delta": True},
        {"type": "result"},
    ]
    assert _fed(gemini_marks, events) == (3, [1, 2])


def _item(kind: str, item_id: str, item_type: str = "command_execution") -> JsonEvent:
    return {"type": f"item.{kind}", "item": {"id": item_id, "type": item_type}}


def test_codex_turns_are_tool_steps() -> None:
    """A command that outlived its yield (handed back to the model running) completes late: the
    next call is still a step of its own; reasoning belongs to the call after it."""
    events = [
        {"type": "turn.started"},
        _item("started", "0"),
        _item("started", "1"),
        _item("completed", "1"),
        _item("completed", "r", "reasoning"),
        _item("started", "2"),
        _item("completed", "2"),
        _item("completed", "0"),
        _item("completed", "3", "file_change"),
        _item("completed", "m", "agent_message"),
        {"type": "turn.completed"},
    ]
    assert _fed(codex_marks, events) == (5, [2, 3, 4])


def test_opencode_turns_are_its_steps() -> None:
    def step(reason: str) -> list[JsonEvent]:
        return [
            {"type": "step_start", "part": {}},
            {"type": "tool_use", "part": {}},
            {"type": "step_finish", "part": {"reason": reason}},
        ]

    assert _fed(opencode_marks, [*step("tool-calls"), *step("tool-calls"), *step("stop")]) == (3, [1, 2])


def test_cursor_parallel_calls_are_one_turn() -> None:
    def call(subtype: str, call_id: str) -> JsonEvent:
        return {"type": "tool_call", "subtype": subtype, "call_id": call_id}

    events = [
        {"type": "assistant"},
        call("started", "a"),
        call("started", "b"),
        call("completed", "a"),
        call("completed", "b"),
        call("started", "c"),
        call("completed", "c"),
        {"type": "assistant"},
        {"type": "result"},
    ]
    assert _fed(cursor_marks, events) == (3, [1, 2])


STEPS = textwrap.dedent("""\
    import json, pathlib, sys, time
    for index in range(10):
        pathlib.Path(sys.argv[1], f"step-{index}").touch()
        print(json.dumps({"type": "step_start", "part": {}}))
        print("a line that is not JSON")
        print(json.dumps({"type": "step_finish", "part": {"reason": "tool-calls"}}), flush=True)
        time.sleep(0.3)
""")


@pytest.mark.parametrize("limit", [3, None])
def test_the_stream_ends_the_process_group_at_the_turn_limit(tmp_path: Path, limit: int | None) -> None:
    transcript = tmp_path / "transcript.jsonl"
    stream = EventStream(transcript, TurnCounter(opencode_marks), limit)
    child = subprocess.Popen(
        [sys.executable, "-c", STEPS, str(tmp_path)],
        stdout=stream.write_fd,
        start_new_session=True,
        pass_fds=(stream.write_fd,),
    )
    stream.watch(child.pid)
    child.wait(timeout=60)
    events = stream.close()
    steps = 3 if limit else 10
    assert (stream.stopped_at_limit, stream.counter.turns, len(events)) == (limit is not None, steps, 2 * steps)
    assert child.returncode == (-9 if limit else 0)
    assert sorted(p.name for p in tmp_path.glob("step-*")) == sorted(f"step-{i}" for i in range(steps))
    assert transcript.read_text().count("not JSON") == steps, "the transcript keeps every byte"


def test_escaped_processes_are_killed_and_counted_once(tmp_path: Path) -> None:
    marker = "test-marker"
    env = {**os.environ, RUN_MARKER_ENV: marker}
    escaped = [subprocess.Popen(["sleep", "300"], env=env, start_new_session=True) for _ in range(2)]
    other = subprocess.Popen(["sleep", "300"], env={**os.environ, RUN_MARKER_ENV: "another-run"})
    try:
        assert kill_escaped(marker) == sorted(p.pid for p in escaped)
        assert [p.wait(timeout=10) for p in escaped] == [-9, -9] and other.poll() is None
    finally:
        other.kill()
        other.wait()
    assert kill_escaped(marker) == []


def test_closing_the_stream_does_not_wait_on_a_writer_that_keeps_printing(tmp_path: Path) -> None:
    """A process that escaped every kill and printed on: the reader never saw a quiet moment."""
    stream = EventStream(tmp_path / "transcript.jsonl", TurnCounter(opencode_marks), None)
    writer = subprocess.Popen(
        ["sh", "-c", "while :; do echo still-here; done"], stdout=stream.write_fd, pass_fds=(stream.write_fd,)
    )
    stream.watch(writer.pid)
    try:
        started = time.monotonic()
        stream.close(grace_seconds=0.5)
        assert time.monotonic() - started < 5
        assert "still-here" in (tmp_path / "transcript.jsonl").read_text()
    finally:
        writer.kill()
        writer.wait()


def test_a_line_is_an_event_only_as_a_json_object_of_text() -> None:
    """A lone surrogate (`"\\udcff"` in a CLI's JSON) is U+FFFD in the event: kept, it would
    fail the run's JSON reports where the agent's message goes (red team, session 50)."""
    assert parse_line(b'{"type": "result", "result": "x\\udcffy"}') == {"type": "result", "result": "x\ufffdy"}
    assert parse_line(b"banner") is None and parse_line(b"[1]") is None and parse_line(b"\xff") is None
    assert parse_line(b"[" * 100_000) is None, "nested past the parser: no event, no crash"


def test_counts_and_costs_a_cli_reports_are_numbers_in_range() -> None:
    """A CLI's `inputTokens: 1e30` was kept and broke `aka export --format parquet`; a negative,
    NaN or infinite count or cost is no count (red team, session 50)."""
    from aka.agents.cli_runner import MAX_COUNT, dollars, number

    assert [number(v) for v in (12, 3.0, 1e30, -5, float("nan"), float("inf"), True, "7", None)] == [12, 3] + [0] * 7
    assert number(MAX_COUNT) == MAX_COUNT and number(MAX_COUNT + 1) == 0
    assert [dollars(v) for v in (0.25, 0, -1.0, float("nan"), float("inf"), False, "1")] == [0.25, 0.0] + [None] * 5
