"""`aka slurm submit|status|cancel`: the Slurm backend's commands (aka.parallel.slurm)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer
from pydantic import ValidationError
from rich.table import Table

from aka.console import cli_console
from aka.errors import AkaError
from aka.parallel.queue import DEFAULT_LEASE_SECONDS, TrialQueue
from aka.parallel.slurm import (
    SLURM_DIR,
    SlurmError,
    SlurmRecord,
    SlurmRequest,
    cancel,
    run_interactive,
    status,
    submit,
    wait_until_ended,
)

slurm_app = typer.Typer(no_args_is_help=True, help="Run on a Slurm cluster: one worker per GPU (docs/slurm.md).")
console = cli_console()
err_console = cli_console(stderr=True)


def _fail(error: AkaError) -> typer.Exit:
    err_console.print(f"[bold red]error:[/] {error}", highlight=False, soft_wrap=True)
    return typer.Exit(2)


def _line(text: str) -> None:
    console.print(text, highlight=False, soft_wrap=True, markup=False)


@slurm_app.command("submit")
def submit_command(
    config: Annotated[Path, typer.Argument(help="Run config YAML.")],
    nodes: Annotated[int, typer.Option("--nodes", help="Nodes to allocate.")] = 1,
    gpus_per_node: Annotated[int, typer.Option("--gpus-per-node", help="GPUs per node: one worker each.")] = 1,
    partition: Annotated[Optional[str], typer.Option("--partition", help="Slurm partition.")] = None,
    time_limit: Annotated[
        Optional[str], typer.Option("--time", help="Time limit (Slurm's format, e.g. 4:00:00).")
    ] = None,
    account: Annotated[Optional[str], typer.Option("--account", help="Slurm account.")] = None,
    qos: Annotated[Optional[str], typer.Option("--qos", help="Slurm QOS.")] = None,
    exclusive: Annotated[bool, typer.Option("--exclusive", help="Whole nodes for the workers.")] = False,
    cpus_per_worker: Annotated[int, typer.Option("--cpus-per-worker", help="CPUs per worker task.")] = 1,
    lease_seconds: Annotated[
        float, typer.Option("--lease-seconds", help="A worker silent this long loses its trial.")
    ] = DEFAULT_LEASE_SECONDS,
    run_suffix: Annotated[Optional[str], typer.Option("--run-suffix", help="Label appended to the run dir.")] = None,
    resume_run: Annotated[
        Optional[Path],
        typer.Option("--resume-run", help="Submit this run again (cancelled, timed out): finished trials are reused."),
    ] = None,
    wait: Annotated[bool, typer.Option("--wait", help="Return when the report job ended; print the summary.")] = False,
    interactive: Annotated[
        bool, typer.Option("--interactive", help="Run the workers here: in this allocation, or in one salloc makes.")
    ] = False,
) -> None:
    """Make the run and its queue, submit the workers (one per GPU) and the report job after them."""
    try:
        request = SlurmRequest(
            nodes=nodes,
            gpus_per_node=gpus_per_node,
            cpus_per_worker=cpus_per_worker,
            partition=partition,
            time=time_limit,
            account=account,
            qos=qos,
            exclusive=exclusive,
        )
    except ValidationError as exc:
        first = exc.errors()[0]
        raise _fail(AkaError(f"--{str(first['loc'][0]).replace('_', '-')}: {first['msg']}")) from None
    try:
        if interactive:
            record = run_interactive(config, request, lease_seconds, run_suffix, resume_run)
            _finish_interactive(record)
            return
        record = submit(config, request, lease_seconds, run_suffix, resume_run)
    except AkaError as exc:
        raise _fail(exc) from None
    _line(record.run_dir)
    workers, report = record.ids("workers")[-1], record.ids("postprocess")[-1]
    err_console.print(
        f"submitted workers as job {workers} ({request.workers} worker(s)) and the reports as job "
        f"{report}; watch with `aka slurm status {record.run_dir}`",
        highlight=False,
        soft_wrap=True,
    )
    if wait:
        _wait(record)


def _wait(record: SlurmRecord) -> None:
    run_dir = Path(record.run_dir)
    queue, shown = TrialQueue(run_dir), [""]

    def show(states: dict[str, str]) -> None:
        """A line whenever a job's state or the trials' counts changed."""
        counts = queue.counts()
        line = (
            ", ".join(f"job {job} {state}" for job, state in states.items())
            + "; trials "
            + ", ".join(f"{state} {count}" for state, count in counts.items())
        )
        if line != shown[0]:
            err_console.print(line, highlight=False, soft_wrap=True)
            shown[0] = line

    states = wait_until_ended([record.ids("workers")[-1], record.ids("postprocess")[-1]], progress=show)
    report = states[record.ids("postprocess")[-1]]
    if report != "COMPLETED":
        raise _fail(
            SlurmError(
                f"the report job ended {report}; see {run_dir / SLURM_DIR}/postprocess-*.out and "
                f"`aka slurm status {run_dir}`"
            )
        )
    _summarise(run_dir)


def _finish_interactive(record: SlurmRecord) -> None:
    from aka.parallel.seed_modes import postprocess_run

    try:
        postprocess_run(Path(record.config), record.run_dir, err_console)
    except AkaError as exc:
        raise _fail(exc) from None
    _summarise(Path(record.run_dir))


def _summarise(run_dir: Path) -> None:
    from aka.reports.rebuild import counted_results
    from aka.reports.summary import print_summary
    from aka.run.runner import INFRA_EXIT, RunOutcome

    results = counted_results(run_dir)
    print_summary(results, console)
    _line(str(run_dir / "reports"))
    problem = RunOutcome(run_dir, run_dir / "reports", results).infra_message()
    if problem is not None:
        err_console.print(f"[red]error:[/] {problem}", highlight=False)
        raise typer.Exit(INFRA_EXIT)


@slurm_app.command("status")
def status_command(
    run_dir: Annotated[Path, typer.Argument(help="A run directory made by `aka slurm submit`.")],
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """The run's Slurm jobs (squeue, else sacct) and its trials per queue state."""
    try:
        found = status(run_dir)
    except AkaError as exc:
        raise _fail(exc) from None
    if as_json:
        typer.echo(found.model_dump_json(indent=2))
        return
    table = Table("job", "role", "state")
    for job in found.jobs:
        table.add_row(job.job_id, job.role, job.state)
    console.print(table)
    _line("trials: " + ", ".join(f"{state} {count}" for state, count in found.trials.items()))
    for line in found.running:
        _line(f"running: {line}")
    _line(f"reports: {Path(found.run_dir) / 'reports'}" if found.reports else "reports: not written yet")


@slurm_app.command("cancel")
def cancel_command(run_dir: Annotated[Path, typer.Argument(help="A run made by `aka slurm submit`.")]) -> None:
    """scancel the run's jobs and wait for them to end; the run stays resumable."""
    try:
        cancelled = cancel(run_dir)
        record_config = _config_of(run_dir)
    except AkaError as exc:
        raise _fail(exc) from None
    _line(f"cancelled job(s) {', '.join(cancelled)}" if cancelled else "no job of the run was active")
    _line(
        f"resume with: aka run {record_config} --resume-run {run_dir.resolve()} (here), or "
        f"aka slurm submit {record_config} --resume-run {run_dir.resolve()} (on Slurm)"
    )


def _config_of(run_dir: Path) -> str:
    from aka.parallel.slurm import read_record

    return read_record(run_dir.resolve()).config
