"""`task_result.yaml`: the one typed, versioned record of a task's outcome, written atomically.

The seed's fields are kept verbatim (SEED_SPEC 6); we add `schema_version`, `status`,
`failure_kind`, per-case tables and the agent's outcome. Reports, resume and export only read it.
"""

from __future__ import annotations

import os
import secrets
from enum import Enum
from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field

RESULT_FILE_NAME = "task_result.yaml"
RESULT_SCHEMA_VERSION = 1


class FailureKind(str, Enum):
    """Why a task did not fully succeed; the first failure in pipeline order wins.

    `infra_error` and `skipped` are never the agent's fault: they do not mark the task as
    completed for resume, so a resumed run tries them again.
    """

    NONE = "none"
    AGENT_ERROR = "agent_error"
    AGENT_TIMEOUT = "agent_timeout"
    MISSING_KERNEL = "missing_kernel"
    COMPILE_ERROR = "compile_error"
    INCORRECT = "incorrect"
    CRASH = "crash"
    TIMEOUT = "timeout"
    PERFORMANCE_ERROR = "performance_error"
    POLICY_VIOLATION = "policy_violation"
    TAMPERING = "tampering"
    IMPOSSIBLE_SPEEDUP = "impossible_speedup"
    SKIPPED = "skipped"
    INFRA_ERROR = "infra_error"


CHEATING_KINDS = frozenset({FailureKind.POLICY_VIOLATION, FailureKind.TAMPERING, FailureKind.IMPOSSIBLE_SPEEDUP})


class TaskStatus(str, Enum):
    """The one-word verdict shown in reports."""

    PASS = "PASS"
    PARTIAL = "PARTIAL"
    FAIL = "FAIL"
    SKIP = "SKIP"
    INFRA = "INFRA"


STATUS_STYLE = {"PASS": "green", "PARTIAL": "yellow", "FAIL": "red", "SKIP": "cyan", "INFRA": "magenta"}  # console


class CaseTiming(BaseModel):
    """Per-case timing of baseline and candidate, matched by case id."""

    model_config = ConfigDict(extra="forbid")

    id: str
    params: dict[str, str | int | float | bool | None] = Field(default_factory=dict)
    correct: bool | None = None
    base_ms: float | None = None
    optimized_ms: float | None = None
    speedup: float | None = None
    speedup_ci_low: float | None = None
    speedup_ci_high: float | None = None
    paired: bool = False
    samples: int | None = None
    base_method: str | None = None
    optimized_method: str | None = None
    message: str | None = None


class HeldoutOutcome(str, Enum):
    BOTH_PASS = "both_pass"
    OPT_REGRESSION = "opt_regression"
    BOTH_FAIL = "both_fail"
    OPT_IMPROVEMENT = "opt_improvement"


class HeldoutResult(BaseModel):
    """The accepted candidate on the task's hidden held-out cases (never in the agent's workspace).

    Not part of the score: it measures generalization. `generalization_gap` is the main speedup
    minus the held-out speedup (positive: the candidate is tuned to the shapes it saw)."""

    model_config = ConfigDict(extra="forbid")

    outcome: HeldoutOutcome
    baseline_correct: bool
    candidate_correct: bool
    speedup_ratio: float | None = None
    generalization_gap: float | None = None
    message: str | None = None
    cases: list[CaseTiming] = Field(default_factory=list)


AgentLimit = Literal["turns", "tokens", "time"]
LIMIT_EXIT_REASONS: dict[str, AgentLimit] = {"max_iterations": "turns", "token_budget": "tokens", "timeout": "time"}


class AgentOutcome(BaseModel):
    """What the agent run itself reported (independent of how its files evaluate).

    The same for every agent: `ok` says the files it left are its answer (it finished, or a limit
    ended it after the model had answered at least once); `limit` names the budget that ended it
    (`turns` = `max_iterations`, `tokens` = `token_budget`, `time` = `timeout_seconds`); `turns` is
    the number of model responses. The other counters are `None` when the agent does not report
    them. `transcript` is the path of the saved event stream. Build it with `ended`, which applies
    that rule.
    """

    model_config = ConfigDict(extra="forbid")

    agent: str
    ok: bool = True
    exit_reason: str = "finished"
    limit: AgentLimit | None = None
    message: str | None = None
    wall_seconds: float = 0.0
    files_changed: list[str] = Field(default_factory=list)
    turns: int | None = None
    tool_calls: int | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    cost_usd: float | None = None
    transcript: str | None = None

    @classmethod
    def ended(
        cls, agent: str, exit_reason: str, turns: int | None, ok: bool | None = None, **fields: object
    ) -> AgentOutcome:
        """An outcome by the one rule: an exit reason of a limit (`max_iterations`, `token_budget`,
        `timeout`) sets `limit` and is `ok` once the model answered (an agent that never ran is no
        pass of the untouched task); otherwise `ok` is `finished` unless the agent says (`ok`)."""
        limit = LIMIT_EXIT_REASONS.get(exit_reason)
        if limit is not None:
            ok = turns is None or turns > 0
        elif ok is None:
            ok = exit_reason == "finished"
        return cls.model_validate(
            {"agent": agent, "ok": ok, "exit_reason": exit_reason, "limit": limit, "turns": turns, **fields}
        )


class TaskResult(BaseModel):
    """The content of `task_result.yaml`.

    `arm` and `repeat` name the trial of a multi-arm or repeated run (None in a plain single-arm
    run); optional, so files written before them still read."""

    model_config = ConfigDict(extra="forbid")

    schema_version: int = RESULT_SCHEMA_VERSION
    task_name: str
    task_type: str
    pass_compilation: bool = False
    compilation_error_message: str | None = None
    pass_correctness: bool = False
    correctness_error_message: str | None = None
    base_execution_time: float | None = None
    best_optimized_execution_time: float | None = None
    speedup_ratio: float | None = None
    speedup_ci_low: float | None = None
    speedup_ci_high: float | None = None
    baseline_benchmark_methods: list[str] = Field(default_factory=list)
    optimized_benchmark_methods: list[str] = Field(default_factory=list)
    benchmark_method_consistent: bool = False
    valid_baseline_cases: int = 0
    valid_optimized_cases: int = 0
    speedup_calculation_error_message: str | None = None
    optimization_summary: str = ""
    score: float = 0.0
    status: TaskStatus = TaskStatus.FAIL
    failure_kind: FailureKind = FailureKind.NONE
    failure_message: str | None = None
    scorer: str = "default"
    device: str = ""
    device_uuid: str | None = None  # the physical GPU the steps ran on (the worker's mask shows them that one)
    device_count: int | None = None  # GPUs the evaluation could see: 1 for a worker masked to one GPU
    cases: list[CaseTiming] = Field(default_factory=list)
    agent: AgentOutcome | None = None
    exports: dict[str, bool] = Field(default_factory=dict)
    tampered_files: list[str] = Field(default_factory=list)
    heldout: HeldoutResult | None = None
    eval_seed: int | None = None
    evaluation_seconds: float | None = None
    isolation: list[str] = Field(default_factory=list)
    trust: str | None = None  # original-format tasks: what the verdict and times rest on (aka.compat.trust)
    arm: str | None = None
    repeat: int | None = None


def temp_file_beside(path: Path) -> tuple[int, str]:
    """A new hidden file next to `path` (open for writing), made with the mode `open()` gives a new
    file (0666 less the umask), where `mkstemp` would make it 0600: the record it is renamed into
    stays readable by the run's group when the umask lets it (results, reports, manifests)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    while True:
        name = str(path.parent / f".{path.name}.{secrets.token_hex(6)}")
        try:
            return os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o666), name
        except FileExistsError:
            continue


def write_yaml_atomic(path: Path, data: object) -> None:
    """Write YAML through a temp file, fsync and rename, so readers never see half a file."""
    write_text_atomic(path, yaml.safe_dump(data, sort_keys=False, allow_unicode=True))


def write_text_atomic(path: Path, text: str) -> None:
    """Atomic counterpart of `Path.write_text` for reports and records: a temp file beside it,
    fsync, rename."""
    fd, tmp_name = temp_file_beside(path)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp_name, path)
    except BaseException:
        Path(tmp_name).unlink(missing_ok=True)
        raise


def write_task_result(workspace: Path, result: TaskResult) -> Path:
    path = workspace / RESULT_FILE_NAME
    write_yaml_atomic(path, result.model_dump(mode="json"))
    return path


def read_task_result(path: Path) -> TaskResult:
    with path.open(encoding="utf-8") as handle:
        return TaskResult.model_validate(yaml.safe_load(handle))
