"""A whole run: validate everything first, then run the trials (one by one, or through the
parallel queue of `aka.parallel.pool` when several device slots are asked for), then aggregate reports.

Nothing is written until the config, the task selection, every task config, the scorer and the
device preflight have passed, so a bad input never leaves a half-made run behind.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import platform
import secrets
import signal
import subprocess
import threading
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, replace
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from rich.console import Console

from aka import __version__
from aka.config.run_config import LoadedRunConfig, check_run_suffix, load_run_config
from aka.config.tasks import Task, gate_tasks, select_tasks, task_identity
from aka.device import DeviceInfo, detect_device, resolve_target_model
from aka.errors import ConfigError
from aka.evaluation.step_spec import check_step_settings
from aka.parallel.backends import ExecutorMaker, executors
from aka.parallel.executor import ALL_GPUS, DeviceSlot, device_slots, every_gpu_here
from aka.parallel.pool import queue_results, supervise
from aka.parallel.queue import DEFAULT_LEASE_SECONDS, TrialQueue
from aka.parallel.ray_executor import RayBackend
from aka.progress import phases_to
from aka.reports.rebuild import write_run_reports
from aka.reports.writers import RunHeader
from aka.results.scoring import Scorer, finite_score, resolve_scorer
from aka.results.task_result import (
    RESULT_FILE_NAME,
    TaskResult,
    TaskStatus,
    read_task_result,
    write_text_atomic,
)
from aka.results.verdict import is_smoke_test
from aka.run.completion import completed_workspace, rewrite_result
from aka.run.events import Broadcast, EventKind, EventsFile, EventSink, RunEvent, TrialEvents, now
from aka.run.layout import (
    EVENTS_NAME,
    MANIFEST_NAME,
    REPORTS_DIR,
    SCHEDULE_NAME,
    experiment_dir,
    latest_run_dir,
    new_run_dir,
)
from aka.run.lock import holding_run
from aka.run.progress_display import PlainDisplay, ProgressDisplay
from aka.run.schedule import Trial, interleaved_schedule
from aka.run.task_pipeline import RunContext, run_task

logger = logging.getLogger(__name__)


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
    arms: list[str] = Field(default_factory=list)
    repeats: int = 1
    schedule_seed: int | None = None
    accepted_changes: list[str] = Field(default_factory=list)


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
        return (
            f"{len(failed)} of {len(self.results)} task(s) ended in an infrastructure failure (not the agent's): "
            f"{shown}; fix the cause (see their task_result.yaml) and retry them with "
            f"`aka run CONFIG --resume-run {self.run_dir}`"
        )


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
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"],
            cwd=Path(__file__).parent,
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() or None if out.returncode == 0 else None


def attach_log(path: Path) -> logging.Handler:
    path.parent.mkdir(parents=True, exist_ok=True)
    handler = logging.FileHandler(path, encoding="utf-8")
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    logging.getLogger("aka").addHandler(handler)
    logging.getLogger("aka").setLevel(logging.INFO)
    return handler


def _resolve_run_dir(
    loaded: LoadedRunConfig, model: str, suffix: str | None, resume_run: Path | None, resume_latest: bool
) -> tuple[Path, bool]:
    experiment = experiment_dir(loaded.config.workspace_directory_prefix, model, loaded.experiment_name)
    if resume_run is not None:
        run_dir = resume_run if resume_run.is_absolute() or resume_run.exists() else experiment / resume_run
        if not (run_dir / MANIFEST_NAME).is_file():
            raise ConfigError(f"--resume-run {resume_run}: not a run directory (no {MANIFEST_NAME})")
        return run_dir.resolve(), True
    if resume_latest:
        return latest_run_dir(experiment), True
    return new_run_dir(experiment, suffix), False


def _log_directory(loaded: LoadedRunConfig) -> Path:
    """The log folder, made (or found writable) before anything of the run is written."""
    directory = Path(loaded.config.log_directory).expanduser().resolve()
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(
            f"{loaded.path}: field 'log_directory': cannot make {directory} ({exc.strerror}); point it "
            "at a writable folder"
        ) from None
    if not os.access(directory, os.W_OK | os.X_OK):
        raise ConfigError(
            f"{loaded.path}: field 'log_directory': {directory} is not writable; point it at a writable folder"
        )
    return directory


def read_manifest(run_dir: Path) -> RunManifest:
    path = run_dir / MANIFEST_NAME
    try:
        return RunManifest.model_validate_json(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValidationError) as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise ConfigError(
            f"{path}: not a valid run manifest ({first}); the run cannot be resumed, start a new one"
        ) from None


def _resume_changes(manifest: RunManifest, loaded: LoadedRunConfig, identities: dict[str, str]) -> list[str]:
    """What this config changes in a run made with another: the task list, the scorer, the agents'
    settings. Each would make the resumed run's reports mix two experiments."""
    changes = []
    before, now = set(manifest.tasks), set(identities)
    if before != now:
        added, dropped = sorted(now - before), sorted(before - now)
        changes.append(
            f"field 'tasks': the run has {len(before)} task(s), this config selects {len(now)}"
            + (f" (added {', '.join(added[:3])}{'...' if len(added) > 3 else ''})" if added else "")
            + (f" (dropped {', '.join(dropped[:3])}{'...' if len(dropped) > 3 else ''})" if dropped else "")
        )
    record = _config_record(loaded)
    if manifest.config.get("scorer") != record.get("scorer"):
        changes.append(
            f"field 'scorer': the run was scored with '{manifest.config.get('scorer')}', this config "
            f"uses '{record.get('scorer')}'"
        )
    for key in ("agent", "arms"):
        if manifest.config.get(key) != record.get(key):
            changes.append(f"field '{key}': its settings differ from the run's")
    return changes


def _check_resumable(
    run_dir: Path, loaded: LoadedRunConfig, identities: dict[str, str], accept_changes: bool
) -> RunManifest:
    manifest = read_manifest(run_dir)
    field = "arms" if loaded.multi_arm else "agent.template"
    if manifest.agent != loaded.experiment_name:
        raise ConfigError(
            f"{loaded.path}: field '{field}': the run {run_dir.name} used "
            f"'{manifest.agent}', not '{loaded.experiment_name}'; resume with the same config"
        )
    if manifest.repeats != loaded.config.repeats:
        raise ConfigError(
            f"{loaded.path}: field 'repeats': the run {run_dir.name} used {manifest.repeats}, not "
            f"{loaded.config.repeats}; resume with the same config"
        )
    changes = _resume_changes(manifest, loaded, identities)
    if changes and not accept_changes:
        raise ConfigError(
            f"{loaded.path}: {changes[0]}; resume with the config the run {run_dir.name} was made with, "
            "or pass --accept-changes to resume with this one (recorded in the run's manifest)"
        )
    if changes:
        manifest.accepted_changes += [f"{now()}: {change}" for change in changes]
        manifest.config = _config_record(loaded)
        manifest.tasks = {name: identity for name, identity in manifest.tasks.items() if name in identities}
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


def run_experiment(
    config_path: Path,
    suffix: str | None = None,
    resume_run: Path | None = None,
    resume_latest: bool = False,
    console: Console | None = None,
    device: DeviceInfo | None = None,
    accept_changes: bool = False,
    gpus: str | None = None,
    lease_seconds: float = DEFAULT_LEASE_SECONDS,
    init_only: bool = False,
    display: ProgressDisplay | None = None,
    ray: RayBackend | None = None,
) -> RunOutcome:
    """Validate, run every selected trial (skipping completed ones on resume) and write reports.
    `accept_changes`: resume even where the config changed the task list, scorer or agents.
    `gpus` overrides the config's `gpu_ids`; with several slots (GPUs x `num_parallel`), or one
    on a named GPU, the trials go through the run's queue, one worker process per slot, each
    masked to its GPU. `init_only` (--parallel-init) makes
    the run directory and its queue and stops there, for workers started by hand. `display` shows
    the run's events (default: one plain line per event on `console`, standard error by default).
    `ray`: the workers are Ray actors (aka.parallel.ray_executor), even for one slot."""
    check_step_settings()
    with terminated_as_exit():
        return _run_experiment(
            config_path,
            suffix,
            resume_run,
            resume_latest,
            display or PlainDisplay(console or Console(stderr=True)),
            device,
            accept_changes,
            _Parallel(gpus, lease_seconds, init_only, ray),
        )


@dataclass(frozen=True)
class _Parallel:
    gpus: str | None
    lease_seconds: float
    init_only: bool
    ray: RayBackend | None = None

    def queued(self, slots: list[DeviceSlot]) -> bool:
        """Do the trials go through the queue (several slots, a named GPU, Ray), or the serial loop?"""
        return self.init_only or self.ray is not None or len(slots) > 1 or slots[0].gpu is not None


@dataclass(frozen=True)
class CheckedInputs:
    """The validated inputs of a run: nothing is written before they all pass."""

    loaded: LoadedRunConfig
    scorer: Scorer
    device: DeviceInfo
    model: str
    runnable: list[Task]
    dropped: list[tuple[Task, str]]
    identities: dict[str, str]


def check_inputs(config_path: Path, device: DeviceInfo | None) -> CheckedInputs:
    loaded = load_run_config(config_path)
    scorer = resolve_scorer(loaded.config.scorer, str(loaded.path))
    selected = select_tasks(loaded.tasks_root, loaded.config.tasks, str(loaded.path))
    device = device or detect_device()
    model = resolve_target_model(loaded.config.target_gpu_model, device, str(loaded.path))
    runnable, dropped = gate_tasks(selected, device.arch)
    identities = {task.name: task_identity(task) for task in runnable}
    return CheckedInputs(loaded, scorer, device, model, runnable, dropped, identities)


def _slots(checked: CheckedInputs, gpus: str | None, here: bool = True) -> list[DeviceSlot]:
    config = checked.loaded.config
    if gpus == ALL_GPUS:
        gpus = every_gpu_here(checked.device.count if checked.device.is_gpu else 0, here)
    field = "--gpus" if gpus is not None else f"{checked.loaded.path}: field 'gpu_ids'"
    slots = device_slots(gpus if gpus is not None else config.gpu_ids, config.num_parallel, field)
    count = checked.device.count if checked.device.is_gpu and here else 0  # a cluster's GPUs are counted, not named
    beyond = sorted({s.gpu for s in slots if s.gpu is not None and count and int(s.gpu) >= count})
    if beyond:
        raise ConfigError(f"{field}: GPU {beyond[0]} does not exist here ({count} visible); list ids below {count}")
    return slots


def _run_experiment(
    config_path: Path,
    suffix: str | None,
    resume_run: Path | None,
    resume_latest: bool,
    display: ProgressDisplay,
    device: DeviceInfo | None,
    accept_changes: bool,
    parallel: _Parallel,
) -> RunOutcome:
    check_run_suffix(suffix)
    checked = check_inputs(config_path, device)
    slots = _slots(checked, parallel.gpus, parallel.ray is None or parallel.ray.address is None)
    log_directory = _log_directory(checked.loaded)
    ray = parallel.ray if parallel.queued(slots) and not parallel.init_only else None
    with executors(ray, slots, checked.loaded.config.num_parallel or 1) as make_executor:
        run_dir, resuming = _resolve_run_dir(checked.loaded, checked.model, suffix, resume_run, resume_latest)
        with holding_run(run_dir), display:
            results = _run_locked(
                checked, run_dir, resuming, log_directory, display, accept_changes, slots, parallel, make_executor
            )
    return RunOutcome(run_dir, run_dir / REPORTS_DIR, results)


def _new_manifest(checked: CheckedInputs, run_dir: Path, log_file: Path) -> RunManifest:
    loaded, device, seed = checked.loaded, checked.device, checked.loaded.config.schedule_seed
    return RunManifest(
        run_name=run_dir.name,
        created_at=now(),
        config_path=str(loaded.path),
        config=_config_record(loaded),
        agent=loaded.experiment_name,
        target_gpu_model=checked.model,
        device={
            "kind": device.kind,
            "model": device.model,
            "name": device.name,
            "arch": device.arch,
            "count": device.count,
            "driver": device.driver,
        },
        tasks=checked.identities,
        dropped_tasks={t.name: why for t, why in checked.dropped},
        versions=package_versions(),
        git_revision=_git_revision(),
        log_file=str(log_file),
        arms=[str(a.label) for a in loaded.arms] if loaded.multi_arm else [],
        repeats=loaded.config.repeats,
        schedule_seed=seed if seed is not None else secrets.randbelow(2**31),
    )


@dataclass(frozen=True)
class TrialRunner:
    """Runs one trial of the run (the serial loop's body, and a parallel worker's)."""

    contexts: dict[str | None, RunContext]
    by_name: dict[str, Task]
    identities: dict[str, str]
    repeats: int
    repeated: bool

    @classmethod
    def of(cls, checked: CheckedInputs, run_dir: Path) -> TrialRunner:
        loaded = checked.loaded
        contexts = {
            arm.label: RunContext(run_dir, loaded.for_arm(arm), checked.device, checked.scorer, arm=arm.label)
            for arm in loaded.arms
        }
        return cls(
            contexts,
            {task.name: task for task in checked.runnable},
            checked.identities,
            loaded.config.repeats,
            loaded.multi_arm or loaded.config.repeats > 1,
        )

    def run(
        self, trial: Trial, resuming: bool, display: EventSink, worker: str | None = None
    ) -> tuple[Path, TaskResult]:
        context = replace(
            self.contexts[trial.arm],
            repeat=trial.repeat if self.repeated else None,
            label=trial.workspace_label(self.repeats),
            worker=worker,
        )
        return _run_or_reuse(context, self.by_name[trial.task], self.identities[trial.task], resuming, display)


def _run_locked(
    checked: CheckedInputs,
    run_dir: Path,
    resuming: bool,
    log_directory: Path,
    display: EventSink,
    accept_changes: bool,
    slots: list[DeviceSlot],
    parallel: _Parallel,
    make_executor: ExecutorMaker,
) -> list[TaskResult]:
    """The run, with the run directory held by this process (`aka.run.lock`)."""
    loaded = checked.loaded
    log_file = log_directory / f"{run_dir.parent.name}_{run_dir.name}.log"
    manifest = _check_resumable(run_dir, loaded, checked.identities, accept_changes) if resuming else None
    handler = attach_log(log_file)
    try:
        if manifest is not None:
            manifest.resumed_at.append(now())
            manifest.tasks.update(checked.identities)
        else:
            manifest = _new_manifest(checked, run_dir, log_file)
        write_text_atomic(run_dir / MANIFEST_NAME, manifest.model_dump_json(indent=2))
        trials = _schedule(run_dir, loaded, checked.runnable, manifest)
        display.emit(_run_started(checked, run_dir, trials, len(slots)))  # the events file holds trials only
        for task, reason in checked.dropped:
            logger.info("dropped %s: %s", task.name, reason)
        runner = TrialRunner.of(checked, run_dir)
        if parallel.queued(slots):
            queue = TrialQueue(run_dir)
            queue.fill(trials, parallel.lease_seconds)
            if parallel.init_only:
                return []
            supervise(queue, make_executor(loaded.path, run_dir), slots, display, run_dir / EVENTS_NAME)
            results = queue_results(queue, {t.name: t.family for t in checked.runnable}, runner.repeated)
        else:
            results = [runner.run(trial, resuming, display)[1] for trial in trials]
        write_all_reports(run_dir, loaded, results, report_header(run_dir, checked, manifest))
        display.emit(
            RunEvent(time=now(), event=EventKind.RUN_FINISHED, run_dir=str(run_dir), reports=str(run_dir / REPORTS_DIR))
        )
    finally:
        logging.getLogger("aka").removeHandler(handler)
        handler.close()
    return results


def _run_started(checked: CheckedInputs, run_dir: Path, trials: list[Trial], workers: int) -> RunEvent:
    per_arm = Counter(t.arm for t in trials)
    arms = {str(arm.label): per_arm[arm.label] for arm in checked.loaded.arms} if checked.loaded.multi_arm else None
    return RunEvent(
        time=now(),
        event=EventKind.RUN_STARTED,
        run_dir=str(run_dir),
        agent=checked.loaded.experiment_name,
        device=checked.device.name,
        smoke_test=is_smoke_test(checked.device.name),
        trials=len(trials),
        dropped=len(checked.dropped) or None,
        arm_trials=arms,
        workers=workers,
    )


def report_header(run_dir: Path, checked: CheckedInputs, manifest: RunManifest) -> RunHeader:
    return RunHeader(
        run_dir.name,
        checked.loaded.experiment_name,
        checked.model,
        str(manifest.device.get("name")),
        manifest.created_at,
        checked.loaded.config.scorer,
        checked.loaded.config.report_format,
    )


def _scored_by(ctx: RunContext, workspace: Path, result: TaskResult) -> TaskResult:
    """A kept result under the run's scorer: one scored by another (a scorer change accepted on
    resume) is re-scored, and its file rewritten, so the reports never mix two scorers."""
    name = ctx.config.config.scorer
    if result.scorer == name:
        return result
    score = finite_score(ctx.scorer, result) if result.status not in (TaskStatus.SKIP, TaskStatus.INFRA) else 0.0
    rescored = result.model_copy(update={"scorer": name, "score": score})
    rewrite_result(workspace, rescored)
    return rescored


def _config_record(loaded: LoadedRunConfig) -> dict[str, object]:
    """The resolved config for the manifest; the experiment fields only where they are used, so a
    single-arm run's manifest reads as it always did."""
    record: dict[str, object] = loaded.config.model_dump(mode="json")
    for key in ("agent", "arms", "schedule_seed"):
        if record.get(key) is None:
            record.pop(key, None)
    if record.get("repeats") == 1:
        record.pop("repeats")
    if record.get("report_format") == "aka":
        record.pop("report_format")
    return record


def _schedule(run_dir: Path, loaded: LoadedRunConfig, runnable: list[Task], manifest: RunManifest) -> list[Trial]:
    """The trial order from the manifest's seed; a multi-arm or repeated run records it in schedule.json."""
    arms = [a.label for a in loaded.arms]
    tasks = [task.name for task in runnable]
    if not loaded.multi_arm and loaded.config.repeats == 1:
        return [Trial(task, None, 1) for task in tasks]
    seed = manifest.schedule_seed if manifest.schedule_seed is not None else 0
    trials = interleaved_schedule(tasks, arms, loaded.config.repeats, seed)
    order = [{"task": t.task, "arm": t.arm, "repeat": t.repeat} for t in trials]
    write_text_atomic(run_dir / SCHEDULE_NAME, json.dumps({"seed": seed, "trials": order}, indent=1) + "\n")
    return trials


def write_all_reports(run_dir: Path, loaded: LoadedRunConfig, results: list[TaskResult], header: RunHeader) -> None:
    """The run's reports over every result; a multi-arm run also gets reports/arms/<label>/ per arm
    (`aka.reports.rebuild`, which `aka report` uses too)."""
    write_run_reports(
        run_dir, results, header, [(str(arm.label), arm.agent.name) for arm in loaded.arms] if loaded.multi_arm else []
    )


def _run_or_reuse(
    ctx: RunContext, task: Task, identity: str, resuming: bool, display: EventSink
) -> tuple[Path, TaskResult]:
    """The trial's result: kept from an earlier attempt on resume when its record still holds, else
    run now; its events go to the run's events file and to `display`."""
    events = TrialEvents(
        Broadcast(EventsFile(ctx.run_dir / EVENTS_NAME), display), task.name, ctx.arm, ctx.repeat, ctx.worker
    )
    if resuming:
        done = completed_workspace(ctx.run_dir, task, identity, ctx.label)
        if done is not None:
            kept = _scored_by(ctx, done, read_task_result(done / RESULT_FILE_NAME))
            events.ended(EventKind.TASK_REUSED, kept)
            return done, kept
    events.emit(EventKind.TASK_STARTED)
    logger.info("task %s started", task.name)
    with phases_to(events.phase):
        workspace, result = run_task(ctx, task)
    events.ended(EventKind.TASK_FINISHED, result)
    logger.info("task %s finished in %s: %s", task.name, workspace.name, result.status.value)
    return workspace, result
