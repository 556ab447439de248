"""Task validation reports, where a run has them: a `validation_report.yaml` per task (the task's
`overall_status`, PASS, WARN or FAIL, and one entry per check) and a run-level
`validation_summary.yaml` (`aka validate`; the original's shape, SEED_SPEC 10).

Only the fields the dashboard shows are required; anything else in the files is kept as
key/value text, so a report with more to say still reads. `checks` is a list of entries (each with
a name and a status) or a mapping from a check's name to its entry or to its status.
"""

from __future__ import annotations

import os
from enum import Enum
from pathlib import Path

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from aka.errors import AkaError

REPORT_NAME = "validation_report.yaml"
SUMMARY_NAME = "validation_summary.yaml"
NOT_SEARCHED = frozenset(
    {
        "work",
        "evaluation",
        "evaluation_heldout",
        "heldout_baseline",
        "baseline",
        "repos",
        "baselines",
        ".parallel",
        "exports",
        "__pycache__",
        "agent_home",
    }
)
# Folders a step writes (its TMPDIR, its caches): a candidate left a forged report in one that a
# killed run kept, and an agent in its home (red team, session 50)
NOT_SEARCHED_PREFIXES = ("tmp-", "triton-", "builds-")


class ValidationStatus(str, Enum):
    PASS = "PASS"
    WARN = "WARN"
    FAIL = "FAIL"


class ValidationCheck(BaseModel):
    name: str
    status: str
    message: str = ""


class ValidationReport(BaseModel):
    """One file as the dashboard shows it: whose it is, its overall status, its checks."""

    model_config = ConfigDict(extra="forbid")

    path: str
    subject: str
    overall_status: ValidationStatus
    checks: list[ValidationCheck] = Field(default_factory=list)
    details: dict[str, str] = Field(default_factory=dict)


def _text(value: object) -> str:
    if isinstance(value, (dict, list)):
        return yaml.safe_dump(value, default_flow_style=True, sort_keys=False).strip()
    return "" if value is None else str(value)


def _check(name: str, entry: object) -> ValidationCheck:
    if not isinstance(entry, dict):
        return ValidationCheck(name=name, status=_text(entry))
    message = entry.get("message", entry.get("detail", entry.get("details", entry.get("reason", ""))))
    return ValidationCheck(
        name=str(entry.get("name", name)), status=_text(entry.get("status", "")), message=_text(message)
    )


def _checks(raw: object, path: Path) -> list[ValidationCheck]:
    if raw is None:
        return []
    if isinstance(raw, dict):
        return [_check(str(name), entry) for name, entry in raw.items()]
    if isinstance(raw, list):
        return [_check(f"check {i + 1}", entry) for i, entry in enumerate(raw)]
    raise AkaError(
        f"{path}: field 'checks': expected a list of checks or a mapping of check names; "
        "rewrite the file with `aka validate`"
    )


def read_validation(path: Path, root: Path) -> ValidationReport:
    """One validation file; the subject is its task (`task_name`/`task`) or its folder."""
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise AkaError(
            f"{path}: not readable YAML ({type(exc).__name__}); rewrite it with `aka validate` or remove it"
        ) from None
    if not isinstance(raw, dict):
        raise AkaError(f"{path}: not a validation report (not a mapping); rewrite it with `aka validate`")
    status = raw.get("overall_status")
    if not isinstance(status, str) or status not in {s.value for s in ValidationStatus}:
        raise AkaError(
            f"{path}: field 'overall_status': {status!r} is not PASS, WARN or FAIL; rewrite the file "
            "with `aka validate`"
        )
    folder = path.parent.relative_to(root).as_posix() if path.parent != root else root.name
    subject = str(raw.get("task_name") or raw.get("task") or folder)
    details = {str(k): _text(v) for k, v in raw.items() if k not in ("overall_status", "checks", "task_name", "task")}
    try:
        return ValidationReport(
            path=str(path),
            subject=subject,
            overall_status=ValidationStatus(status),
            checks=_checks(raw.get("checks"), path),
            details=details,
        )
    except ValidationError as exc:
        raise AkaError(
            f"{path}: not a validation report ({exc.errors()[0]['msg']}); rewrite it with `aka validate`"
        ) from None


def find_validation(run_dir: Path) -> tuple[ValidationReport | None, list[ValidationReport]]:
    """The run's validation summary (in the run or its reports/) and every task's report, by path;
    the agent's copies and the evaluation folders are not searched."""
    summary: ValidationReport | None = None
    reports: list[ValidationReport] = []
    for folder, subfolders, files in os.walk(run_dir):
        subfolders[:] = sorted(
            d for d in subfolders if d not in NOT_SEARCHED and not d.startswith((".", *NOT_SEARCHED_PREFIXES))
        )
        here = Path(folder)
        if SUMMARY_NAME in files and summary is None:
            summary = read_validation(here / SUMMARY_NAME, run_dir)
        if REPORT_NAME in files:
            reports.append(read_validation(here / REPORT_NAME, run_dir))
    return summary, sorted(reports, key=lambda r: (r.subject, r.path))
