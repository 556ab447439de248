"""The typed outcome of scoring one candidate: reward components, speedup with its interval,
failure kind and timings, next to the full `TaskResult` a run would have written."""

from __future__ import annotations

from dataclasses import dataclass, field

from pydantic import BaseModel, ConfigDict

from aka.results.task_result import FailureKind, TaskResult, TaskStatus

RL_RESULT_SCHEMA_VERSION = 1


@dataclass(frozen=True)
class Candidate:
    """One candidate: a task id and its edited files (name -> source text). Editable files it
    leaves out keep the task's pristine content, as an agent that did not touch them."""

    task_id: str
    files: dict[str, str] = field(default_factory=dict)


class CandidateResult(BaseModel):
    """What scoring one candidate gave. `applicable` is False when the verdict is not the
    candidate's (an infrastructure error, a step that cannot run here): no reward should be
    learned from it."""

    model_config = ConfigDict(extra="forbid")

    schema_version: int = RL_RESULT_SCHEMA_VERSION
    task_id: str
    candidate_sha256: str
    cache_key: str
    device: str
    compiled: bool
    correct: bool
    speedup: float | None = None
    speedup_ci_low: float | None = None
    speedup_ci_high: float | None = None
    score: float
    status: TaskStatus
    failure_kind: FailureKind
    failure_message: str | None = None
    base_ms: float | None = None
    optimized_ms: float | None = None
    evaluation_seconds: float | None = None
    device_wait_seconds: float | None = None  # of evaluation_seconds, spent waiting for others' turns on the device
    cached: bool = False
    task_result: TaskResult

    @property
    def applicable(self) -> bool:
        return self.failure_kind not in (FailureKind.INFRA_ERROR, FailureKind.SKIPPED)

    @classmethod
    def from_task_result(
        cls, task_id: str, candidate_sha256: str, cache_key: str, result: TaskResult
    ) -> CandidateResult:
        return cls(
            task_id=task_id,
            candidate_sha256=candidate_sha256,
            cache_key=cache_key,
            device=result.device,
            compiled=result.pass_compilation,
            correct=result.pass_correctness,
            speedup=result.speedup_ratio,
            speedup_ci_low=result.speedup_ci_low,
            speedup_ci_high=result.speedup_ci_high,
            score=result.score,
            status=result.status,
            failure_kind=result.failure_kind,
            failure_message=result.failure_message,
            base_ms=result.base_execution_time,
            optimized_ms=result.best_optimized_execution_time,
            evaluation_seconds=result.evaluation_seconds,
            task_result=result,
        )
