"""The step report (`aka-step-report/1`) as plain dataclasses.

This mirrors `aka.evaluation.step_report` without pydantic so that step processes import nothing but the
standard library and torch; the evaluator validates what is sent here with the pydantic model.
The judge writes it; no worker ever sees the channel it goes through.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Literal

from aka.evaluation.wire import STEP_REPORT_FORMAT
from aka.harness.cases import Case, Param

Status = Literal["ok", "failed", "skipped"]
MESSAGE_LIMIT = 500


def one_line(text: str) -> str:
    """Collapse a message to one line, as the report's `message` fields require."""
    return " ".join(text.split())[:MESSAGE_LIMIT]


def describe_exception(exc: BaseException) -> str:
    """`Type: first line`; when the first line only says where (`at 3:8:`), the last line says what."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    if not lines:
        text = ""
    elif len(lines) > 1 and lines[0].endswith(":"):
        text = f"{lines[0]} {lines[-1]}"
    else:
        text = lines[0]
    return one_line(f"{type(exc).__name__}: {text}" if text else type(exc).__name__)


def _finite(value: float | None) -> float | None:
    return value if value is not None and math.isfinite(value) else None


@dataclass
class CaseResult:
    """One case of the report; fields left None are written as JSON null."""

    case: Case
    correct: bool | None = None
    time_ms: float | None = None
    timing_method: str | None = None
    max_abs_error: float | None = None
    message: str | None = None
    baseline_time_ms: float | None = None
    speedup: float | None = None
    speedup_ci_low: float | None = None
    speedup_ci_high: float | None = None
    samples: int | None = None
    late_pairs: int | None = None
    floor_ms: float | None = None
    unexplained_ms: float | None = None
    span_speedup: float | None = None
    kind: str | None = None

    def to_json(self) -> dict[str, object]:
        params: dict[str, Param] = dict(self.case.params)
        time_ms = _finite(self.time_ms)
        baseline_ms = _finite(self.baseline_time_ms)
        return {
            "id": self.case.id,
            "params": params,
            "correct": self.correct,
            "time_ms": time_ms if time_ms is not None and time_ms > 0 else None,
            "timing_method": self.timing_method if time_ms else None,
            "max_abs_error": _finite(self.max_abs_error),
            "message": one_line(self.message) if self.message else None,
            "baseline_time_ms": baseline_ms if baseline_ms is not None and baseline_ms > 0 else None,
            "baseline_timing_method": self.timing_method if baseline_ms else None,
            "speedup": _finite(self.speedup) if self.speedup and self.speedup > 0 else None,
            "speedup_ci_low": _finite(self.speedup_ci_low),
            "speedup_ci_high": _finite(self.speedup_ci_high),
            "samples": self.samples,
            "late_pairs": self.late_pairs,
            "floor_ms": _finite(self.floor_ms),
            "unexplained_ms": _finite(self.unexplained_ms),
            "span_speedup": _finite(self.span_speedup) if self.span_speedup and self.span_speedup > 0 else None,
        }


@dataclass
class StepResult:
    """What one step found: overall status, a one-line reason unless ok, and the cases."""

    step: str
    status: Status
    message: str | None = None
    cases: list[CaseResult] = field(default_factory=list)
    failure_kind: str | None = None
    eval_seed: int | None = None
    isolation: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, object]:
        return {
            "format": STEP_REPORT_FORMAT,
            "step": self.step,
            "status": self.status,
            "message": one_line(self.message) if self.message else None,
            "failure_kind": self.failure_kind,
            "eval_seed": self.eval_seed,
            "isolation": self.isolation,
            "cases": [case.to_json() for case in self.cases],
        }
