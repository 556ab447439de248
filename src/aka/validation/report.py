"""What `aka validate` writes: a `validation_report.yaml` per task and a `validation_summary.yaml`.

The original's shape (SEED_SPEC 10: `overall_status` PASS/WARN/FAIL and one entry per check,
read by `aka.dashboard.validation`) plus our fields: every check carries its evidence (what was
run, its exit status, how long it took, the end of its output), and the mutation check lists
every mutant with its verdict. Written atomically; read back by `read_report`.
"""

from __future__ import annotations

from enum import Enum
from pathlib import Path

import yaml
from pydantic import BaseModel, ConfigDict, Field

from aka.dashboard.validation import REPORT_NAME, SUMMARY_NAME
from aka.results.task_result import write_yaml_atomic

SCHEMA_VERSION = 1
EXCERPT_CHARS = 1500


class Status(str, Enum):
    PASS = "PASS"
    WARN = "WARN"
    FAIL = "FAIL"


class Evidence(BaseModel):
    """What a check ran: a command line or, for an in-process step, what it did."""

    model_config = ConfigDict(extra="forbid")

    command: str
    exit_code: int | None = None
    duration_s: float = 0.0
    output_excerpt: str = ""


class MutantVerdict(str, Enum):
    KILLED = "killed"  # failed correctness, as it must
    SURVIVED = "survived"  # passed: the task accepts a wrong kernel
    NOT_APPLICABLE = "not_applicable"  # the mutation cannot change this task's outputs (reason given)
    INVALID = "invalid"  # rejected for another reason than correctness: says nothing about the task
    NOT_RUN = "not_run"  # cannot run on this machine (reason given)
    EXCEPTED = "excepted"  # survived, with a recorded justification (tasks/validation_exceptions.yaml)


class MutantResult(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str
    description: str
    verdict: MutantVerdict
    failure_kind: str | None = None
    message: str = ""
    duration_s: float = 0.0


class Check(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str
    status: Status
    message: str
    evidence: list[Evidence] = Field(default_factory=list)


class MutationScore(BaseModel):
    """Killed over the applicable mutants that ran, excepted ones left out (None: none ran)."""

    model_config = ConfigDict(extra="forbid")

    killed: int = 0
    survived: int = 0
    invalid: int = 0
    not_applicable: int = 0
    not_run: int = 0
    excepted: int = 0
    score: float | None = None
    mutants: list[MutantResult] = Field(default_factory=list)


class TaskValidation(BaseModel):
    model_config = ConfigDict(extra="forbid")

    schema_version: int = SCHEMA_VERSION
    task_name: str
    family: str
    task_dir: str
    device: str
    overall_status: Status
    checks: list[Check]
    mutation: MutationScore | None = None
    duration_s: float = 0.0


class SummaryRow(BaseModel):
    model_config = ConfigDict(extra="forbid")

    task_name: str
    family: str
    overall_status: Status
    failed_checks: list[str] = Field(default_factory=list)
    warned_checks: list[str] = Field(default_factory=list)
    mutation_score: float | None = None
    surviving_mutants: list[str] = Field(default_factory=list)
    report: str


class ValidationSummary(BaseModel):
    model_config = ConfigDict(extra="forbid")

    schema_version: int = SCHEMA_VERSION
    overall_status: Status
    command: str
    device: str
    counts: dict[str, int]
    tasks: list[SummaryRow]


def overall(statuses: list[Status]) -> Status:
    """The worst of the statuses (PASS for none)."""
    if Status.FAIL in statuses:
        return Status.FAIL
    return Status.WARN if Status.WARN in statuses else Status.PASS


def excerpt(text: str, limit: int = EXCERPT_CHARS) -> str:
    """The end of an output, where the verdict is."""
    text = text.strip()
    return text if len(text) <= limit else "..." + text[-limit:]


def write_report(folder: Path, report: TaskValidation) -> Path:
    path = folder / REPORT_NAME
    write_yaml_atomic(path, report.model_dump(mode="json"))
    return path


def write_summary(folder: Path, summary: ValidationSummary) -> Path:
    path = folder / SUMMARY_NAME
    write_yaml_atomic(path, summary.model_dump(mode="json"))
    return path


def read_report(path: Path) -> TaskValidation:
    return TaskValidation.model_validate(yaml.safe_load(path.read_text(encoding="utf-8")))


def markdown_table(reports: list[TaskValidation]) -> str:
    """One row per task: status, mutation score (killed/judged), what failed or warned, and why."""
    lines = [
        "| task | status | mutants killed | not applicable | failed | warned | survived / excepted |",
        "|---|---|---|---|---|---|---|",
    ]
    for report in sorted(reports, key=lambda r: r.task_name):
        mutation = report.mutation
        if mutation is None or mutation.score is None:
            killed = "n/a"
        else:
            judged = mutation.killed + mutation.survived + mutation.invalid
            killed = f"{mutation.killed}/{judged} ({mutation.score:.0%})"
        absent = (
            ", ".join(m.name for m in mutation.mutants if m.verdict is MutantVerdict.NOT_APPLICABLE) if mutation else ""
        )
        odd = (
            ", ".join(
                f"{m.name} ({m.verdict.value})"
                for m in mutation.mutants
                if m.verdict in (MutantVerdict.SURVIVED, MutantVerdict.EXCEPTED, MutantVerdict.INVALID)
            )
            if mutation
            else ""
        )
        failed = ", ".join(c.name for c in report.checks if c.status is Status.FAIL)
        warned = ", ".join(c.name for c in report.checks if c.status is Status.WARN)
        lines.append(
            f"| {report.task_name} | {report.overall_status.value} | {killed} | {absent} | {failed} | "
            f"{warned} | {odd} |"
        )
    return "\n".join(lines) + "\n"
