"""Independent evaluation: a fresh directory from the pristine task, the declared sources only,
each step in its own process with a timeout, results read from the documented step report.
"""

from __future__ import annotations

import ast
import os
import re
import secrets
import shlex
import shutil
import sys
import tempfile
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path

from aka.bytecode import warm_bytecode
from aka.device import DeviceInfo
from aka.isolation import detect_sandbox, step_limits
from aka.process import CommandOutcome, StartedCommand
from aka.result import FailureKind
from aka.step_report import (
    CaseReport,
    StepReport,
    StepReportError,
    StepStatus,
    parse_step_message,
)
from aka.tasks import IGNORED_NAMES, Task
from aka.wire import (
    BASELINE_SOURCES_DIR,
    ENV_BASELINE,
    ENV_BASELINE_DIR,
    ENV_CASE_PROFILE,
    ENV_CUDA_ARCH,
    ENV_DEVICE,
    ENV_RESULT_FD,
    ENV_SHARED_CACHE,
    ENV_STEP,
    ENV_TARGET,
    ENV_TARGET_KERNELS,
    ENV_TASK_FAMILY,
    READY_LINE,
    StepExit,
)

SRC_ROOT = Path(__file__).resolve().parents[1]
CHANNEL_LIMIT_BYTES = 16 * 1024 * 1024
PASSED_THROUGH = frozenset({"AKA_NO_WORKER_SANDBOX"})  # the evaluator's own AKA_ settings a step also reads


class Step(str, Enum):
    COMPILE = "compile"
    CORRECTNESS = "correctness"
    PERFORMANCE = "performance"
    EXPORT = "export"


class Target(str, Enum):
    """What a step exercises: the sources in the evaluation directory (paired with the baseline in
    the performance step), the PyTorch reference, or the task's baseline timed alone."""

    CANDIDATE = "candidate"
    REFERENCE = "reference"
    BASELINE = "baseline"


_STEP_FAILURE = {
    Step.COMPILE: FailureKind.COMPILE_ERROR,
    Step.CORRECTNESS: FailureKind.INCORRECT,
    Step.PERFORMANCE: FailureKind.INCORRECT,
    Step.EXPORT: FailureKind.NONE,
}


@dataclass
class StepOutcome:
    """A step's verdict. `failure` is NONE when it passed, SKIPPED when it could not run here."""

    step: Step
    failure: FailureKind = FailureKind.NONE
    message: str | None = None
    cases: list[CaseReport] = field(default_factory=list)
    commands: list[CommandOutcome] = field(default_factory=list)
    eval_seed: int | None = None
    isolation: list[str] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return self.failure is FailureKind.NONE

    @property
    def skipped(self) -> bool:
        return self.failure is FailureKind.SKIPPED


def build_eval_dir(task: Task, dest: Path, candidate_dir: Path | None) -> list[str]:
    """Copy the pristine task to `dest`, then only the declared sources from `candidate_dir`.

    The pristine editable files also go to `.aka_baseline/`, so a step can time the original
    next to the candidate in one process. Returns the editable files the candidate no longer has
    (deleted by the agent); those keep no copy at all, so a deleted kernel fails instead of
    silently falling back to the original.
    """
    _clear_in_place(dest)
    shutil.copytree(task.directory, dest, ignore=shutil.ignore_patterns(*IGNORED_NAMES, "*.pyc"),
                    dirs_exist_ok=True)
    copy_original_sources(task, dest)
    missing: list[str] = []
    if candidate_dir is not None:
        for rel in task.config.source_file_path:
            source, target = candidate_dir / rel, dest / rel
            if source.is_file() and not source.is_symlink():
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(source, target)
            else:
                target.unlink(missing_ok=True)
                missing.append(rel)
    return missing


def copy_original_sources(task: Task, dest: Path) -> None:
    """The pristine editable files into `dest/.aka_baseline/`, where the performance step loads
    the baseline from (in the evaluation directory, and in the agent's workspace for self-checks)."""
    for rel in task.config.source_file_path:
        pristine = dest / BASELINE_SOURCES_DIR / rel
        pristine.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(task.directory / rel, pristine)


def _clear_in_place(directory: Path) -> None:
    """Empty `directory` but keep it (its inode): step processes started early have it as their cwd."""
    if not directory.is_dir() or directory.is_symlink():
        if directory.is_symlink() or directory.exists():
            directory.unlink()
        return
    for entry in directory.iterdir():
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry)
        else:
            entry.unlink()


def _defined_names(path: Path) -> set[str] | None:
    """Function names a source defines; None when it does not parse (the compile step reports that)."""
    text = path.read_text(encoding="utf-8", errors="replace")
    if path.suffix == ".py":
        try:
            tree = ast.parse(text)
        except SyntaxError:
            return None
        return {n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)}
    text = re.sub(r"__launch_bounds__\s*\([^)]*\)", " ", text)  # `__global__ void __launch_bounds__(256) k(`
    pattern = re.compile(r"__global__[^;{}]*?\b([A-Za-z_]\w*)\s*\(")
    return set(pattern.findall(text))


def missing_kernels(task: Task, eval_dir: Path) -> list[str]:
    """Target kernel functions that no editable source defines (Python by AST, CUDA by `__global__`)."""
    defined: set[str] = set()
    for rel in task.config.source_file_path:
        names = _defined_names(eval_dir / rel) if (eval_dir / rel).is_file() else set()
        if names is None:
            return []
        defined |= names
    return [name for name in task.config.target_kernel_functions if name not in defined]


def case_profile(device: DeviceInfo, heldout: bool = False) -> str:
    """`full` on a GPU, `ci` (small cases) on the CPU; `heldout`/`heldout_ci` for the hidden cases."""
    base = "full" if device.is_gpu else "ci"
    return ("heldout" if base == "full" else "heldout_ci") if heldout else base


def step_environment(task: Task, device: DeviceInfo, step: Step, target: Target, eval_dir: Path,
                     extra: dict[str, str] | None = None) -> dict[str, str]:
    """The contract of docs/result-format.md: who runs, on what, and what is being judged."""
    env = {k: v for k, v in os.environ.items()
           if (not k.startswith("AKA_") or k in PASSED_THROUGH) and k != "TRITON_INTERPRET"}
    python_dir = str(Path(sys.executable).parent)
    env["PATH"] = python_dir + os.pathsep + env.get("PATH", "")
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(SRC_ROOT), env.get("PYTHONPATH", "")) if p)
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env.update({ENV_STEP: step.value, ENV_DEVICE: device.kind, ENV_TARGET: target.value,
                ENV_CASE_PROFILE: case_profile(device), ENV_TASK_FAMILY: task.family,
                ENV_TARGET_KERNELS: ",".join(task.config.target_kernel_functions),
                ENV_BASELINE: task.config.baseline_source.value,
                ENV_BASELINE_DIR: str(eval_dir / BASELINE_SOURCES_DIR)})
    if device.is_gpu and device.arch:
        env[ENV_CUDA_ARCH] = device.arch
    else:
        env["TRITON_INTERPRET"] = "1"
    env.update(extra or {})
    return env


def _timeout(task: Task, step: Step) -> float:
    return float(getattr(task.config, f"{step.value}_timeout"))


def _commands(task: Task, step: Step) -> list[str]:
    return list(getattr(task.config, f"{step.value}_command"))


class _ResultPipe:
    """A step's private result pipe, drained by a thread. `ready` is set once the harness says it
    has loaded (aka.harness writes `ready` before it reads its token) or the command is gone."""

    def __init__(self) -> None:
        read_fd, self.write_fd = os.pipe()
        self.chunks: list[bytes] = []
        self.ready = threading.Event()
        self._reader = threading.Thread(target=self._drain, args=(read_fd,), daemon=True)
        self._reader.start()

    def _drain(self, fd: int) -> None:
        total = 0
        with os.fdopen(fd, "rb", buffering=0) as pipe:
            while chunk := pipe.read(65536):
                total += len(chunk)
                if total <= CHANNEL_LIMIT_BYTES:
                    self.chunks.append(chunk)
                if b"".join(self.chunks[:2]).startswith(READY_LINE):
                    self.ready.set()
        self.ready.set()

    def payload(self, wait: float = 30) -> bytes:
        """Everything sent after the `ready` line (the report), once the pipe is closed."""
        self._reader.join(timeout=wait)
        data = b"".join(self.chunks)
        return data[len(READY_LINE):] if data.startswith(READY_LINE) else data


@dataclass(frozen=True)
class BuildCaches:
    """Compiled-kernel caches of one evaluation (see `aka.harness.sides`).

    `shared`: the candidate's builds, kept across its steps (compiled once per evaluation).
    `trusted`: the frozen baseline's builds, made from pristine code only; copied into each
    performance command's fresh cache, where the baseline is built before any candidate code
    runs, so the baseline is not recompiled for every evaluation.
    """

    shared: Path | None = None
    trusted: Path | None = None

    def env(self) -> dict[str, str]:
        return {ENV_SHARED_CACHE: str(self.shared)} if self.shared else {}

    def seed_for(self, step: Step) -> Path | None:
        return self.trusted if step is Step.PERFORMANCE else None


@dataclass
class StepProcess:
    """One step command, started (possibly early) in the sandbox and waiting for its token."""

    command: str
    step: Step
    started: StartedCommand
    pipe: _ResultPipe
    token: str
    cache: Path
    timeout: float
    seed_cache: Path | None = None
    scratch: Path | None = None

    def remove_private_dirs(self) -> None:
        """Its Triton cache and temporary directory (after its turn, or when it never gets one)."""
        for path in (self.cache, self.scratch):
            if path is not None:
                shutil.rmtree(path, ignore_errors=True)


def start_isolated(command: str, task: Task, step: Step, eval_dir: Path, env: dict[str, str],
                   device: DeviceInfo, log_path: Path, caches: BuildCaches = BuildCaches()) -> StepProcess:
    """Start one step command sandboxed, with a private result pipe; it waits for its token.

    Its Triton cache (also `TORCH_EXTENSIONS_DIR`, and where CUDA builds go) is a fresh,
    unguessable path, so no other step can plant compiled kernels there (e.g. a slow binary under
    the baseline's cache key): with the read-only file system it is made now and only this
    command may write it; without, it is made only when the command gets its turn. The frozen
    baseline's own builds (`caches.seed_for(step)`) are copied into it at that moment. Its
    `TMPDIR` is a private folder next to the evaluation directory, removed after the step. With
    the read-only file system (`Sandbox.wrap`) the command may write only there, in the
    evaluation directory and in the evaluation's shared build cache.
    """
    sandbox = detect_sandbox()
    cache = eval_dir.parent / f"triton-{secrets.token_hex(12)}"
    scratch = Path(tempfile.mkdtemp(prefix=f"tmp-{step.value}-", dir=eval_dir.parent))
    pipe = _ResultPipe()
    timeout = _timeout(task, step)
    private = {"TRITON_CACHE_DIR": str(cache), "TORCH_EXTENSIONS_DIR": str(cache / "torch_extensions"),
               "TMPDIR": str(scratch), "TEMP": str(scratch), "TMP": str(scratch)}
    try:
        if sandbox.confines:
            cache.mkdir(mode=0o700)
        writable = [eval_dir, cache, scratch, *([caches.shared] if caches.shared else [])]
        judge = _uses_aka_harness(command, eval_dir)  # starts its workers in namespaces of their own
        started = StartedCommand(command, eval_dir, {**env, **private, ENV_RESULT_FD: str(pipe.write_fd)},
                                 log_path, True, (pipe.write_fd,), tuple(sandbox.wrap([], writable, keep_admin=judge)),
                                 step_limits(timeout, device.is_gpu).apply)
    except BaseException:
        shutil.rmtree(cache, ignore_errors=True)
        shutil.rmtree(scratch, ignore_errors=True)
        raise
    finally:
        os.close(pipe.write_fd)
    return StepProcess(command, step, started, pipe, secrets.token_hex(16), cache, timeout,
                       caches.seed_for(step), scratch)


def finish_isolated(process: StepProcess) -> tuple[CommandOutcome, bytes, str]:
    """Give a started command its token and its turn; return how it ended and what it sent."""
    try:
        if process.seed_cache is not None and process.seed_cache.is_dir():
            shutil.copytree(process.seed_cache, process.cache, dirs_exist_ok=True)
        process.cache.mkdir(mode=0o700, exist_ok=True)
        ran = process.started.finish(f"{process.token}\n".encode(), process.timeout)
    finally:
        process.remove_private_dirs()
    return ran, process.pipe.payload(), process.token


def run_isolated(command: str, task: Task, step: Step, eval_dir: Path, env: dict[str, str],
                 device: DeviceInfo, log_path: Path) -> tuple[CommandOutcome, bytes, str]:
    """Run one step command sandboxed, with a private result pipe and a one-time token on stdin."""
    return finish_isolated(start_isolated(command, task, step, eval_dir, env, device, log_path))


def uses_aka_harness(task: Task, steps: list[Step], eval_dir: Path) -> bool:
    """Every command of `steps` is an aka.harness script (they say `ready` and share caches safely)."""
    commands = [c for step in steps for c in _commands(task, step)]
    return bool(commands) and all(_uses_aka_harness(c, eval_dir) for c in commands)


def _uses_aka_harness(command: str, eval_dir: Path) -> bool:
    """`python3 SCRIPT.py ...` where the script ends in aka.harness's `run_task` (which says `ready`)."""
    try:
        argv = shlex.split(command)
    except ValueError:
        return False
    if len(argv) < 2 or not Path(argv[0]).name.startswith("python") or not argv[1].endswith(".py"):
        return False
    script = eval_dir / argv[1]
    return script.is_file() and "run_task(" in script.read_text(encoding="utf-8", errors="replace")


@dataclass
class Prestarted:
    """Every command of a sequence of steps, started at once so their start-up (Python, torch,
    the harness) overlaps; each still runs alone, in turn, after the directory is rebuilt.

    Only with the PID-namespace sandbox (a waiting process is invisible to the candidate code
    of earlier steps) and only for aka.harness scripts, which load the harness and then wait
    for their token: all of them are loaded before any candidate code runs.
    """

    eval_dir: Path
    inode: int
    processes: dict[Step, list[StepProcess]]
    log_path: Path

    @classmethod
    def start(cls, task: Task, steps: list[tuple[Step, Target]], eval_dir: Path, device: DeviceInfo,
              log_path: Path, extra_env: dict[str, str] | None = None,
              caches: BuildCaches = BuildCaches()) -> Prestarted | None:
        if not detect_sandbox().prefix or not uses_aka_harness(task, [s for s, _ in steps], eval_dir):
            return None
        processes: dict[Step, list[StepProcess]] = {}
        for step, target in steps:
            env = step_environment(task, device, step, target, eval_dir, {**(extra_env or {}), **caches.env()})
            processes[step] = [start_isolated(c, task, step, eval_dir, env, device, _own_log(log_path, step, i),
                                              caches)
                               for i, c in enumerate(_commands(task, step))]
        for process in (p for group in processes.values() for p in group):
            process.pipe.ready.wait(timeout=process.timeout)
        return cls(eval_dir, eval_dir.stat().st_ino, processes, log_path)

    def replaced(self) -> bool:
        """Candidate code swapped the evaluation directory for another (waiting steps would not see it)."""
        try:
            return self.eval_dir.stat().st_ino != self.inode
        except OSError:
            return True

    def abandon(self) -> None:
        """Kill the commands that never got their turn (an earlier step failed); keep their logs."""
        for process in (p for group in self.processes.values() for p in group):
            if process.started.proc.poll() is None:
                process.started.abandon()
            process.remove_private_dirs()
            _append_log(process.started.log_path, self.log_path)


def _own_log(log_path: Path, step: Step, index: int) -> Path:
    return log_path.with_name(f"{log_path.name}.{step.value}{index}")


def _append_log(own: Path, log_path: Path) -> None:
    """Early-started commands log to their own file (they start together); keep one log for people."""
    if own != log_path and own.is_file():
        with log_path.open("ab") as log:
            log.write(own.read_bytes())
        own.unlink()


def _report_failure(report: StepReport, step: Step) -> FailureKind:
    """The harness's judge may name a more precise kind (policy violation, tampering, a crash of
    the candidate's worker, an infrastructure error: it runs no candidate code, docs/evaluation.md)."""
    try:
        named = FailureKind(report.failure_kind) if report.failure_kind else None
    except ValueError:
        named = None
    if named is None or named in (FailureKind.NONE, FailureKind.SKIPPED):
        return _STEP_FAILURE[step]
    return named


def run_step(task: Task, step: Step, eval_dir: Path, reports_dir: Path, device: DeviceInfo,
             target: Target, log_path: Path, extra_env: dict[str, str] | None = None,
             rebuild: Callable[[], object] | None = None, prestarted: Prestarted | None = None,
             caches: BuildCaches = BuildCaches()) -> StepOutcome:
    """Run every command of `step`; the first failing command decides the step's verdict.

    The exit status is cross-checked with the report: a non-zero exit is a failure even when a
    report says `ok`, and an exit of 0 without a valid report is a failure too. Reports that
    arrive without the step's token, or more than one, are tampering. `rebuild` recreates the
    evaluation directory before every command, so nothing a candidate wrote into it during one
    step (a rewritten harness, a planted file) survives into the next.
    """
    outcome = StepOutcome(step, isolation=list(detect_sandbox().features))
    for index, command in enumerate(_commands(task, step)):
        if rebuild is not None:
            rebuild()
        if prestarted is not None:
            if prestarted.replaced():
                outcome.failure = FailureKind.TAMPERING
                outcome.message = "candidate code replaced the evaluation directory"
                return outcome
            process = prestarted.processes[step][index]
        else:
            env = step_environment(task, device, step, target, eval_dir, {**(extra_env or {}), **caches.env()})
            process = start_isolated(command, task, step, eval_dir, env, device, log_path, caches)
        ran, received, token = finish_isolated(process)
        _append_log(process.started.log_path, log_path)
        outcome.commands.append(ran)
        reports_dir.mkdir(parents=True, exist_ok=True)
        (reports_dir / f"{target.value}_{step.value}_{index}.raw").write_bytes(received)
        if ran.timed_out:
            outcome.failure, outcome.message = FailureKind.TIMEOUT, ran.describe()
            return outcome
        if ran.stopped:  # nothing a step runs stops itself; candidate code stopped it to stall us
            outcome.failure, outcome.message = FailureKind.TAMPERING, ran.describe()
            return outcome
        try:
            report: StepReport | None = parse_step_message(received, token)
        except StepReportError as exc:
            report = None
            report_problem = str(exc)
        if not ran.ok:
            crash = FailureKind.COMPILE_ERROR if step is Step.COMPILE else FailureKind.CRASH
            if ran.exit_code == StepExit.TASK_FAULT and uses_aka_harness(task, [step], eval_dir):
                crash = FailureKind.INFRA_ERROR  # the judge found a fault of the task or the platform
            outcome.failure, outcome.message = crash, ran.describe()
            return outcome
        if report is None:
            forged = any(sign in report_problem for sign in ("forged", "messages arrived", "not a measurement",
                                                                "greater than 0", "finite number"))
            fallback = FailureKind.COMPILE_ERROR if step is Step.COMPILE else FailureKind.CRASH
            outcome.failure = FailureKind.TAMPERING if forged else fallback
            outcome.message = f"`{command}` exited 0 but {report_problem}"
            return outcome
        outcome.cases.extend(report.cases)
        outcome.isolation += [f for f in report.isolation if f not in outcome.isolation]
        outcome.eval_seed = report.eval_seed if report.eval_seed is not None else outcome.eval_seed
        if report.status is StepStatus.SKIPPED:
            outcome.failure, outcome.message = FailureKind.SKIPPED, report.message or "step skipped"
            return outcome
        if report.status is StepStatus.FAILED:
            outcome.failure = _report_failure(report, step)
            outcome.message = report.message or f"`{command}` reported failure"
            return outcome
    return _check_cases(outcome)


def _check_cases(outcome: StepOutcome) -> StepOutcome:
    if outcome.step is Step.CORRECTNESS:
        wrong = [c for c in outcome.cases if c.correct is not True]
        if not outcome.cases:
            outcome.failure, outcome.message = FailureKind.INCORRECT, "correctness step reported no cases"
        elif wrong:
            first = wrong[0]
            outcome.failure = FailureKind.INCORRECT
            outcome.message = f"{len(wrong)}/{len(outcome.cases)} cases wrong; first: {first.id}: {first.message or ''}"
    elif outcome.step is Step.PERFORMANCE and not any(c.time_ms for c in outcome.cases):
        outcome.failure, outcome.message = FailureKind.PERFORMANCE_ERROR, "performance step reported no timed case"
    return outcome


def evaluate_candidate(task: Task, candidate_dir: Path, scratch_dir: Path, device: DeviceInfo,
                       heldout: bool = False, through: int = 3, trusted_cache: Path | None = None) -> list[StepOutcome]:
    """Judge the declared sources in `candidate_dir`: compile, correctness, performance.

    Everything is built in `scratch_dir/evaluation` from the pristine task; the steps stop at the
    first failure. Agents that test their own candidates (autotune, llm) call this too, so they
    see exactly what the final evaluation will see. `heldout=True` runs correctness and
    performance on the task's hidden held-out cases instead (the candidate must have compiled).
    `through=2` stops after correctness. `trusted_cache`: the frozen baseline's builds (see
    `BuildCaches`).
    """
    name = "evaluation_heldout" if heldout else "evaluation"
    eval_dir, reports, log = scratch_dir / name, scratch_dir / f".reports_{name}", scratch_dir / f"{name}.log"
    extra = {"AKA_CASE_PROFILE": case_profile(device, heldout=True)} if heldout else None
    deleted = build_eval_dir(task, eval_dir, candidate_dir)
    if deleted:
        return [StepOutcome(Step.COMPILE, FailureKind.COMPILE_ERROR, f"editable file(s) missing: {', '.join(deleted)}")]
    absent = missing_kernels(task, eval_dir)
    if absent:
        return [StepOutcome(Step.COMPILE, FailureKind.MISSING_KERNEL,
                            f"target kernel function(s) not defined: {', '.join(absent)}")]
    steps = [s for s in (Step.COMPILE, Step.CORRECTNESS, Step.PERFORMANCE)[:through]
             if s is not Step.PERFORMANCE or task.config.performance_command]
    return run_steps(task, [(s, Target.CANDIDATE) for s in steps], eval_dir, reports, device, log, extra,
                     rebuild=lambda: build_eval_dir(task, eval_dir, candidate_dir), trusted_cache=trusted_cache)


def run_steps(task: Task, steps: list[tuple[Step, Target]], eval_dir: Path, reports_dir: Path, device: DeviceInfo,
              log_path: Path, extra_env: dict[str, str] | None = None, rebuild: Callable[[], object] | None = None,
              trusted_cache: Path | None = None, shared_cache: Path | None = None) -> list[StepOutcome]:
    """Run `steps` in order, stopping at the first that does not pass; their commands start
    together (see `Prestarted`) and share a build cache (see `BuildCaches`) where that is safe:
    for aka.harness scripts. `shared_cache` keeps the shared builds (else a temporary folder)."""
    caches = BuildCaches()
    owned: Path | None = None
    if uses_aka_harness(task, [s for s, _ in steps], eval_dir):
        warm_bytecode(SRC_ROOT)
        if shared_cache is None:
            owned = Path(tempfile.mkdtemp(prefix="builds-", dir=eval_dir.parent))
        else:
            shared_cache.mkdir(parents=True, exist_ok=True)
        caches = BuildCaches(shared_cache or owned, trusted_cache)
    prestarted = Prestarted.start(task, steps, eval_dir, device, log_path, extra_env, caches)
    outcomes: list[StepOutcome] = []
    try:
        for step, target in steps:
            outcomes.append(run_step(task, step, eval_dir, reports_dir, device, target, log_path, extra_env,
                                     rebuild, prestarted, caches))
            if not outcomes[-1].passed:
                break
    finally:
        if prestarted is not None:
            prestarted.abandon()
        if owned is not None:
            shutil.rmtree(owned, ignore_errors=True)
    return outcomes
