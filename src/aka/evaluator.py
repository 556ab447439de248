"""Independent evaluation: a fresh directory from the pristine task, the declared sources only,
each step in its own process with a timeout, results read from the documented step report.
"""

from __future__ import annotations

import ast
import os
import re
import secrets
import shutil
import sys
import tempfile
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path

from aka.device import DeviceInfo
from aka.isolation import detect_sandbox, step_limits
from aka.process import CommandOutcome, run_command
from aka.result import FailureKind
from aka.step_report import RESULT_FD_ENV, CaseReport, StepReport, StepReportError, StepStatus, parse_step_message
from aka.tasks import IGNORED_NAMES, Task

SRC_ROOT = Path(__file__).resolve().parents[1]
BASELINE_SOURCES_DIR = ".aka_baseline"
CHANNEL_LIMIT_BYTES = 16 * 1024 * 1024


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
    if dest.exists():
        shutil.rmtree(dest)
    shutil.copytree(task.directory, dest, ignore=shutil.ignore_patterns(*IGNORED_NAMES, "*.pyc"))
    for rel in task.config.source_file_path:
        pristine = dest / BASELINE_SOURCES_DIR / rel
        pristine.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(task.directory / rel, pristine)
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


def _defined_names(path: Path) -> set[str] | None:
    """Function names a source defines; None when it does not parse (the compile step reports that)."""
    text = path.read_text(encoding="utf-8", errors="replace")
    if path.suffix == ".py":
        try:
            tree = ast.parse(text)
        except SyntaxError:
            return None
        return {n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)}
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
    env = {k: v for k, v in os.environ.items() if not k.startswith("AKA_") and k != "TRITON_INTERPRET"}
    python_dir = str(Path(sys.executable).parent)
    env["PATH"] = python_dir + os.pathsep + env.get("PATH", "")
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(SRC_ROOT), env.get("PYTHONPATH", "")) if p)
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env.update({"AKA_STEP": step.value, "AKA_DEVICE": device.kind, "AKA_TARGET": target.value,
                "AKA_CASE_PROFILE": case_profile(device), "AKA_TASK_FAMILY": task.family,
                "AKA_TARGET_KERNELS": ",".join(task.config.target_kernel_functions),
                "AKA_BASELINE": task.config.baseline_source.value,
                "AKA_BASELINE_DIR": str(eval_dir / BASELINE_SOURCES_DIR)})
    if device.is_gpu and device.arch:
        env["AKA_CUDA_ARCH"] = device.arch
    else:
        env["TRITON_INTERPRET"] = "1"
    env.update(extra or {})
    return env


def _timeout(task: Task, step: Step) -> float:
    return float(getattr(task.config, f"{step.value}_timeout"))


def _commands(task: Task, step: Step) -> list[str]:
    return list(getattr(task.config, f"{step.value}_command"))


def _drain(fd: int, sink: list[bytes]) -> None:
    total = 0
    with os.fdopen(fd, "rb", buffering=0) as pipe:
        while chunk := pipe.read(65536):
            total += len(chunk)
            if total <= CHANNEL_LIMIT_BYTES:
                sink.append(chunk)


def run_isolated(command: str, task: Task, step: Step, eval_dir: Path, env: dict[str, str],
                 device: DeviceInfo, log_path: Path) -> tuple[CommandOutcome, bytes, str]:
    """Run one step command sandboxed, with a private result pipe and a one-time token on stdin.

    Returns how the command ended, what came through the pipe, and the token it had to echo.
    Each command gets its own unguessable Triton cache, so no step can plant compiled kernels
    for another (e.g. a slow binary under the baseline's cache key).
    """
    token = secrets.token_hex(16)
    cache = tempfile.mkdtemp(prefix=f"triton-{secrets.token_hex(8)}-", dir=eval_dir.parent)
    env = {**env, "TRITON_CACHE_DIR": cache}
    read_fd, write_fd = os.pipe()
    received: list[bytes] = []
    reader = threading.Thread(target=_drain, args=(read_fd, received), daemon=True)
    reader.start()
    try:
        timeout = _timeout(task, step)
        ran = run_command(command, eval_dir, {**env, RESULT_FD_ENV: str(write_fd)}, timeout, log_path,
                          stdin=f"{token}\n".encode(), pass_fds=(write_fd,), prefix=detect_sandbox().prefix,
                          preexec=step_limits(timeout, device.is_gpu).apply)
    finally:
        os.close(write_fd)
        shutil.rmtree(cache, ignore_errors=True)
    reader.join(timeout=30)
    return ran, b"".join(received), token


def _report_failure(report: StepReport, step: Step) -> FailureKind:
    """The harness may name a more precise kind (policy violation, tampering, ...)."""
    try:
        named = FailureKind(report.failure_kind) if report.failure_kind else None
    except ValueError:
        named = None
    if named is None or named in (FailureKind.NONE, FailureKind.SKIPPED, FailureKind.INFRA_ERROR):
        return _STEP_FAILURE[step]
    return named


def run_step(task: Task, step: Step, eval_dir: Path, reports_dir: Path, device: DeviceInfo,
             target: Target, log_path: Path, extra_env: dict[str, str] | None = None,
             rebuild: Callable[[], object] | None = None) -> StepOutcome:
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
        env = step_environment(task, device, step, target, eval_dir, extra_env)
        ran, received, token = run_isolated(command, task, step, eval_dir, env, device, log_path)
        outcome.commands.append(ran)
        reports_dir.mkdir(parents=True, exist_ok=True)
        (reports_dir / f"{target.value}_{step.value}_{index}.raw").write_bytes(received)
        if ran.timed_out:
            outcome.failure, outcome.message = FailureKind.TIMEOUT, ran.describe()
            return outcome
        try:
            report: StepReport | None = parse_step_message(received, token)
        except StepReportError as exc:
            report = None
            report_problem = str(exc)
        if not ran.ok:
            crash = FailureKind.COMPILE_ERROR if step is Step.COMPILE else FailureKind.CRASH
            outcome.failure, outcome.message = crash, ran.describe()
            return outcome
        if report is None:
            forged = "forged" in report_problem or "messages arrived" in report_problem
            fallback = FailureKind.COMPILE_ERROR if step is Step.COMPILE else FailureKind.CRASH
            outcome.failure = FailureKind.TAMPERING if forged else fallback
            outcome.message = f"`{command}` exited 0 but {report_problem}"
            return outcome
        outcome.cases.extend(report.cases)
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
                       heldout: bool = False) -> list[StepOutcome]:
    """Judge the declared sources in `candidate_dir`: compile, correctness, performance.

    Everything is built in `scratch_dir/evaluation` from the pristine task; the steps stop at the
    first failure. Agents that test their own candidates (autotune, llm) call this too, so they
    see exactly what the final evaluation will see. `heldout=True` runs correctness and
    performance on the task's hidden held-out cases instead (the candidate must have compiled).
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
    outcomes: list[StepOutcome] = []
    for step in (Step.COMPILE, Step.CORRECTNESS, Step.PERFORMANCE):
        if step is Step.PERFORMANCE and not task.config.performance_command:
            break
        outcomes.append(run_step(task, step, eval_dir, reports, device, Target.CANDIDATE, log, extra,
                                 rebuild=lambda: build_eval_dir(task, eval_dir, candidate_dir)))
        if not outcomes[-1].passed:
            break
    return outcomes
