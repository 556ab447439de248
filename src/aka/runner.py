"""A whole run: validate everything first, then run tasks one by one, then aggregate reports.

Nothing is written until the config, the task selection, every task config, the scorer and the
device preflight have passed, so a bad input never leaves a half-made run behind.
"""

from __future__ import annotations

import contextlib
import json
import logging
import platform
import signal
import subprocess
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timezone
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field
from rich.console import Console

from aka import __version__
from aka.completion import completed_workspace
from aka.device import DeviceInfo, detect_device, resolve_target_model
from aka.errors import ConfigError
from aka.reports import RunHeader, write_reports
from aka.result import RESULT_FILE_NAME, TaskResult, TaskStatus, read_task_result, write_text_atomic
from aka.run_config import LoadedRunConfig, check_run_suffix, load_run_config
from aka.run_layout import (
    EVENTS_NAME,
    MANIFEST_NAME,
    REPORTS_DIR,
    experiment_dir,
    latest_run_dir,
    new_run_dir,
)
from aka.scoring import resolve_scorer
from aka.task_pipeline import RunContext, run_task
from aka.tasks import Task, gate_tasks, select_tasks, task_identity

logger = logging.getLogger(__name__)
STATUS_STYLE = {"PASS": "green", "PARTIAL": "yellow", "FAIL": "red", "SKIP": "cyan", "INFRA": "magenta"}


class RunManifest(BaseModel):
    """Everything needed to resume, re-score or re-report a run from its directory alone."""

    model_config = ConfigDict(extra="forbid")

    schema_version: int = 1
    run_name: str
    created_at: str
    config_path: str
    config: dict[str, object]
    agent: str
    target_gpu_model: str
    device: dict[str, object]
    tasks: dict[str, str]
    dropped_tasks: dict[str, str] = Field(default_factory=dict)
    versions: dict[str, str]
    git_revision: str | None
    log_file: str
    resumed_at: list[str] = Field(default_factory=list)


INFRA_EXIT = 3  # `aka run` / main.py: the run finished, but some task could not be judged


@dataclass(frozen=True)
class RunOutcome:
    run_dir: Path
    reports_dir: Path
    results: list[TaskResult]

    @property
    def infra_failures(self) -> list[str]:
        """Tasks that ended in an infrastructure failure: not judged, retried on resume."""
        return [r.task_name for r in self.results if r.status is TaskStatus.INFRA]

    def infra_message(self) -> str | None:
        """One line for the exit: which tasks were not judged and how to retry them."""
        failed = self.infra_failures
        if not failed:
            return None
        shown = ", ".join(failed[:5]) + (f" and {len(failed) - 5} more" if len(failed) > 5 else "")
        return (f"{len(failed)} of {len(self.results)} task(s) ended in an infrastructure failure (not the agent's): "
                f"{shown}; fix the cause (see their task_result.yaml) and retry them with "
                f"`aka run CONFIG --resume-run {self.run_dir}`")


def package_versions() -> dict[str, str]:
    found = {"aka": __version__, "python": platform.python_version()}
    for package in ("torch", "triton", "pydantic"):
        try:
            found[package] = version(package)
        except PackageNotFoundError:
            found[package] = "not installed"
    return found


def _git_revision() -> str | None:
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=Path(__file__).parent, capture_output=True,
                             text=True, timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() or None if out.returncode == 0 else None


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def _event(run_dir: Path, event: str, task: str) -> None:
    with (run_dir / EVENTS_NAME).open("a", encoding="utf-8") as handle:
        handle.write(json.dumps({"time": _now(), "event": event, "task": task}) + "\n")


def _attach_log(path: Path) -> logging.Handler:
    path.parent.mkdir(parents=True, exist_ok=True)
    handler = logging.FileHandler(path, encoding="utf-8")
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    logging.getLogger("aka").addHandler(handler)
    logging.getLogger("aka").setLevel(logging.INFO)
    return handler


def _resolve_run_dir(loaded: LoadedRunConfig, model: str, suffix: str | None, resume_run: Path | None,
                     resume_latest: bool) -> tuple[Path, bool]:
    experiment = experiment_dir(loaded.config.workspace_directory_prefix, model, loaded.agent_name)
    if resume_run is not None:
        run_dir = resume_run if resume_run.is_absolute() or resume_run.exists() else experiment / resume_run
        if not (run_dir / MANIFEST_NAME).is_file():
            raise ConfigError(f"--resume-run {resume_run}: not a run directory (no {MANIFEST_NAME})")
        return run_dir.resolve(), True
    if resume_latest:
        return latest_run_dir(experiment), True
    return new_run_dir(experiment, suffix), False


def _check_resumable(run_dir: Path, loaded: LoadedRunConfig) -> RunManifest:
    manifest = RunManifest.model_validate_json((run_dir / MANIFEST_NAME).read_text(encoding="utf-8"))
    if manifest.agent != loaded.agent_name:
        raise ConfigError(f"{loaded.path}: field 'agent.template': the run {run_dir.name} used "
                          f"'{manifest.agent}', not '{loaded.agent_name}'; resume with the same config")
    return manifest


@contextlib.contextmanager
def terminated_as_exit() -> Iterator[None]:
    """SIGTERM (Slurm's and Kubernetes' preemption) unwinds the run as an exit would: every started
    step and agent process is killed on the way out, and the run resumes where it stopped."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def stop(signum: int, _frame: object) -> None:
        raise SystemExit(128 + signum)

    previous = signal.signal(signal.SIGTERM, stop)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def run_experiment(config_path: Path, suffix: str | None = None, resume_run: Path | None = None,
                   resume_latest: bool = False, console: Console | None = None,
                   device: DeviceInfo | None = None) -> RunOutcome:
    """Validate, run every selected task (skipping completed ones on resume) and write reports."""
    with terminated_as_exit():
        return _run_experiment(config_path, suffix, resume_run, resume_latest, console, device)


def _run_experiment(config_path: Path, suffix: str | None, resume_run: Path | None, resume_latest: bool,
                    console: Console | None, device: DeviceInfo | None) -> RunOutcome:
    console = console or Console(stderr=True)
    check_run_suffix(suffix)
    loaded = load_run_config(config_path)
    scorer = resolve_scorer(loaded.config.scorer, str(loaded.path))
    selected = select_tasks(loaded.tasks_root, loaded.config.tasks, str(loaded.path))
    device = device or detect_device()
    model = resolve_target_model(loaded.config.target_gpu_model, device, str(loaded.path))
    runnable, dropped = gate_tasks(selected, device.arch)
    identities = {task.name: task_identity(task) for task in runnable}

    run_dir, resuming = _resolve_run_dir(loaded, model, suffix, resume_run, resume_latest)
    log_file = Path(loaded.config.log_directory).resolve() / f"{run_dir.parent.name}_{run_dir.name}.log"
    handler = _attach_log(log_file)
    try:
        if resuming:
            manifest = _check_resumable(run_dir, loaded)
            manifest.resumed_at.append(_now())
            manifest.tasks.update(identities)
        else:
            manifest = RunManifest(
                run_name=run_dir.name, created_at=_now(), config_path=str(loaded.path),
                config=loaded.config.model_dump(mode="json"), agent=loaded.agent_name, target_gpu_model=model,
                device={"kind": device.kind, "model": device.model, "name": device.name, "arch": device.arch,
                        "count": device.count, "driver": device.driver},
                tasks=identities, dropped_tasks={t.name: why for t, why in dropped}, versions=package_versions(),
                git_revision=_git_revision(), log_file=str(log_file),
            )
        write_text_atomic(run_dir / MANIFEST_NAME, manifest.model_dump_json(indent=2))
        console.print(f"[bold]run[/] {run_dir}  agent={loaded.agent_name}  device={device.name}  "
                      f"tasks={len(runnable)}" + (f" (dropped {len(dropped)})" if dropped else ""))
        for task, reason in dropped:
            logger.info("dropped %s: %s", task.name, reason)
        context = RunContext(run_dir, loaded, device, scorer)
        results = [_run_or_reuse(context, task, identities[task.name], resuming, console) for task in runnable]
        header = RunHeader(run_dir.name, loaded.agent_name, model, device.name, manifest.created_at,
                           loaded.config.scorer)
        write_reports(run_dir / REPORTS_DIR, results, header)
    finally:
        logging.getLogger("aka").removeHandler(handler)
        handler.close()
    console.print(f"[bold]reports[/] {run_dir / REPORTS_DIR}")
    return RunOutcome(run_dir, run_dir / REPORTS_DIR, results)


def _run_or_reuse(ctx: RunContext, task: Task, identity: str, resuming: bool, console: Console) -> TaskResult:
    if resuming:
        done = completed_workspace(ctx.run_dir, task, identity)
        if done is not None:
            _event(ctx.run_dir, "task_reused", task.name)
            console.print(f"  [dim]done[/]    {task.name} (completed earlier, kept)")
            return read_task_result(done / RESULT_FILE_NAME)
    _event(ctx.run_dir, "task_started", task.name)
    logger.info("task %s started", task.name)
    workspace, result = run_task(ctx, task)
    _event(ctx.run_dir, "task_finished", task.name)
    style = STATUS_STYLE.get(result.status.value, "white")
    speedup = f" speedup={result.speedup_ratio:.3f}x" if result.speedup_ratio else ""
    why = f"  ({result.failure_kind.value}: {result.failure_message})" if result.status is not TaskStatus.PASS else ""
    console.print(f"  [{style}]{result.status.value:<7}[/] {task.name} score={result.score:.1f}{speedup}{why}")
    logger.info("task %s finished in %s: %s", task.name, workspace.name, result.status.value)
    return result
