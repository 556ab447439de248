"""The step orchestration: a candidate judged step by step (compile, correctness, performance),
each command's exit status cross-checked with its report, the first failure deciding the verdict."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import shutil
import signal
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from aka.compat.symbol_scope import scope_problem
from aka.config.tasks import Task
from aka.device import DeviceInfo
from aka.evaluation.bytecode import warm_bytecode
from aka.evaluation.device_lock import Turn, device_turn
from aka.evaluation.eval_dir import build_eval_dir
from aka.evaluation.kernel_check import missing_kernels
from aka.evaluation.phased_turn import PHASED_NOTE, TIMELINE_NOTE, PhasedTurn, phased_turn
from aka.evaluation.sandbox import detect_sandbox
from aka.evaluation.step_process import (
    BuildCaches,
    Prestarted,
    RunningTime,
    StepProcess,
    StepSetup,
    append_log,
    finish_isolated,
    is_harness_script,
    start_isolated,
    uses_aka_harness,
)
from aka.evaluation.step_report import CaseReport, StepReport, StepReportError, StepStatus, parse_step_message
from aka.evaluation.step_spec import SRC_ROOT, Step, Target, case_profile, step_commands
from aka.evaluation.wire import ENV_CASE_PROFILE, StepExit
from aka.process import CommandOutcome
from aka.progress import step_started
from aka.results.task_result import FailureKind
from aka.trees import remove_tree

# An evaluation that ends in infra_error is no verdict on the candidate, and on a shared GPU the
# usual cause passes (another evaluation's memory: docs/benchmarks/2026-12-04_session40_h200.md):
# the validator and the reward evaluator make it again, at most this many times in all.
INFRA_ATTEMPTS = 3
INFRA_RETRY_WAIT_S = 5.0

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
    deadline_cut: bool = False  # timed out at the evaluation's deadline, before the step's own timeout
    trust: str | None = None  # an original-format task's: what its verdict rests on (aka.compat.trust)

    @property
    def passed(self) -> bool:
        return self.failure is FailureKind.NONE

    @property
    def skipped(self) -> bool:
        return self.failure is FailureKind.SKIPPED


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


def run_step(setup: StepSetup, step: Step, target: Target, prestarted: Prestarted | None = None) -> StepOutcome:
    """Run every command of `step`; the first failing command decides the step's verdict.

    The exit status is cross-checked with the report: a non-zero exit is a failure even when a
    report says `ok`, and an exit of 0 without a valid report is a failure too. Reports that
    arrive without the step's token, or more than one, are tampering. `setup.rebuild` recreates
    the evaluation directory before every command. Each command runs holding the device
    (`device_turn`): shared, or alone for the performance step, whose timing nothing may disturb.
    """
    if setup.task.original is not None:  # the original's format: its result files or result line
        from aka.compat.steps import run_original_step  # imports this module

        return run_original_step(setup, step, target)
    outcome = StepOutcome(step, isolation=list(detect_sandbox().features))
    for index, command in enumerate(step_commands(setup.task, step)):
        if setup.rebuild is not None:
            setup.rebuild()
        process: StepProcess | None = None
        if prestarted is not None:
            if prestarted.replaced():
                return _replaced(step)
            process = prestarted.processes[step][index]
        elif is_harness_script(command, setup.eval_dir):  # it loads, then waits for its token
            process = start_isolated(setup, command, step, target)
        if process is not None and process.turn_socket is not None:  # the judge asks for the device alone
            turn_of: contextlib.AbstractContextManager[Turn] = phased_turn(setup.device, process.turn_socket)
        else:
            turn_of = device_turn(setup.device, exclusive=step is Step.PERFORMANCE)
        with turn_of as turn:
            setup.waited_for_device(turn.waited)
            if process is None:  # any other command runs at once: only in its turn on the device
                process = start_isolated(setup, command, step, target)
            left = setup.time_left()
            finished = finish_isolated(process, left, turn, setup.hard_end())
        stepped_aside(setup, turn, step.value)
        if not _record(setup, outcome, target, index, process, finished, left):
            return outcome
    return _check_cases(outcome)


def _replaced(step: Step) -> StepOutcome:
    return StepOutcome(step, FailureKind.TAMPERING, "candidate code replaced the evaluation directory")


def _record(
    setup: StepSetup,
    outcome: StepOutcome,
    target: Target,
    index: int,
    process: StepProcess,
    finished: tuple[CommandOutcome, bytes, str],
    left: float,
) -> bool:
    """One command's end into `outcome`; False when it decided the step's verdict (a failure)."""
    step, command = outcome.step, process.command
    ran, received, token = finished
    append_log(process.started.log_path, setup.log_path)
    outcome.commands.append(ran)
    setup.reports_dir.mkdir(parents=True, exist_ok=True)
    (setup.reports_dir / f"{target.value}_{step.value}_{index}.raw").write_bytes(received)
    if ran.timed_out:
        cut = left < process.timeout
        outcome.failure, outcome.deadline_cut = FailureKind.TIMEOUT, cut
        outcome.message = ran.describe() + (" (the evaluation's deadline)" if cut else "")
        return False
    if ran.stopped or ran.breach:  # a step stopped to stall us, or filling the disk to break the evaluation
        outcome.failure, outcome.message = FailureKind.TAMPERING, ran.describe()
        return False
    try:
        report: StepReport | None = parse_step_message(received, token)
    except StepReportError as exc:
        report = None
        report_problem = str(exc)
    if not ran.ok:
        crash = FailureKind.COMPILE_ERROR if step is Step.COMPILE else FailureKind.CRASH
        if ran.exit_code == StepExit.TASK_FAULT and uses_aka_harness(setup.task, [step], setup.eval_dir):
            crash = FailureKind.INFRA_ERROR  # the judge found a fault of the task or the platform
        outcome.failure, outcome.message = crash, ran.describe()
        return False
    if report is None:
        forged = any(
            sign in report_problem
            for sign in ("forged", "messages arrived", "not a measurement", "greater than 0", "finite number")
        )
        fallback = FailureKind.COMPILE_ERROR if step is Step.COMPILE else FailureKind.CRASH
        outcome.failure = FailureKind.TAMPERING if forged else fallback
        outcome.message = f"`{command}` exited 0 but {report_problem}"
        return False
    outcome.cases.extend(report.cases)
    outcome.isolation += [f for f in report.isolation if f not in outcome.isolation]
    outcome.eval_seed = report.eval_seed if report.eval_seed is not None else outcome.eval_seed
    if report.status is StepStatus.SKIPPED:
        outcome.failure, outcome.message = FailureKind.SKIPPED, report.message or "step skipped"
        return False
    if report.status is StepStatus.FAILED:
        outcome.failure = _report_failure(report, step)
        outcome.message = report.message or f"`{command}` reported failure"
        return False
    return True


def _together(setup: StepSetup, steps: list[tuple[Step, Target]], at: int, prestarted: Prestarted | None) -> bool:
    """Do `steps[at]` and the next run side by side? A compile step and the correctness step of
    the same target, one prestarted aka.harness command each, on the task's own cases: both only
    use the device shared, and each judge sets up its worker from the directory rebuilt once for
    both. Held-out cases are read from a file when the correctness step needs them, so there the
    steps keep their order (nothing a compile step's candidate might write reaches them)."""
    if prestarted is None or at + 1 >= len(steps) or setup.extra_env.get(ENV_CASE_PROFILE, "").startswith("heldout"):
        return False
    (first, target), (second, then) = steps[at], steps[at + 1]
    return (
        (first, second) == (Step.COMPILE, Step.CORRECTNESS)
        and target is then
        and len(prestarted.processes.get(first, [])) == 1
        and len(prestarted.processes.get(second, [])) == 1
    )


def run_compile_and_correctness(setup: StepSetup, target: Target, prestarted: Prestarted) -> list[StepOutcome] | None:
    """The compile and correctness steps side by side in one shared turn on the device: together
    they take the device about as long as the longer one, not the sum (on the H200 a compile step
    held it 3.2 s, a correctness step 2.9 s: docs/benchmarks/2026-12-04_session34_h200.md).
    The verdicts are the ordered ones: a compile failure is the outcome (the correctness step,
    killed then, counts for nothing), otherwise both outcomes. None where either step ended in
    an `infra_error`: the other step's candidate may have caused it (memory it took while this
    judge measured what was free is not this step's candidate's, as far as the judge can tell),
    so both steps are judged again one after the other (`run_steps`)."""
    if prestarted.replaced():
        return [_replaced(Step.COMPILE)]
    if setup.rebuild is not None:
        setup.rebuild()
    features = list(detect_sandbox().features)
    compile_outcome, correctness_outcome = (
        StepOutcome(Step.COMPILE, isolation=features),
        StepOutcome(Step.CORRECTNESS, isolation=list(features)),
    )
    compile_process, correctness_process = (
        prestarted.processes[Step.COMPILE][0],
        prestarted.processes[Step.CORRECTNESS][0],
    )
    hard_end = setup.hard_end()
    with device_turn(setup.device, exclusive=False) as turn:
        setup.waited_for_device(turn.waited)
        left = setup.time_left()
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="aka-correctness") as pool:
            later = pool.submit(finish_isolated, correctness_process, left, turn, hard_end)
            compiled = False
            try:
                compiled = _record(
                    setup,
                    compile_outcome,
                    target,
                    0,
                    compile_process,
                    finish_isolated(compile_process, left, turn, hard_end),
                    left,
                )
            finally:
                if not compiled:  # its verdict would count for nothing: it stops now
                    with contextlib.suppress(ProcessLookupError, PermissionError):
                        os.killpg(correctness_process.started.proc.pid, signal.SIGKILL)
            if compiled:
                step_started(Step.CORRECTNESS.value)
                checked = later.result()
            else:
                with contextlib.suppress(Exception):  # killed, perhaps before its token went in
                    later.result()
    stepped_aside(setup, turn, f"{Step.COMPILE.value}+{Step.CORRECTNESS.value}")
    if not compiled:
        return None if compile_outcome.failure is FailureKind.INFRA_ERROR else [compile_outcome]
    if _record(setup, correctness_outcome, target, 0, correctness_process, checked, left):
        correctness_outcome = _check_cases(correctness_outcome)
    if correctness_outcome.failure is FailureKind.INFRA_ERROR:
        return None
    return [_check_cases(compile_outcome), correctness_outcome]


def stepped_aside(setup: StepSetup, turn: Turn, steps: str) -> None:
    """The time a shared turn of `steps` (a name, `+` between several) stood stopped for timed
    steps counts as a wait, and is logged (benchmarks/device_holds.py leaves it out of holds); so
    does the time a phased turn waited between its phases, with how long it held the device alone."""
    if isinstance(turn, PhasedTurn):
        setup.waited_for_device(turn.paused_s())
        append_log_note(setup, PHASED_NOTE.format(steps, turn.alone_s, turn.phases, turn.paused_s()))
        if turn.turns_alone:
            append_log_note(setup, TIMELINE_NOTE.format(steps, turn.timeline()))
    elif turn.pauses:
        setup.waited_for_device(turn.paused_s())
        stood = f"{steps} stood stopped {turn.paused_s():.3f} s in {turn.pauses} pause(s)"
        append_log_note(setup, f"{stood}: timed steps had the device")


def append_log_note(setup: StepSetup, note: str) -> None:
    """A line of the evaluator's own in the evaluation's log (between the commands' output)."""
    with setup.log_path.open("a", encoding="utf-8") as log:
        log.write(f"# aka: {note}\n")


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


def evaluate_candidate(
    task: Task,
    candidate_dir: Path,
    scratch_dir: Path,
    device: DeviceInfo,
    heldout: bool = False,
    through: int = 3,
    trusted_cache: Path | None = None,
    time_limit: RunningTime | None = None,
) -> list[StepOutcome]:
    """Judge the declared sources in `candidate_dir`: compile, correctness, performance.

    Everything is built in `scratch_dir/evaluation` from the pristine task; the steps stop at the
    first failure. Agents that test their own candidates (autotune, llm) call this too, so they
    see exactly what the final evaluation will see. `heldout=True` runs correctness and
    performance on the task's hidden held-out cases instead (the candidate must have compiled).
    `through=2` stops after correctness. `trusted_cache`: the frozen baseline's builds (see
    `BuildCaches`). `time_limit`: when no step may run any longer (a reward request's).
    """
    name = "evaluation_heldout" if heldout else "evaluation"
    eval_dir = scratch_dir / name
    extra = {"AKA_CASE_PROFILE": case_profile(device, heldout=True)} if heldout else {}
    unusable = build_eval_dir(task, eval_dir, candidate_dir, heldout)
    if unusable:
        why = "; ".join(unusable)
        return [StepOutcome(Step.COMPILE, FailureKind.COMPILE_ERROR, f"editable file(s) unusable: {why}")]
    absent = missing_kernels(task, eval_dir)
    if absent:
        return [
            StepOutcome(
                Step.COMPILE, FailureKind.MISSING_KERNEL, f"target kernel function(s) not defined: {', '.join(absent)}"
            )
        ]
    outside = scope_problem(task.original.symbol_scopes(), task.directory, eval_dir) if task.original else None
    if outside is not None:
        return [
            StepOutcome(Step.COMPILE, FailureKind.POLICY_VIOLATION, f"edited outside its editable symbols: {outside}")
        ]
    steps = [
        s
        for s in (Step.COMPILE, Step.CORRECTNESS, Step.PERFORMANCE)[:through]
        if s is not Step.PERFORMANCE or task.config.performance_command
    ]
    setup = StepSetup(
        task,
        device,
        eval_dir,
        scratch_dir / f".reports_{name}",
        scratch_dir / f"{name}.log",
        extra,
        rebuild=lambda: build_eval_dir(task, eval_dir, candidate_dir, heldout),
        time_limit=time_limit,
    )
    return run_steps(setup, [(s, Target.CANDIDATE) for s in steps], trusted_cache=trusted_cache)


def run_steps(
    setup: StepSetup,
    steps: list[tuple[Step, Target]],
    trusted_cache: Path | None = None,
    shared_cache: Path | None = None,
) -> list[StepOutcome]:
    """Run `steps` in order, stopping at the first that does not pass; their commands start
    together (see `Prestarted`) and share a build cache (see `BuildCaches`) where that is safe:
    for aka.harness scripts. `shared_cache` keeps the shared builds (else a temporary folder).
    The original's formats keep Triton's cache across the commands: in `shared_cache` when the
    pristine task is measured, else in a copy of `trusted_cache` (the frozen baseline's)."""
    owned: Path | None = None
    if setup.task.original is not None:  # the original's commands keep Triton's cache (aka.compat.steps)
        builds = shared_cache  # the pristine task's own builds, frozen with its baseline
        if builds is None:  # a candidate's: a copy of the frozen builds, kept across its commands
            builds = owned = Path(tempfile.mkdtemp(prefix="builds-", dir=setup.eval_dir.parent))
            if trusted_cache is not None and trusted_cache.is_dir():
                shutil.copytree(trusted_cache, owned, dirs_exist_ok=True, symlinks=True)
        else:
            builds.mkdir(parents=True, exist_ok=True)
        setup = dataclasses.replace(setup, caches=BuildCaches(kept=builds))
    elif uses_aka_harness(setup.task, [s for s, _ in steps], setup.eval_dir):
        warm_bytecode(SRC_ROOT)
        if shared_cache is None:
            owned = Path(tempfile.mkdtemp(prefix="builds-", dir=setup.eval_dir.parent))
        else:
            shared_cache.mkdir(parents=True, exist_ok=True)
        setup = dataclasses.replace(setup, caches=BuildCaches(shared_cache or owned, trusted_cache))
    prestarted = Prestarted.start(setup, steps)
    outcomes: list[StepOutcome] = []
    try:
        at = 0
        while at < len(steps) and all(o.passed for o in outcomes):
            step, target = steps[at]
            step_started(step.value)
            if prestarted is not None and _together(setup, steps, at, prestarted):
                together = run_compile_and_correctness(setup, target, prestarted)
                if together is None:  # an infrastructure error beside the other step: both again, in order
                    append_log_note(setup, "an infrastructure error with the steps side by side: judged again in order")
                    together = [run_step(setup, Step.COMPILE, target)]
                    if together[0].passed:
                        together.append(run_step(setup, Step.CORRECTNESS, target))
                outcomes += together
                at += 2
            else:
                outcomes.append(run_step(setup, step, target, prestarted))
                at += 1
    finally:
        if prestarted is not None:
            prestarted.abandon()
        if owned is not None:
            remove_tree(owned)
    return outcomes
