"""The machine-readable report a task's evaluation step writes (format `aka-step-report/1`).

Task harnesses write one JSON object to the file named by `$AKA_RESULT_FILE`; the evaluator
parses it with this model and never reads numbers from a step's free-text output.
See docs/result-format.md for the field-by-field description.
"""

from __future__ import annotations

import json
from enum import Enum
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

STEP_REPORT_FORMAT = "aka-step-report/1"
RESULT_FILE_ENV = "AKA_RESULT_FILE"


class StepStatus(str, Enum):
    """Overall outcome of one step as the harness saw it."""

    OK = "ok"
    FAILED = "failed"
    SKIPPED = "skipped"


class CaseReport(BaseModel):
    """One test case: what ran, whether it matched the reference, and how long it took."""

    model_config = ConfigDict(extra="forbid")

    id: str
    params: dict[str, str | int | float | bool | None] = Field(default_factory=dict)
    correct: bool | None = None
    time_ms: float | None = Field(default=None, gt=0)
    timing_method: str | None = None
    max_abs_error: float | None = None
    message: str | None = None


class StepReport(BaseModel):
    """Everything one step (compile, correctness or performance) reports."""

    model_config = ConfigDict(extra="forbid")

    format: str = STEP_REPORT_FORMAT
    step: str
    status: StepStatus
    message: str | None = None
    cases: list[CaseReport] = Field(default_factory=list)


class StepReportError(ValueError):
    """The step's report is missing, unreadable or not in the documented format."""


def read_step_report(path: Path) -> StepReport:
    """Parse a step report, raising `StepReportError` with a one-line reason."""
    if not path.is_file():
        raise StepReportError(f"no step report was written to {path.name}")
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise StepReportError(f"step report {path.name} is not valid JSON: {exc}") from exc
    if not isinstance(raw, dict) or raw.get("format") != STEP_REPORT_FORMAT:
        raise StepReportError(f"step report {path.name} is not in format {STEP_REPORT_FORMAT}")
    try:
        return StepReport.model_validate(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise StepReportError(f"step report {path.name}: field {where}: {first['msg']}") from exc
