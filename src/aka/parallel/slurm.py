"""The Slurm backend: the run's workers as one `srun` step of an `sbatch` job, one task per GPU.

Slurm allocates the GPUs and masks each task to its own (`--gpus-per-task=1` sets
CUDA_VISIBLE_DEVICES per task); each task is `aka run CONFIG --parallel-worker`, which claims
trials from the run's leased queue (aka.parallel.queue) like a local worker. The reports are a
second job (`--postprocess-only`) that depends on the first (`afterany`). The worker job is
`--requeue`: a preempted or requeued job starts its workers again, and they reclaim the trials of
the workers it killed (dead pid, or no heartbeat) through the leases, so each trial counts once.

Everything Slurm is asked is recorded under `RUN/slurm/` (the two scripts, `jobs.json`, the jobs'
output), so `aka slurm status RUN` and `aka slurm cancel RUN` need nothing but the run directory.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from aka.errors import AkaError
from aka.parallel.queue import DEFAULT_LEASE_SECONDS, QUEUE_DIR, WORKERS_DIR, TrialQueue
from aka.results.task_result import write_text_atomic

SLURM_DIR = "slurm"
RECORD_NAME = "jobs.json"
WORKER_SCRIPT = "workers.sbatch"
REPORT_SCRIPT = "postprocess.sbatch"
WAIT_POLL_SECONDS = 2.0
CANCEL_WAIT_SECONDS = 120.0
# States in which a job still holds, or waits for, its allocation (squeue's long names).
ACTIVE_STATES = frozenset(
    {
        "PENDING",
        "RUNNING",
        "CONFIGURING",
        "COMPLETING",
        "REQUEUED",
        "REQUEUE_FED",
        "REQUEUE_HOLD",
        "RESIZING",
        "SUSPENDED",
        "STOPPED",
        "SIGNALING",
        "STAGE_OUT",
        "RESV_DEL_HOLD",
        "SPECIAL_EXIT",
        "POWER_UP_NODE",
    }
)
GONE = "GONE"  # neither squeue nor sacct knows the job any more


class SlurmError(AkaError):
    """Slurm is missing, refused a request, or a run has no Slurm jobs."""


class SlurmRequest(BaseModel):
    """What the worker job asks Slurm for: `nodes` x `gpus_per_node` workers, one GPU each."""

    model_config = ConfigDict(extra="forbid")

    nodes: int = Field(ge=1)
    gpus_per_node: int = Field(ge=1)
    cpus_per_worker: int = Field(default=1, ge=1)
    partition: str | None = None
    time: str | None = None
    account: str | None = None
    qos: str | None = None
    exclusive: bool = False

    @property
    def workers(self) -> int:
        return self.nodes * self.gpus_per_node

    def placement_flags(self) -> list[str]:
        """Where the job may run (shared by both jobs): partition, account, QOS, time limit."""
        named = (
            ("--partition", self.partition),
            ("--account", self.account),
            ("--qos", self.qos),
            ("--time", self.time),
        )
        return [f"{flag}={value}" for flag, value in named if value]

    def allocation_flags(self) -> list[str]:
        """The worker job's allocation, for sbatch and salloc alike."""
        return [
            f"--nodes={self.nodes}",
            f"--ntasks-per-node={self.gpus_per_node}",
            f"--gpus-per-node={self.gpus_per_node}",
            f"--cpus-per-task={self.cpus_per_worker}",
            *self.placement_flags(),
            *(["--exclusive"] if self.exclusive else []),
        ]


class SlurmJob(BaseModel):
    model_config = ConfigDict(extra="forbid")

    role: str  # "workers", "postprocess" or "interactive"
    job_id: str
    submitted_at: str


class SlurmRecord(BaseModel):
    """RUN/slurm/jobs.json: the jobs of a run, newest last."""

    model_config = ConfigDict(extra="forbid")

    schema_version: int = 1
    config: str
    run_dir: str
    request: SlurmRequest
    jobs: list[SlurmJob] = Field(default_factory=list)

    def ids(self, role: str | None = None) -> list[str]:
        return [job.job_id for job in self.jobs if role is None or job.role == role]


def require_tool(name: str) -> str:
    found = shutil.which(name)
    if found is None:
        raise SlurmError(
            f"{name} not found on PATH: run this on a Slurm login node (or a node of an allocation), "
            "or run locally with `aka run CONFIG --gpus 0,1,...`"
        )
    return found


def _slurm(argv: list[str], what: str) -> str:
    """Run a Slurm command; its last error line, as one line, when it fails."""
    require_tool(argv[0])
    done = subprocess.run(argv, capture_output=True, text=True, check=False, stdin=subprocess.DEVNULL)
    if done.returncode != 0:
        lines = [line.strip() for line in (done.stderr + done.stdout).splitlines() if line.strip()]
        raise SlurmError(f"{what}: {lines[-1] if lines else f'{argv[0]} exited {done.returncode}'}")
    return done.stdout


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def _python_environment() -> str:
    """The lines that make a job run this `aka` (this interpreter, this source tree)."""
    source = Path(__file__).resolve().parents[2]
    return f"cd {shlex.quote(os.getcwd())}\nexport PYTHONPATH={shlex.quote(str(source))}${{PYTHONPATH:+:$PYTHONPATH}}\n"


def worker_script(config: Path, run_dir: Path, request: SlurmRequest) -> str:
    """The worker job: one srun step of `workers` tasks, a GPU each. Run with bash inside an
    allocation it is the interactive mode; its #SBATCH lines are then comments."""
    slurm_dir = run_dir / SLURM_DIR
    directives = [
        f"--job-name=aka-{run_dir.name}",
        *request.allocation_flags(),
        "--requeue",
        "--open-mode=append",
        f"--output={slurm_dir / 'workers-%j.out'}",
    ]
    worker = (
        'exec "$0" -m aka.cli run "$1" --parallel-worker --run-name "$2" '
        '--worker-id "slurm-${SLURM_JOB_ID}.${SLURM_RESTART_COUNT:-0}-${SLURM_PROCID}"'
    )
    srun = [
        "srun",
        "--kill-on-bad-exit=0",
        f"--ntasks={request.workers}",
        f"--ntasks-per-node={request.gpus_per_node}",
        "--gpus-per-task=1",
        f"--cpus-per-task={request.cpus_per_worker}",
        "--open-mode=append",
        f"--output={run_dir / QUEUE_DIR / WORKERS_DIR / 'slurm-%j-%t.log'}",
        "bash",
        "-c",
        worker,
        sys.executable,
        str(config),
        str(run_dir),
    ]
    return (
        "#!/bin/bash\n"
        + "".join(f"#SBATCH {line}\n" for line in directives)
        + "# aka's workers: each claims trials from the run's leased queue until it drains; a requeued\n"
        + "# job's new workers take over the trials of the killed ones through the leases.\n"
        + "set -u\n"
        + _python_environment()
        + shlex.join(srun)
        + "\n"
    )


def report_script(config: Path, run_dir: Path, request: SlurmRequest) -> str:
    directives = [
        f"--job-name=aka-{run_dir.name}-report",
        "--nodes=1",
        "--ntasks=1",
        "--cpus-per-task=1",
        *request.placement_flags(),
        f"--output={run_dir / SLURM_DIR / 'postprocess-%j.out'}",
    ]
    command = [sys.executable, "-m", "aka.cli", "run", str(config), "--postprocess-only", "--run-name", str(run_dir)]
    return (
        "#!/bin/bash\n"
        + "".join(f"#SBATCH {line}\n" for line in directives)
        + "set -u\n"
        + _python_environment()
        + "exec "
        + shlex.join(command)
        + "\n"
    )


def read_record(run_dir: Path) -> SlurmRecord:
    path = run_dir / SLURM_DIR / RECORD_NAME
    if not path.is_file():
        raise SlurmError(f"{run_dir}: no {SLURM_DIR}/{RECORD_NAME}; this run was not submitted with `aka slurm submit`")
    try:
        return SlurmRecord.model_validate_json(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise SlurmError(
            f"{path}: not a readable Slurm record ({type(exc).__name__}); its job ids are in {path.parent}/*.out"
        ) from None


def write_record(record: SlurmRecord) -> None:
    write_text_atomic(Path(record.run_dir) / SLURM_DIR / RECORD_NAME, record.model_dump_json(indent=2))


def check_request(request: SlurmRequest) -> None:
    """Ask Slurm whether it would run the worker job (`sbatch --test-only`), before a run
    directory is made for it: a wrong partition, account, QOS or time is one line, and no run."""
    _slurm(
        ["sbatch", "--test-only", *request.allocation_flags(), "--wrap", "true"],
        "sbatch refused the job (check --nodes/--gpus-per-node/--partition/--account/--qos/--time)",
    )


def init_run(config: Path, lease_seconds: float, run_suffix: str | None, resume_run: Path | None) -> Path:
    """The run directory and its queue (`aka run --parallel-init`); with `resume_run`, that run's
    queue refilled as `aka run --resume-run` would (a changed config refused, finished trials reused)."""
    from aka.run.runner import run_experiment

    return run_experiment(config, run_suffix, resume_run, lease_seconds=lease_seconds, init_only=True).run_dir


def _refuse_active(run_dir: Path) -> list[SlurmJob]:
    """The jobs recorded for a run being resubmitted; refused while one is still active."""
    if not (run_dir / SLURM_DIR / RECORD_NAME).is_file():
        return []
    jobs = read_record(run_dir).jobs
    batch = [job.job_id for job in jobs if job.role != "interactive"]
    active = [job for job, state in job_states(batch).items() if is_active(state)] if batch else []
    if active:
        raise SlurmError(
            f"{run_dir}: job {active[0]} of this run is still active; wait for it or `aka slurm cancel {run_dir}` first"
        )
    return jobs


def prepare(
    config: Path,
    request: SlurmRequest,
    lease_seconds: float = DEFAULT_LEASE_SECONDS,
    run_suffix: str | None = None,
    check: bool = True,
    resume_run: Path | None = None,
) -> SlurmRecord:
    """The run (new, or `resume_run` refilled) with its two scripts written and its record."""
    config = config.resolve()
    if check:
        check_request(request)
    earlier = _refuse_active(resume_run.resolve()) if resume_run is not None else []
    run_dir = init_run(config, lease_seconds, run_suffix, resume_run)
    slurm_dir = run_dir / SLURM_DIR
    slurm_dir.mkdir(exist_ok=True)
    (slurm_dir / WORKER_SCRIPT).write_text(worker_script(config, run_dir, request), encoding="utf-8")
    (slurm_dir / REPORT_SCRIPT).write_text(report_script(config, run_dir, request), encoding="utf-8")
    record = SlurmRecord(config=str(config), run_dir=str(run_dir), request=request, jobs=earlier)
    write_record(record)
    return record


def submit(
    config: Path,
    request: SlurmRequest,
    lease_seconds: float = DEFAULT_LEASE_SECONDS,
    run_suffix: str | None = None,
    resume_run: Path | None = None,
) -> SlurmRecord:
    """Batch mode: the worker job, then the report job after it (afterany), both recorded."""
    require_tool("sbatch")
    record = prepare(config, request, lease_seconds, run_suffix, resume_run=resume_run)
    slurm_dir = Path(record.run_dir) / SLURM_DIR
    workers = _job_id(_slurm(["sbatch", "--parsable", str(slurm_dir / WORKER_SCRIPT)], "sbatch (workers)"))
    record.jobs.append(SlurmJob(role="workers", job_id=workers, submitted_at=_now()))
    write_record(record)
    report = _job_id(
        _slurm(
            [
                "sbatch",
                "--parsable",
                f"--dependency=afterany:{workers}",
                "--kill-on-invalid-dep=yes",
                str(slurm_dir / REPORT_SCRIPT),
            ],
            "sbatch (report)",
        )
    )
    record.jobs.append(SlurmJob(role="postprocess", job_id=report, submitted_at=_now()))
    write_record(record)
    return record


def run_interactive(
    config: Path,
    request: SlurmRequest,
    lease_seconds: float = DEFAULT_LEASE_SECONDS,
    run_suffix: str | None = None,
    resume_run: Path | None = None,
) -> SlurmRecord:
    """Interactive mode: the worker step in this shell's allocation (SLURM_JOB_ID set), or in one
    salloc makes for it; returns once the workers ended (the caller writes the reports)."""
    inside = os.environ.get("SLURM_JOB_ID")
    require_tool("srun" if inside else "salloc")
    record = prepare(config, request, lease_seconds, run_suffix, check=inside is None, resume_run=resume_run)
    script = Path(record.run_dir) / SLURM_DIR / WORKER_SCRIPT
    argv = ["bash", str(script)] if inside else ["salloc", *request.allocation_flags(), "bash", str(script)]
    record.jobs.append(SlurmJob(role="interactive", job_id=inside or "salloc", submitted_at=_now()))
    write_record(record)
    done = subprocess.run(argv, check=False, stdin=subprocess.DEVNULL)
    if done.returncode != 0:
        logs = Path(record.run_dir) / QUEUE_DIR / WORKERS_DIR
        raise SlurmError(
            f"{argv[0]} {script} exited {done.returncode}; see {logs}/slurm-*.log, then resume with "
            f"`aka run {record.config} --resume-run "
            f"{record.run_dir}`"
        )
    return record


def _job_id(parsable: str) -> str:
    """`sbatch --parsable` prints `ID` or `ID;CLUSTER`."""
    return parsable.strip().split(";")[0]


def job_states(ids: list[str]) -> dict[str, str]:
    """Each job's state: squeue's while Slurm keeps it, else sacct's, else GONE."""
    states: dict[str, str] = {}
    for job in ids:
        done = subprocess.run(
            ["squeue", "-h", "-t", "all", "-j", job, "-o", "%T"],
            capture_output=True,
            text=True,
            check=False,
            stdin=subprocess.DEVNULL,
        )
        lines = done.stdout.split()
        states[job] = lines[0] if done.returncode == 0 and lines else GONE
    gone = [job for job, state in states.items() if state == GONE]
    if gone and shutil.which("sacct"):
        done = subprocess.run(
            ["sacct", "-n", "-P", "-X", "-o", "JobID,State", "-j", ",".join(gone)],
            capture_output=True,
            text=True,
            check=False,
            stdin=subprocess.DEVNULL,
        )
        for line in done.stdout.splitlines() if done.returncode == 0 else []:
            job, _, state = line.partition("|")
            if job in states and state:
                states[job] = state.split()[0]
    return states


def is_active(state: str) -> bool:
    return state in ACTIVE_STATES


class JobStatus(BaseModel):
    role: str
    job_id: str
    state: str


class SlurmStatus(BaseModel):
    """`aka slurm status RUN`: the recorded jobs' states and the queue's trials per state."""

    run_dir: str
    jobs: list[JobStatus]
    trials: dict[str, int]
    running: list[str]
    reports: bool


def status(run_dir: Path) -> SlurmStatus:
    run_dir = run_dir.resolve()
    record = read_record(run_dir)
    batch = [job for job in record.jobs if job.role != "interactive"]
    states = job_states([job.job_id for job in batch]) if batch else {}
    queue = TrialQueue(run_dir)
    entries = queue.entries() if queue.exists else {}
    running = [f"{e.task} ({e.lease.worker_id} on {e.lease.host})" for e in entries.get("running", []) if e.lease]
    return SlurmStatus(
        run_dir=str(run_dir),
        jobs=[JobStatus(role=job.role, job_id=job.job_id, state=states.get(job.job_id, "-")) for job in record.jobs],
        trials={state: len(found) for state, found in entries.items()},
        running=running,
        reports=(run_dir / "reports" / "overall_summary.csv").is_file(),
    )


def cancel(run_dir: Path, wait_seconds: float = CANCEL_WAIT_SECONDS) -> list[str]:
    """scancel the run's live jobs and wait until they ended (their workers then hold nothing);
    returns the ids cancelled. The run stays resumable: `aka run CONFIG --resume-run RUN`, or
    submit again."""
    record = read_record(run_dir.resolve())
    live = [
        job for job, state in job_states(record.ids("workers") + record.ids("postprocess")).items() if is_active(state)
    ]
    if live:
        _slurm(["scancel", *live], "scancel")
        wait_until_ended(live, wait_seconds)
    queue = TrialQueue(Path(record.run_dir))
    if queue.exists:
        prefixes = tuple(f"slurm-{job}." for job in record.ids("workers"))
        queue.release(lambda lease: lease.worker_id.startswith(prefixes), "its Slurm job was cancelled")
    return live


def wait_until_ended(
    ids: list[str], timeout: float | None = None, progress: Callable[[dict[str, str]], None] | None = None
) -> dict[str, str]:
    """Poll until none of the jobs is active; their final states. `progress` sees each poll's."""
    deadline = None if timeout is None else time.monotonic() + timeout
    while True:
        states = job_states(ids)
        if progress is not None:
            progress(states)
        if not any(is_active(state) for state in states.values()):
            return states
        if deadline is not None and time.monotonic() > deadline:
            raise SlurmError(
                f"jobs {','.join(ids)} still active after {timeout:.0f} s: "
                f"{', '.join(f'{j} {s}' for j, s in states.items())}"
            )
        time.sleep(WAIT_POLL_SECONDS)
