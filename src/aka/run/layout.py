"""Where a run's files live: `<prefix>_<GPU>_<agent>/run_<ts>[_<suffix>]/<task slug>[__<trial>]_<ts>/`.

A task workspace holds `work/` (the agent's copy of the task), `evaluation/` (the fresh
directory the candidate was judged in), logs, `task_result.yaml` and `completion.json`.
"""

from __future__ import annotations

import re
from datetime import datetime
from pathlib import Path

from aka.config.tasks import Task
from aka.errors import ConfigError
from aka.results.task_result import RESULT_FILE_NAME

TIMESTAMP_FORMAT = "%Y%m%d_%H%M%S"
RUN_DIR_PATTERN = re.compile(r"^run_\d{8}_\d{6}(_[A-Za-z0-9._-]+)?$")
WORKSPACE_SUFFIX = re.compile(r"_(\d{8}_\d{6})(?:_(\d+))?$")
REPORTS_DIR = "reports"
AGENT_WORK_DIR = "work"
AGENT_HOME_DIR = "agent_home"  # a CLI agent's HOME and TMPDIR (aka.agents.cli_runner)
EVALUATION_DIR = "evaluation"
REPOSITORIES_DIR = "repos"  # repository tasks, cloned at their pinned revision (aka.run.repository)
MANIFEST_NAME = "run_manifest.json"
EVENTS_NAME = "events.jsonl"
SCHEDULE_NAME = "schedule.json"  # a multi-arm or repeated run's trial order (aka.run.schedule)
ARM_REPORTS_DIR = "arms"  # reports/arms/<label>/: one arm's reports in a multi-arm run


def timestamp(now: datetime | None = None) -> str:
    return (now or datetime.now()).strftime(TIMESTAMP_FORMAT)


def experiment_dir(prefix: str, gpu_model: str, agent: str) -> Path:
    return Path(f"{prefix}_{gpu_model}_{agent}").expanduser().resolve()


def new_run_dir(experiment: Path, suffix: str | None) -> Path:
    """A fresh `run_<timestamp>[_<suffix>]`; never reuses an existing folder."""
    base = f"run_{timestamp()}" + (f"_{suffix}" if suffix else "")
    experiment.mkdir(parents=True, exist_ok=True)
    return _claim_new_dir(experiment, base, ".")


def latest_run_dir(experiment: Path) -> Path:
    runs = sorted(
        (p for p in experiment.glob("run_*") if p.is_dir() and (p / MANIFEST_NAME).is_file()),
        key=lambda p: p.stat().st_mtime,
    )
    if not runs:
        raise ConfigError(f"--resume-latest: no run with a {MANIFEST_NAME} under {experiment}")
    return runs[-1]


def workspace_stem(task: Task, label: str | None) -> str:
    """The task's slug, then `__<arm>__r<k>` (or `__r<k>`) for a trial of a multi-arm or repeated run."""
    return f"{task.slug}__{label}" if label else task.slug


def new_task_workspace(run_dir: Path, task: Task, label: str | None = None) -> Path:
    return _claim_new_dir(run_dir, f"{workspace_stem(task, label)}_{timestamp()}", "_")


def _claim_new_dir(parent: Path, base: str, separator: str) -> Path:
    """`parent/base`, or `base<separator>2`, 3, ...: the first that this process creates itself
    (mkdir fails where another process made it first, so two never share one)."""
    counter = 1
    while True:
        candidate = parent / (base if counter == 1 else f"{base}{separator}{counter}")
        try:
            candidate.mkdir()
            return candidate
        except FileExistsError:
            counter += 1


def task_workspaces(run_dir: Path, task: Task, label: str | None = None) -> list[Path]:
    """This task's (trial's) workspaces in the run, oldest first (exact match, not a prefix match)."""
    stem = workspace_stem(task, label)
    found: list[tuple[str, int, Path]] = []
    for path in run_dir.iterdir():
        match = WORKSPACE_SUFFIX.search(path.name)
        if path.is_dir() and match and path.name[: match.start()] == stem:
            found.append((match.group(1), int(match.group(2) or 1), path))
    return [p for _, _, p in sorted(found)]


def result_workspaces(run_dir: Path) -> list[Path]:
    """Every task workspace of the run with a `task_result.yaml`, oldest first (by the timestamp
    and counter in their names): export reads them all, reports the newest per trial."""
    found = []
    for path in run_dir.iterdir():
        match = WORKSPACE_SUFFIX.search(path.name)
        if path.is_dir() and match and (path / RESULT_FILE_NAME).is_file():
            found.append((match.group(1), int(match.group(2) or 1), path.name, path))
    return [path for *_, path in sorted(found)]
