"""The `aka` command: run, list tasks, check the machine."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.markup import escape
from rich.table import Column, Table

from aka import __version__
from aka.agents.check import checks_table, run_checks
from aka.authoring.task_tools import check_task, scaffold_task
from aka.config.tasks import default_tasks_root, select_tasks
from aka.console import cli_console
from aka.device import chosen_devices, detect_device
from aka.doctor import agents_table, plan_tasks, tasks_table
from aka.errors import AkaError
from aka.parallel.backends import chosen_backend
from aka.parallel.queue import DEFAULT_LEASE_SECONDS
from aka.parallel.seed_modes import parallel_mode, postprocess_run, run_parallel_worker
from aka.parallel.slurm_cli import slurm_app
from aka.reports.summary import print_summary
from aka.run.disk_space import disk_full, is_disk_full
from aka.run.progress_display import make_display, phases_shown
from aka.run.runner import INFRA_EXIT, package_versions, run_experiment, terminated_as_exit

app = typer.Typer(add_completion=False, no_args_is_help=True, help=__doc__)
tasks_app = typer.Typer(no_args_is_help=True, help="Inspect the task suite.")
task_app = typer.Typer(no_args_is_help=True, help="Write and check one task.")
app.add_typer(tasks_app, name="tasks")
import_app = typer.Typer(no_args_is_help=True, help="Import tasks from other benchmarks.")
app.add_typer(import_app, name="import")
app.add_typer(task_app, name="task")
app.add_typer(slurm_app, name="slurm")
console = cli_console()
err_console = cli_console(stderr=True)


def _version(shown: bool) -> None:
    if shown:
        typer.echo(f"aka {__version__}")
        raise typer.Exit()


@app.callback()
def _main(
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Print the version and exit.")
    ] = False,
) -> None:
    """Run AI coding agents on GPU-kernel tasks and measure their candidates independently."""


def _print_path(path: Path) -> None:
    """A path on a line of its own, never wrapped (people copy it)."""
    console.print(str(path), highlight=False, soft_wrap=True, markup=False)


def fail(error: AkaError) -> typer.Exit:
    err_console.print(f"[bold red]error:[/] {escape(str(error))}", highlight=False, soft_wrap=True)
    return typer.Exit(2)


@app.command()
def run(
    config: Annotated[Path, typer.Argument(help="Run config YAML.")],
    run_suffix: Annotated[Optional[str], typer.Option("--run-suffix", help="Label appended to the run dir.")] = None,
    resume_run: Annotated[Optional[Path], typer.Option("--resume-run", help="Resume this run directory.")] = None,
    resume_latest: Annotated[bool, typer.Option("--resume-latest", help="Resume the newest run.")] = False,
    accept_changes: Annotated[
        bool,
        typer.Option(
            "--accept-changes", help="Resume although the config changed the tasks, scorer or agents (recorded)."
        ),
    ] = False,
    gpus: Annotated[
        Optional[str],
        typer.Option(
            "--gpus",
            help="GPUs for a parallel run, e.g. 0,1,2,3, or all (overrides gpu_ids): one worker per GPU.",
        ),
    ] = None,
    lease_seconds: Annotated[
        float, typer.Option("--lease-seconds", help="A parallel worker silent this long loses its trial.")
    ] = DEFAULT_LEASE_SECONDS,
    parallel_init: Annotated[
        bool, typer.Option("--parallel-init", help="Make the run directory and its trial queue, print its path, stop.")
    ] = False,
    parallel_worker: Annotated[
        bool, typer.Option("--parallel-worker", help="Claim trials of --run-name's queue until it drains.")
    ] = False,
    worker_id: Annotated[
        Optional[str], typer.Option("--worker-id", help="This worker's name (--parallel-worker).")
    ] = None,
    run_name: Annotated[
        Optional[str],
        typer.Option("--run-name", help="The run of --parallel-worker / --postprocess-only (a name or a directory)."),
    ] = None,
    postprocess_only: Annotated[
        bool, typer.Option("--postprocess-only", help="Write --run-name's reports from its queue and workspaces.")
    ] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No live view: a line per finished trial.")] = False,
    json_events: Annotated[
        bool, typer.Option("--json-events", help="The run's events as JSON lines on stdout (the events.jsonl format).")
    ] = False,
    backend: Annotated[
        str,
        typer.Option(
            "--backend", help="Where a parallel run's workers run: local (this machine) or ray (docs/ray.md)."
        ),
    ] = "local",
    address: Annotated[
        Optional[str],
        typer.Option(
            "--address", help="--backend ray: an existing cluster (auto or HOST:PORT); default: start Ray here."
        ),
    ] = None,
    ray_gpu_resource: Annotated[
        Optional[str],
        typer.Option(
            "--ray-gpu-resource", help="--backend ray: the custom resource GPU slots ask for instead of num_gpus."
        ),
    ] = None,
) -> None:
    """Run every selected task with the configured agent, then write the reports."""
    if resume_run is not None and resume_latest:
        raise fail(AkaError("use either --resume-run or --resume-latest, not both"))
    if quiet and json_events:
        raise fail(AkaError("use either --quiet or --json-events, not both"))
    try:
        mode = parallel_mode(parallel_init, parallel_worker, postprocess_only, worker_id, run_name)
        ray = chosen_backend(backend, address, ray_gpu_resource)
        if mode == "worker":
            assert run_name is not None and worker_id is not None
            run_parallel_worker(config, run_name, worker_id, err_console)
            return
        if mode == "postprocess":
            assert run_name is not None
            outcome = postprocess_run(config, run_name, err_console)
        else:
            outcome = run_experiment(
                config,
                run_suffix,
                resume_run,
                resume_latest,
                err_console,
                accept_changes=accept_changes,
                gpus=gpus,
                lease_seconds=lease_seconds,
                init_only=mode == "init",
                ray=ray,
                display=make_display(err_console, console, quiet, json_events),
            )
    except AkaError as exc:
        raise fail(exc) from None
    except OSError as exc:
        if not is_disk_full(exc):
            raise
        raise fail(disk_full(Path(exc.filename or config), str(exc.strerror))) from None
    if mode == "init":
        _print_path(outcome.run_dir)
        return
    if not json_events:
        print_summary(outcome.results, console)
        _print_path(outcome.reports_dir)
    problem = outcome.infra_message()
    if problem is not None:
        err_console.print(f"[red]error:[/] {problem}", highlight=False)
        raise typer.Exit(INFRA_EXIT)


@app.command()
def compare(
    runs: Annotated[list[Path], typer.Argument(help="A multi-arm run directory, or two or more run directories.")],
    arms: Annotated[Optional[str], typer.Option("--arms", help="Arms to compare, control first: A,B[,C...].")] = None,
    output_format: Annotated[str, typer.Option("--format", help="table, markdown or json.")] = "table",
    out: Annotated[
        Optional[Path],
        typer.Option("--out", help="Folder for comparison.{json,md} and the plots (default: RUN/reports/compare)."),
    ] = None,
    failed_speedup: Annotated[float, typer.Option("--failed-speedup", help="A failed attempt's speedup.")] = 1.0,
    target_ratio: Annotated[float, typer.Option("--target-ratio", help="Effect the power analysis plans for.")] = 1.05,
    plots: Annotated[bool, typer.Option("--plots/--no-plots", help="Write the forest and distribution plots.")] = True,
) -> None:
    """Paired statistics of each arm against the first (docs/comparing.md)."""
    from aka.compare.comparison import CompareOptions, compare_arms, default_output_dir
    from aka.compare.render import print_comparison, render_markdown, write_outputs
    from aka.compare.runs import load_arms

    if output_format not in ("table", "markdown", "json"):
        raise fail(AkaError(f"--format {output_format}: use table, markdown or json"))
    try:
        options = CompareOptions(failed_speedup=failed_speedup, target_ratio=target_ratio)
    except ValueError:
        raise fail(AkaError("--failed-speedup must be > 0 and --target-ratio > 1")) from None
    try:
        loaded = load_arms(runs, [a.strip() for a in arms.split(",") if a.strip()] if arms else None)
        comparison = compare_arms(loaded, options)
    except AkaError as exc:
        raise fail(exc) from None
    written, note = write_outputs(comparison, out or default_output_dir(runs), plots)
    if output_format == "json":
        typer.echo(comparison.model_dump_json(indent=2))
    elif output_format == "markdown":
        typer.echo(render_markdown(comparison), nl=False)
    else:
        print_comparison(comparison, console)
    for path in written:
        err_console.print(f"wrote {path}", highlight=False, soft_wrap=True)
    if note:
        err_console.print(note, highlight=False)


@tasks_app.command("list")
def list_tasks(
    selectors: Annotated[Optional[list[str]], typer.Argument(help="Selectors (default: all).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
    tasks_root: Annotated[Optional[Path], typer.Option("--tasks-root", help="Folder of tasks.")] = None,
) -> None:
    """List tasks with their family and editable files."""
    root = (tasks_root or default_tasks_root()).resolve()
    try:
        tasks = select_tasks(root, selectors or ["all"], "aka tasks list")
    except AkaError as exc:
        raise fail(exc) from None
    rows = [
        {
            "name": t.name,
            "task_type": t.family,
            "source_file_path": t.config.source_file_path,
            "target_kernel_functions": t.config.target_kernel_functions,
            "baseline": t.config.baseline_source.value,
            "platform_status": t.config.platform_support.status,
            "format": t.original.format.value if t.original else "aka",
            "problem": t.problem,
            "warnings": list(t.original.warnings) if t.original else [],
        }
        for t in tasks
    ]
    if as_json:
        typer.echo(json.dumps(rows, indent=2))
        return
    longest = max((len(task.name) for task in tasks), default=4)  # names are selectors: never cut
    table = Table(Column("task", no_wrap=True, min_width=longest), "type", "editable files", "baseline", "format")
    for task, row in zip(tasks, rows, strict=True):
        editable = ", ".join(task.config.source_file_path)
        editable = f"[red]cannot be loaded: {task.problem}[/]" if task.problem else editable
        table.add_row(task.name, task.family, editable, task.config.baseline_source.value, str(row["format"]))
    console.print(table)


@task_app.command("new")
def new_task(
    name: Annotated[str, typer.Argument(help="FAMILY/SUITE/NAME, e.g. triton2triton/mine/scale")],
    tasks_root: Annotated[Optional[Path], typer.Option("--tasks-root", help="Folder of tasks.")] = None,
) -> None:
    """Write a working scaffold (config, kernel, harness, held-out cases) to start a task from."""
    try:
        path = scaffold_task((tasks_root or default_tasks_root()).resolve(), name)
    except AkaError as exc:
        raise fail(exc) from None
    console.print(f"created {path}; next: aka task check {path}")


@task_app.command("check")
def check_task_command(
    path: Annotated[Path, typer.Argument(help="The task folder.")],
    tasks_root: Annotated[Optional[Path], typer.Option("--tasks-root", help="Folder the task is under.")] = None,
    solution: Annotated[Optional[Path], typer.Option("--solution", help="A solution's editable files.")] = None,
) -> None:
    """Static checks, then the real evaluator on this machine (CPU: the ci cases under Triton's interpreter)."""
    task_dir = path.resolve()
    root = (tasks_root or _guess_root(task_dir)).resolve()
    with phases_shown(err_console, f"checking {task_dir.name}"):
        checks = check_task(root, task_dir, detect_device(), solution.resolve() if solution else None)
    table = Table("check", "ok", "detail")
    for check in checks:
        table.add_row(check.name, "[green]yes[/]" if check.ok else "[red]no[/]", check.detail)
    console.print(table)
    if not all(check.ok for check in checks):
        raise typer.Exit(1)


def _guess_root(task_dir: Path) -> Path:
    """The task's tasks root: the folder above FAMILY/SUITE/NAME."""
    return task_dir.parents[2] if len(task_dir.parents) > 2 else task_dir.parent


@app.command("validate")
def validate_command(
    selectors: Annotated[list[str], typer.Argument(help="Tasks: all, a family, a suite or one task.")],
    tasks_root: Annotated[Optional[Path], typer.Option("--tasks-root", help="Folder of tasks.")] = None,
    output: Annotated[Optional[Path], typer.Option("--output", help="Where the reports go.")] = None,
    mutants: Annotated[bool, typer.Option("--mutants/--no-mutants", help="Run the mutation tests.")] = True,
    only: Annotated[Optional[list[str]], typer.Option("--mutant", help="Only this mutant (repeatable).")] = None,
    solutions: Annotated[Optional[Path], typer.Option("--solutions", help="Solutions of skeleton tasks.")] = None,
    resume: Annotated[
        bool, typer.Option("--resume", help="Keep the reports an earlier validation on this device left in --output.")
    ] = False,
    parallel: Annotated[
        int,
        typer.Option(
            "--parallel", min=1, help="Tasks validated at a time (timed steps still take the GPU one at a time)."
        ),
    ] = 1,
    mutants_at_once: Annotated[
        int,
        typer.Option(
            "--mutants-at-once",
            min=0,
            help="A task's mutants evaluated at a time (0: with --parallel 1, two per four cores, up to 4; else 1).",
        ),
    ] = 0,
) -> None:
    """Prove tasks sound: deterministic checks and mutants of the baseline that must fail (docs/validation.md)."""
    from aka.validation.mutants import MUTANT_NAMES
    from aka.validation.validate import ValidationOptions, mutants_at_once_default, output_default, validate_tasks

    root = (tasks_root or default_tasks_root()).resolve()
    unknown = sorted(set(only or []) - set(MUTANT_NAMES))
    if unknown:
        raise fail(AkaError(f"--mutant {', '.join(unknown)}: not a mutant; choose from {', '.join(MUTANT_NAMES)}"))
    guessed = root.parent / "solutions" / "examples"
    options = ValidationOptions(
        mutants=(only or MUTANT_NAMES) if mutants else (),
        solutions=(solutions or (guessed if guessed.is_dir() else None)),
        mutants_at_once=mutants_at_once or mutants_at_once_default(parallel),
    )
    folder = (output or output_default()).resolve()
    try:
        with terminated_as_exit():  # SIGTERM unwinds: step processes killed, scratch folders removed
            summary = validate_tasks(
                root,
                selectors,
                folder,
                detect_device(),
                options,
                lambda line: err_console.print(line, highlight=False, markup=False),
                resume=resume,
                parallel=parallel,
            )
    except AkaError as exc:
        raise fail(exc) from None
    table = Table("task", "status", "mutation score", "failed checks / surviving mutants")
    for row in summary.tasks:
        score = "n/a" if row.mutation_score is None else f"{row.mutation_score:.0%}"
        table.add_row(
            row.task_name, row.overall_status.value, score, ", ".join(row.failed_checks + row.surviving_mutants)
        )
    console.print(table)
    _print_path(folder / "validation_summary.yaml")
    if summary.overall_status.value == "FAIL":
        raise typer.Exit(1)


@import_app.command("kernelbench")
def import_kernelbench_cmd(
    directory: Annotated[Path, typer.Argument(help="Folder of KernelBench problem files (*.py).")],
    family: Annotated[str, typer.Option("--family", help="torch2triton or torch2cuda.")],
    level: Annotated[Optional[int], typer.Option("--level", help="Read DIR/level{N}/ if it exists.")] = None,
    out: Annotated[Optional[Path], typer.Option("--out", help="Tasks root to write into.")] = None,
    suite: Annotated[Optional[str], typer.Option("--suite", help="Suite folder name.")] = None,
    tolerance: Annotated[
        Optional[list[str]],
        typer.Option(
            "--tolerance", help="atol = rtol for every dtype (1e-3) or one (float32=1e-3); default KernelBench's."
        ),
    ] = None,
    probe: Annotated[
        bool, typer.Option("--probe/--no-probe", help="Check each reference: finite, not passed by zeros.")
    ] = True,
    probe_device: Annotated[
        str, typer.Option("--probe-device", help="cpu, or cuda where level 1's inputs outgrow the host.")
    ] = "cpu",
    probe_jobs: Annotated[int, typer.Option("--probe-jobs", min=1, help="References probed at once.")] = 1,
) -> None:
    """Turn KernelBench problems into task folders (docs/kernelbench-import.md)."""
    from aka.authoring.kernelbench import import_kernelbench, parse_tolerances

    try:
        result = import_kernelbench(
            directory,
            family,
            out or default_tasks_root(),
            level,
            suite,
            parse_tolerances(tolerance or []),
            probe,
            probe_device=probe_device,
            probe_jobs=probe_jobs,
            on_probe=lambda name, verdict: err_console.print(
                f"probed {name}: {verdict.status} ({verdict.seconds:.0f} s)", highlight=False, soft_wrap=True
            ),
        )
    except AkaError as exc:
        raise fail(exc) from None
    for line in result.skipped:
        err_console.print(line, highlight=False, soft_wrap=True)
    for name, verdict in result.probes.items():
        if verdict.status != "PASS":
            found = "; ".join(c.message for c in verdict.checks if c.status != "PASS")
            err_console.print(f"{name}: {verdict.status}: {found}", highlight=False, soft_wrap=True)
    console.print(f"{len(result.created)} tasks written, {len(result.skipped)} files skipped", highlight=False)
    if result.report is not None:
        counts = {s: sum(p.status == s for p in result.probes.values()) for s in ("PASS", "WARN", "FAIL")}
        console.print(
            f"references: {counts['PASS']} PASS, {counts['WARN']} WARN, {counts['FAIL']} FAIL; report: {result.report}",
            highlight=False,
            soft_wrap=True,
        )


@app.command("heldout")
def heldout_command(
    run_dir: Annotated[Path, typer.Argument(help="A finished run directory.")],
    tasks_root: Annotated[Optional[Path], typer.Option("--tasks-root", help="Where the run's tasks are.")] = None,
) -> None:
    """Evaluate each accepted candidate and its baseline on held-out cases (docs/heldout.md)."""
    from aka.heldout.post_run import heldout_run

    try:
        outcome = heldout_run(run_dir, tasks_root)
    except AkaError as exc:
        raise fail(exc) from None
    for record in outcome.records:
        verdict = record.outcome.value if record.outcome else f"not evaluated: {record.message}"
        console.print(f"{record.task_name} ({record.heldout_source}): {verdict}", highlight=False, soft_wrap=True)
    _print_path(outcome.summary_path)


@app.command("report")
def report_command(run_dir: Annotated[Path, typer.Argument(help="A run directory (run_<timestamp>...).")]) -> None:
    """Write the run's reports again from its directory alone (its results and manifest)."""
    from aka.reports.rebuild import counted_results, rereport

    try:
        folder = rereport(run_dir)
    except AkaError as exc:
        raise fail(exc) from None
    print_summary(counted_results(run_dir.resolve()), console)
    _print_path(folder)


@app.command("dashboard")
def dashboard_command(
    runs: Annotated[Optional[list[Path]], typer.Argument(help="Run directories (run_<timestamp>...).")] = None,
    out: Annotated[Path, typer.Option("--out", help="Folder to write the site into.")] = Path("dashboard"),
    serve: Annotated[bool, typer.Option("--serve", help="Then serve it on 127.0.0.1 until Ctrl-C.")] = False,
    port: Annotated[int, typer.Option("--port", help="Port of --serve (0: any free one).")] = 8766,
    single_file: Annotated[bool, typer.Option("--single-file", help="Inline plotly.js and the script.")] = False,
) -> None:
    """A static site of the runs (leaderboard, heatmap, task matrix with per-case drill-down, A/B,
    held-out, validation) that opens from file://; --serve serves it (without RUNs: the site in --out)."""
    from aka.dashboard.serve import serve_site
    from aka.dashboard.site import INDEX_NAME, build_site, built_run_dirs

    try:
        if runs:
            index = build_site(runs, out, single_file)
            _print_path(index.resolve())
        elif not serve:
            raise AkaError("aka dashboard: pass run directories, or --serve to serve the site already in --out")
        shown = [r.resolve() for r in runs] if runs else built_run_dirs(out)
    except AkaError as exc:
        raise fail(exc) from None
    if serve:
        if not (out / INDEX_NAME).is_file():
            raise fail(
                AkaError(f"--out {out}: no {INDEX_NAME} to serve; build it with `aka dashboard RUN... --out {out}`")
            )
        serve_site(
            out,
            shown,
            port,
            lambda url: console.print(f"serving {url} (Ctrl-C stops)", highlight=False, soft_wrap=True, markup=False),
        )


@app.command("score")
def score_command(
    run_dir: Annotated[Path, typer.Argument(help="A run directory (run_<timestamp>...).")],
    scorer: Annotated[str, typer.Option("--scorer", help="A registered scorer or module:function.")],
) -> None:
    """Re-score the run's results with another scorer: reports in RUN/reports/scores/<scorer>/."""
    from aka.reports.rebuild import rescore

    try:
        folder, results = rescore(run_dir, scorer)
    except AkaError as exc:
        raise fail(exc) from None
    console.print(
        f"{len(results)} result(s), total score {sum(r.score for r in results):.1f}: {folder}", highlight=False
    )


@app.command("serve")
def serve_command(
    tasks_root: Annotated[Optional[Path], typer.Option("--tasks-root", help="Tasks to score (default tasks/).")] = None,
    cache_dir: Annotated[Path, typer.Option("--cache-dir", help="Frozen baselines and cached results.")] = Path(
        "~/.cache/aka-rl"
    ),
    host: Annotated[str, typer.Option("--host", help="Address to bind (beyond 127.0.0.1 only with a token).")] = (
        "127.0.0.1"
    ),
    port: Annotated[int, typer.Option("--port")] = 8765,
    token_env: Annotated[
        Optional[str],
        typer.Option("--token-env", help="Environment variable holding the bearer token clients must send."),
    ] = None,
    max_queue: Annotated[int, typer.Option("--max-queue", help="Waiting candidates before 429.")] = 256,
    max_concurrent: Annotated[
        int, typer.Option("--max-concurrent", help="Evaluations in flight per device (0: 4 on a GPU, 1 on the CPU).")
    ] = 0,
    gpus: Annotated[
        Optional[str],
        typer.Option("--gpus", help="GPUs to evaluate on, e.g. 0,1 (default: every visible GPU, one slot group each)."),
    ] = None,
    request_timeout: Annotated[float, typer.Option("--request-timeout", help="Seconds a job may take.")] = 1800.0,
    eval_timeout: Annotated[
        float,
        typer.Option(
            "--eval-timeout",
            help="Seconds a job's evaluation may run, its waits for the device not counted (a hung candidate's cap; "
            "while it hangs in a check it holds up its GPU's timing, so keep it near what honest candidates need).",
        ),
    ] = 600.0,
    scorer: Annotated[str, typer.Option("--scorer")] = "default",
    log_dir: Annotated[
        Optional[Path],
        typer.Option("--log-dir", help="Keep each evaluation's log here (what ran, its turns on the device)."),
    ] = None,
    preset: Annotated[
        str,
        typer.Option(
            "--preset", help="The reward preset /get_reward answers with (score, log_speedup, kevin, kernelgym)."
        ),
    ] = "score",
) -> None:
    """Serve rewards over HTTP: submit/poll/result/batch and OpenRLHF's /get_reward (docs/rl.md)."""
    import os

    import uvicorn

    from aka.rl.evaluator import KernelEvaluator
    from aka.rl.presets import check_preset
    from aka.rl.server import check_binding, make_app

    token = os.environ.get(token_env) if token_env else None
    if token_env and not token:
        raise fail(AkaError(f"--token-env {token_env}: the variable is not set (export it with the token)"))
    try:
        check_binding(host, token)
        check_preset(preset)
        devices = chosen_devices(gpus, "--gpus")
        per_device = max_concurrent or (4 if devices[0].is_gpu else 1)
        evaluator = KernelEvaluator(
            tasks_root or default_tasks_root(),
            cache_dir,
            scorer=scorer,
            max_concurrent=per_device,
            devices=devices,
            log_dir=log_dir,
        )
    except AkaError as exc:
        raise fail(exc) from None
    app_ = make_app(
        evaluator,
        token=token,
        max_queue=max_queue,
        workers=per_device * len(devices),
        request_timeout=request_timeout,
        eval_timeout=eval_timeout,
        preset=preset,
    )
    try:
        uvicorn.run(app_, host=host, port=port, log_level="info")
    finally:
        evaluator.close()


@app.command("export")
def export_command(
    runs: Annotated[list[Path], typer.Argument(help="Run directories (run_<timestamp>...).")],
    format_: Annotated[str, typer.Option("--format", help="jsonl or parquet.")] = "jsonl",
    output: Annotated[Optional[Path], typer.Option("--output", "-o", help="File to write (jsonl: stdout).")] = None,
) -> None:
    """One row per episode of the runs (task, agent, prompt hash, reward components, tokens, times)."""
    from aka.reports.export import ExportFormat, export_runs

    if format_ not in {f.value for f in ExportFormat}:
        raise fail(AkaError(f"--format {format_}: use jsonl or parquet"))
    try:
        text = export_runs(runs, ExportFormat(format_), output)
    except AkaError as exc:
        raise fail(exc) from None
    if text is not None:
        typer.echo(text, nl=False)


def _tool_version(command: list[str]) -> str:
    if not shutil.which(command[0]):
        return "not found"
    try:
        out = subprocess.run(command, capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"error: {exc}"
    lines = [line for line in out.stdout.splitlines() if line.strip()]
    return lines[-1].strip() if lines else f"exit {out.returncode}"


@app.command()
def doctor(tasks_root: Annotated[Optional[Path], typer.Option("--tasks-root")] = None) -> None:
    """Show the device, toolchain versions, which tasks run or are skipped here, and which agents are ready."""
    device = detect_device()
    table = Table("check", "value", show_header=False)
    table.add_row("device", f"{device.name} ({device.kind}, model {device.model})")
    table.add_row("architecture", device.arch or "cpu: Triton kernels run under TRITON_INTERPRET=1")
    table.add_row("gpu count", str(device.count))
    table.add_row("driver", device.driver or "-")
    for name, value in package_versions().items():
        table.add_row(name, value)
    table.add_row("python executable", sys.executable)
    table.add_row("nvcc", _tool_version(["nvcc", "--version"]))
    root = (tasks_root or default_tasks_root()).resolve()
    try:
        plan = plan_tasks(select_tasks(root, ["all"], "aka doctor"), device)
        broken = sum(1 for task in plan.run if task.problem)
        table.add_row(
            "tasks",
            f"{len(plan.run) - broken} run here, {len(plan.skipped)} skipped here, "
            f"{len(plan.dropped)} dropped, {broken} cannot be loaded ({root})",
        )
        triton = [(task.name, why) for task, why in plan.dropped if why.startswith("needs Triton")]
        table.add_row(
            "triton needs",
            f"{len(triton)} task(s) need another Triton: {triton[0][1]}; e.g. "
            f"{', '.join(name for name, _ in triton[:3])}"
            if triton
            else "every task runs on this Triton",
        )
    except AkaError as exc:
        plan = None
        table.add_row("tasks", f"problem: {exc}")
    console.print(table)
    if plan is not None:
        console.print(tasks_table(plan, device))
    console.print(agents_table(run_checks("all", False, None)))


@app.command("check-agents")
def check_agents(
    agents: Annotated[str, typer.Option("--agents", help="Comma-separated agent names, or 'all'.")] = "all",
    live: Annotated[bool, typer.Option("--live", help="Also make a one-turn call to each CLI agent.")] = False,
    config: Annotated[Optional[Path], typer.Option("--config", help="Check this run config's agent.")] = None,
) -> None:
    """Per agent: installed binary, version, credentials or endpoint, and (--live) a one-turn call."""

    try:
        checks = run_checks(agents, live, config)
    except AkaError as exc:
        raise fail(exc) from None
    console.print(checks_table(checks))
    if not all(check.ready for check in checks):
        raise typer.Exit(1)


def main() -> None:
    app()


if __name__ == "__main__":
    main()
