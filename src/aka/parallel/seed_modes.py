"""The seed's manual parallel modes on the run's queue: which mode the flags ask for, a worker
(`--parallel-worker`) and the reports of a drained queue (`--postprocess-only`). `--parallel-init`
is `runner.run_experiment(init_only=True)`."""

from __future__ import annotations

import logging
from pathlib import Path

from rich.console import Console

from aka.errors import ConfigError
from aka.parallel.pool import queue_results, work_queue
from aka.parallel.queue import TrialQueue, WorkerIdentity
from aka.run.layout import MANIFEST_NAME, REPORTS_DIR, experiment_dir
from aka.run.lock import holding_run
from aka.run.progress_display import PlainDisplay
from aka.run.runner import (
    CheckedInputs,
    RunManifest,
    RunOutcome,
    TrialRunner,
    attach_log,
    check_inputs,
    read_manifest,
    report_header,
    terminated_as_exit,
    write_all_reports,
)


def parallel_mode(init: bool, worker: bool, postprocess: bool, worker_id: str | None, run_name: str | None) -> str:
    """Which of the seed's parallel modes the flags ask for ("run" when none): one at a time, each
    with the names it needs."""
    chosen = [name for name, on in (("init", init), ("worker", worker), ("postprocess", postprocess)) if on]
    if len(chosen) > 1:
        raise ConfigError("use one of --parallel-init, --parallel-worker and --postprocess-only")
    mode = chosen[0] if chosen else "run"
    if mode == "worker" and (worker_id is None or run_name is None):
        raise ConfigError("--parallel-worker needs --worker-id ID and --run-name RUN")
    if mode == "postprocess" and run_name is None:
        raise ConfigError("--postprocess-only needs --run-name RUN")
    if mode in ("init", "run") and run_name is not None:
        raise ConfigError("--run-name goes with --parallel-worker or --postprocess-only; resume with --resume-run")
    return mode


def _named_run(checked: CheckedInputs, run_name: str) -> tuple[Path, RunManifest, TrialQueue]:
    """The run of `--run-name` (a run directory, or a run's name in the config's experiment folder)
    with its manifest and queue; refused when it is another experiment's or has no queue."""
    given = Path(run_name)
    loaded = checked.loaded
    experiment = experiment_dir(loaded.config.workspace_directory_prefix, checked.model, loaded.experiment_name)
    run_dir = (given if given.is_absolute() or given.exists() else experiment / given).resolve()
    if not (run_dir / MANIFEST_NAME).is_file():
        raise ConfigError(
            f"--run-name {run_name}: not a run directory (no {MANIFEST_NAME}); make one with --parallel-init"
        )
    manifest = read_manifest(run_dir)
    if manifest.agent != loaded.experiment_name:
        raise ConfigError(
            f"--run-name {run_name}: the run used '{manifest.agent}', not '{loaded.experiment_name}'; "
            "use the config it was made with"
        )
    queue = TrialQueue(run_dir)
    if not queue.exists:
        raise ConfigError(f"--run-name {run_name}: the run has no parallel queue; make one with --parallel-init")
    return run_dir, manifest, queue


def run_parallel_worker(config_path: Path, run_name: str, worker_id: str, console: Console | None = None) -> int:
    """A worker (--parallel-worker): claim trials from the run's queue until it drains. It holds
    no run lock (the parent `aka run`, or the person who ran --parallel-init, owns the run); the
    queue's lock and leases keep workers apart. Returns how many trials it reported."""
    with terminated_as_exit():
        console = console or Console(stderr=True)
        checked = check_inputs(config_path, None)
        run_dir, manifest, queue = _named_run(checked, run_name)
        queued = {entry.task for entries in queue.entries().values() for entry in entries}
        missing = sorted(queued - set(checked.identities))
        if missing:
            raise ConfigError(
                f"{checked.loaded.path}: the run's queue has task {missing[0]}, which this config "
                "does not select here; use the config the run was made with"
            )
        runner = TrialRunner.of(checked, run_dir)
        display = PlainDisplay(console)
        handler = attach_log(Path(manifest.log_file))
        try:
            return work_queue(
                queue,
                WorkerIdentity.this_process(worker_id),
                lambda trial, worker: runner.run(trial, True, display, worker),
            )
        finally:
            logging.getLogger("aka").removeHandler(handler)
            handler.close()


def postprocess_run(config_path: Path, run_name: str, console: Console | None = None) -> RunOutcome:
    """--postprocess-only: the reports of a parallel run from its queue and workspaces alone."""
    console = console or Console(stderr=True)
    checked = check_inputs(config_path, None)
    run_dir, manifest, queue = _named_run(checked, run_name)
    with holding_run(run_dir):
        entries = queue.entries()
        left = len(entries["pending"]) + len(entries["running"])
        if left:
            raise ConfigError(
                f"--run-name {run_name}: {left} trial(s) are still pending or running; wait for the "
                f"workers, or resume the run with `aka run CONFIG --resume-run {run_dir}`"
            )
        repeated = checked.loaded.multi_arm or checked.loaded.config.repeats > 1
        results = queue_results(queue, {t.name: t.family for t in checked.runnable}, repeated)
        write_all_reports(run_dir, checked.loaded, results, report_header(run_dir, checked, manifest))
    console.print(f"[bold]reports[/] {run_dir / REPORTS_DIR}")
    return RunOutcome(run_dir, run_dir / REPORTS_DIR, results)
