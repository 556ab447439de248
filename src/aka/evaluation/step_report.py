"""The machine-readable report a task's evaluation step sends (format `aka-step-report/1`).

A step gets a pipe (file descriptor `$AKA_RESULT_FD`) and a one-time token on its standard input;
it sends exactly one message `{"token": ..., "report": {...}}` through that pipe. The evaluator
parses it with these models and never reads numbers from a step's free-text output; a message
with the wrong token, or more than one message, means something other than the harness wrote
to the channel. See docs/result-format.md for the field-by-field description.
"""

from __future__ import annotations

import json
from enum import Enum

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from aka.evaluation.wire import STEP_REPORT_FORMAT, valid_text


class StepStatus(str, Enum):
    """Overall outcome of one step as the harness saw it."""

    OK = "ok"
    FAILED = "failed"
    SKIPPED = "skipped"


class CaseReport(BaseModel):
    """One test case: what ran, whether it matched the reference, and how long it took. Every
    number must be finite, and every time and speedup positive: anything else is not a
    measurement (`StepReportError`, judged as tampering)."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    id: str
    params: dict[str, str | int | float | bool | None] = Field(default_factory=dict)
    correct: bool | None = None
    time_ms: float | None = Field(default=None, gt=0)
    timing_method: str | None = None
    max_abs_error: float | None = None
    message: str | None = None
    baseline_time_ms: float | None = Field(default=None, gt=0)
    baseline_timing_method: str | None = None
    speedup: float | None = Field(default=None, gt=0)
    speedup_ci_low: float | None = Field(default=None, gt=0)
    speedup_ci_high: float | None = Field(default=None, gt=0)
    samples: int | None = Field(default=None, ge=0)
    late_pairs: int | None = Field(default=None, ge=0)
    floor_ms: float | None = Field(default=None, gt=0)
    unexplained_ms: float | None = None
    span_speedup: float | None = Field(default=None, gt=0)


class StepReport(BaseModel):
    """Everything one step (compile, correctness or performance) reports."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    format: str = STEP_REPORT_FORMAT
    step: str
    status: StepStatus
    message: str | None = None
    failure_kind: str | None = None
    eval_seed: int | None = None
    isolation: list[str] = Field(default_factory=list)
    cases: list[CaseReport] = Field(default_factory=list)


class StepReportError(ValueError):
    """The step's report is missing, unreadable or not in the documented format."""


def _no_constant(name: str) -> None:
    raise ValueError(f"{name} is not a measurement")


def parse_step_message(data: bytes, token: str) -> StepReport:
    """Parse what came through the result pipe; raise `StepReportError` with a one-line reason."""
    lines = [line for line in data.splitlines() if line.strip()]
    if not lines:
        raise StepReportError("no step report was sent through the result channel")
    if len(lines) > 1:
        raise StepReportError(f"{len(lines)} messages arrived on the result channel; only the harness may write one")
    try:
        message = valid_text(json.loads(lines[0], parse_constant=_no_constant))
    except (UnicodeDecodeError, json.JSONDecodeError, ValueError, RecursionError) as exc:
        raise StepReportError(f"the result channel carried invalid JSON: {exc}") from exc
    if not isinstance(message, dict) or message.get("token") != token:
        raise StepReportError("the result channel carried a message without the step's token (forged)")
    raw = message.get("report")
    if not isinstance(raw, dict) or raw.get("format") != STEP_REPORT_FORMAT:
        raise StepReportError(f"the step report is not in format {STEP_REPORT_FORMAT}")
    try:
        return StepReport.model_validate(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise StepReportError(f"step report field {where}: {first['msg']}") from exc
