"""The baseline: the pristine task measured once per run and frozen, so resume never re-measures it.

For `baseline: source` tasks the original sources must compile and pass correctness (otherwise
the task itself is broken: an infrastructure error, never the agent's). For `baseline: reference`
tasks the PyTorch reference is timed instead.
"""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path

from filelock import FileLock
from pydantic import BaseModel, ConfigDict, Field

from aka.config.task_config import BaselineSource
from aka.config.tasks import Task
from aka.device import DeviceInfo
from aka.evaluation.eval_dir import build_eval_dir
from aka.evaluation.step_process import StepSetup
from aka.evaluation.step_report import CaseReport
from aka.evaluation.step_spec import Step, Target
from aka.evaluation.steps import StepOutcome, run_steps
from aka.results.task_result import FailureKind, write_text_atomic
from aka.trees import remove_tree

BASELINE_DIR = "baselines"


class BaselineRecord(BaseModel):
    model_config = ConfigDict(extra="forbid")

    task_name: str
    task_identity: str
    device: str
    source: BaselineSource
    status: FailureKind = FailureKind.NONE
    message: str | None = None
    cases: list[CaseReport] = Field(default_factory=list)
    measured_at: str = ""

    @property
    def usable(self) -> bool:
        return self.status is FailureKind.NONE

    @property
    def methods(self) -> list[str]:
        return sorted({c.timing_method for c in self.cases if c.timing_method and c.time_ms})


def baseline_path(run_dir: Path, task: Task) -> Path:
    return run_dir / BASELINE_DIR / f"{task.slug}.json"


def baseline_builds(run_dir: Path, task: Task) -> Path:
    """The baseline's compiled kernels (pristine code only), reused by every evaluation's
    performance step (aka.evaluation.step_process.BuildCaches)."""
    return run_dir / BASELINE_DIR / f"{task.slug}.builds"


def load_frozen_baseline(run_dir: Path, task: Task, identity: str, device: DeviceInfo) -> BaselineRecord | None:
    """The run's frozen baseline for this task, if it was measured for the same task and device."""
    path = baseline_path(run_dir, task)
    if not path.is_file():
        return None
    try:
        record = BaselineRecord.model_validate(json.loads(path.read_text(encoding="utf-8")))
    except (ValueError, OSError):
        return None
    if record.task_identity != identity or record.device != device.name or record.status is FailureKind.INFRA_ERROR:
        return None
    return record


def _first_problem(outcomes: list[StepOutcome]) -> StepOutcome | None:
    return next((o for o in outcomes if not o.passed), None)


def measure_baseline(run_dir: Path, task: Task, identity: str, device: DeviceInfo, work_dir: Path) -> BaselineRecord:
    """Validate and time the pristine task in `work_dir`, then freeze the record in the run."""
    source = task.config.baseline_source
    eval_dir, reports_dir, log = work_dir / "evaluation", work_dir / "reports", work_dir / "baseline.log"
    build_eval_dir(task, eval_dir, candidate_dir=None)
    validate = source is BaselineSource.SOURCE
    steps = [(Step.COMPILE, Target.CANDIDATE), (Step.CORRECTNESS, Target.CANDIDATE)] if validate else []
    builds = baseline_builds(run_dir, task)
    remove_tree(builds)
    setup = StepSetup(task, device, eval_dir, reports_dir, log, measuring_baseline=True)
    outcomes = run_steps(setup, [*steps, (Step.PERFORMANCE, Target.BASELINE)], shared_cache=builds)
    problem = _first_problem(outcomes)
    record = BaselineRecord(
        task_name=task.name,
        task_identity=identity,
        device=device.name,
        source=source,
        measured_at=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        cases=outcomes[-1].cases if problem is None else [],
    )
    if problem is not None and problem.skipped:
        record.status, record.message = FailureKind.SKIPPED, problem.message
    elif problem is not None:
        record.status = FailureKind.INFRA_ERROR
        record.message = f"baseline {problem.step.value} failed on the pristine task: {problem.message}"
    path = baseline_path(run_dir, task)
    write_text_atomic(path, record.model_dump_json(indent=2))
    return record


def frozen_or_measured(run_dir: Path, task: Task, identity: str, device: DeviceInfo, work_dir: Path) -> BaselineRecord:
    """The run's frozen baseline, or one measured now, under a per-task file lock: two workers of
    a parallel run on two trials of one task (arms, repeats) measure it once, and neither clears
    the builds the other's performance step is reading."""
    path = baseline_path(run_dir, task)
    path.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(path.with_name(f"{path.stem}.lock")):
        return load_frozen_baseline(run_dir, task, identity, device) or measure_baseline(
            run_dir, task, identity, device, work_dir
        )
