"""One step of an original-format task: its commands run as ours do, its results read as the
original defines them.

Each command runs in the same sandboxed step process as our own tasks' (fresh evaluation
directory, read-only file system, own namespaces, killing timeout). Before each, the perf helpers
are written (`aka.compat.perf_helpers`) and every result file a step could read is removed
(`aka.compat.result_files`), so only what this command wrote is read. Then:

- schema v1: compile and correctness pass when the command exits 0 and its own report (if it
  wrote one) says `ok`; performance reads the result files by the original's key priority (a
  `-1.0` case fails the step: the candidate gets no speedup, as the original scores it), or the
  one declared `GEAK_RESULT_LATENCY_MS=` line;
- schema v2: `runner + [role, action]` (and `validate-task` before the baseline's compile), each
  printing one `ARENA_EVAL_RESULT=` line, parsed and cross-checked with the invocation and the
  task's case manifest (`aka.compat.arena_protocol`).

A result that breaks the protocol, or paired numbers our helpers could not have written, is
`tampering` (the pristine task's own fault while measuring the baseline: an infrastructure
error). Every outcome carries its trust level (`aka.compat.trust`).
"""

from __future__ import annotations

import dataclasses
import os
import re
import shlex
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from aka.compat.arena_protocol import (
    RESULT_PREFIX,
    ArenaProtocolError,
    ArenaResult,
    merge_results,
    parse_command_result,
)
from aka.compat.pairing import ENV_PAIRING
from aka.compat.perf_helpers import materialize_helpers
from aka.compat.result_files import (
    PERFORMANCE_REPORTS,
    FileCase,
    ResultFileError,
    Scalar,
    geak_latency,
    paired_numbers,
    performance_cases,
    remove_stale_results,
    step_report_problem,
)
from aka.compat.self_timed import ENV_SELF_TIMED, merge_sidecar, self_timed_command, with_paired_times
from aka.compat.spec import OriginalSpec
from aka.compat.trust import Trust, default_trust
from aka.config.tasks import Task
from aka.evaluation.device_lock import device_turn
from aka.evaluation.sandbox import detect_sandbox
from aka.evaluation.step_process import StepProcess, StepSetup, append_log, finish_isolated, start_isolated
from aka.evaluation.step_report import CaseReport
from aka.evaluation.step_spec import Step, Target, step_commands
from aka.evaluation.steps import StepOutcome, append_log_note, stepped_aside
from aka.evaluation.warm_parent import script_argv
from aka.process import CommandOutcome
from aka.results.task_result import FailureKind

GEAK_PREFIX = "GEAK_RESULT_LATENCY_MS="
LINE_LIMIT = 1 << 24  # longer output lines are not results
NUMERICAL_KINDS = frozenset({"correctness_failure", "numerical_mismatch", "test_failure"})


@dataclass(frozen=True)
class Invocation:
    command: str
    role: str = ""
    action: str = ""


class StepFailure(Exception):
    def __init__(self, kind: FailureKind, message: str) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message


def _spec(task: Task) -> OriginalSpec:
    assert task.original is not None
    return task.original


def invocations(task: Task, step: Step, target: Target, measuring_baseline: bool) -> list[Invocation]:
    """The step's commands: v1's shell lines; v2's argv for the role (with validate-task first
    when the baseline is measured)."""
    spec = _spec(task)
    if spec.arena is None:
        return [Invocation(command) for command in step_commands(task, step)]
    role = "baseline" if measuring_baseline or target is Target.BASELINE else "candidate"
    found = []
    if measuring_baseline and step is Step.COMPILE:
        found += [
            Invocation(shlex.join(argv), "task", "validate-task")
            for argv in spec.arena.commands.argvs("task", "validate-task")
        ]
    argvs = spec.arena.commands.argvs(role, step.value)
    return found + [Invocation(shlex.join(argv), role, step.value) for argv in argvs]


def original_environment(task: Task, target: Target, measuring_baseline: bool) -> dict[str, str]:
    spec = _spec(task)
    # Autotuning results go to the step's own Triton cache: the separately loaded copies of a
    # kernel that the timing cycles through (aka.compat.pairing.placement_copies) take the first
    # copy's choice instead of tuning again, and in an A/A both sides run the same configuration.
    env = {"PYTHONUNBUFFERED": "1", "TRITON_CACHE_AUTOTUNING": "1"}
    if spec.pairing and target is Target.CANDIDATE and not measuring_baseline:
        env[ENV_PAIRING] = "1"
        if _times_itself(task):
            env[ENV_SELF_TIMED] = "1"  # its calls are paired where it makes them (aka.compat.self_timed)
    if spec.arena is not None:
        env["ARENA_EVAL_PHASE"] = "task_validation" if measuring_baseline else "candidate_evaluation"
    return env


def _times_itself(task: Task) -> bool:
    """The task's performance command is a runner that times its calls itself (read from the
    pristine task, never from the candidate's copy)."""
    return _spec(task).pairing and any(
        self_timed_command(c, task.directory) for c in step_commands(task, Step.PERFORMANCE)
    )


def prepare_directory(task: Task, eval_dir: Path) -> None:
    """The perf helpers in place and no result file left over, before a command runs."""
    materialize_helpers(eval_dir, set(task.config.source_file_path))
    remove_stale_results(eval_dir)


def output_lines(process: StepProcess, prefixes: tuple[str, ...]) -> list[str]:
    """The lines of the command's own output (stdout and stderr) that start with a prefix."""
    found = []
    with process.started.log_path.open("rb") as log:
        log.seek(process.started.offset)
        while chunk := log.readline(LINE_LIMIT):
            if chunk.startswith(tuple(p.encode() for p in prefixes)):
                found.append(chunk.decode("utf-8", errors="replace"))
    return found


def _case_report(case: FileCase, paired: dict[str, float] | None) -> CaseReport:
    fields: dict[str, Any] = {
        "id": case.id,
        "params": case.params,
        "time_ms": case.time_ms,
        "timing_method": case.method,
    }
    if paired is not None:
        fields.update(
            baseline_time_ms=paired["aka_baseline_time_ms"],
            baseline_timing_method=case.method,
            speedup=paired["aka_speedup"],
            speedup_ci_low=paired["aka_speedup_ci_low"],
            speedup_ci_high=paired["aka_speedup_ci_high"],
            samples=int(paired["aka_pairs"]),
        )
    try:
        return CaseReport.model_validate(fields)
    except ValidationError as exc:
        raise StepFailure(FailureKind.TAMPERING, f"case {case.id}: {exc.errors()[0]['msg']}") from None


def _timed_cases(cases: list[FileCase], source: str) -> tuple[list[CaseReport], bool]:
    """Cases and whether every one was paired; a failed case (`-1.0`) fails the step."""
    failed = [c.id for c in cases if c.failed]
    if failed:
        raise StepFailure(
            FailureKind.PERFORMANCE_ERROR,
            f"{len(failed)}/{len(cases)} case(s) failed in the performance step (no positive time in "
            f"{source}, e.g. -1.0): {', '.join(failed[:5])}",
        )
    reports, paired_all = [], True
    for case in cases:
        try:
            paired = paired_numbers(case.record)
        except ResultFileError as exc:
            raise StepFailure(FailureKind.TAMPERING, f"{source}: case {case.id}: {exc}") from None
        paired_all = paired_all and paired is not None
        reports.append(_case_report(case, paired))
    return reports, paired_all


def _v1_result(
    task: Task, step: Step, eval_dir: Path, ran: CommandOutcome, lines: list[str], measuring_baseline: bool
) -> tuple[list[CaseReport], Trust | None]:
    if step is Step.COMPILE:
        problem = None if ran.ok else ran.describe()
        problem = problem or step_report_problem(eval_dir, "compile")
        if problem:
            raise StepFailure(FailureKind.COMPILE_ERROR, problem)
        return [], None
    if step is Step.CORRECTNESS:
        if not ran.ok:
            raise StepFailure(FailureKind.INCORRECT if ran.exit_code == 1 else FailureKind.CRASH, ran.describe())
        problem = step_report_problem(eval_dir, "correctness")
        if problem:
            raise StepFailure(FailureKind.INCORRECT, problem)
        return [
            CaseReport(id="task_checks", correct=True, message="the task's own checks passed (exit status 0)")
        ], None
    if not ran.ok:
        raise StepFailure(FailureKind.CRASH, ran.describe())
    try:
        source, cases = performance_cases(eval_dir, task.family, measuring_baseline)
    except ResultFileError as exc:
        raise StepFailure(FailureKind.PERFORMANCE_ERROR, str(exc)) from None
    if source is not None:
        if not measuring_baseline and _times_itself(task):  # its calls, paired where it made them
            merge_sidecar(eval_dir, [case.record for case in cases])
            cases = with_paired_times(cases)
        reports, paired = _timed_cases(cases, source)
        return reports, Trust.TASK_PROCESS_PAIRED if paired else Trust.TASK_PROCESS
    try:
        latency = geak_latency(lines)
    except ResultFileError as exc:
        raise StepFailure(FailureKind.TAMPERING, str(exc)) from None
    if latency is None:
        raise StepFailure(
            FailureKind.PERFORMANCE_ERROR,
            f"`{ran.command}` exited 0 but wrote no result file with cases "
            f"({', '.join(PERFORMANCE_REPORTS)}) and printed no {GEAK_PREFIX} line",
        )
    reports, _ = _timed_cases([FileCase("test_case_0", latency, method="geak_harness")], GEAK_PREFIX)
    return reports, Trust.TASK_STDOUT_LINE


def _arena_cases(result: ArenaResult) -> tuple[list[CaseReport], bool]:
    reports, paired_all = [], True
    for case in result.cases:
        raw = case.raw
        params: dict[str, Scalar] = {
            str(k): v for k, v in (raw.get("params") or {}).items() if isinstance(v, (str, int, float, bool))
        }
        if isinstance(raw.get("dtype"), str):
            params["dtype"] = raw["dtype"]
        file_case = FileCase(case.test_case_id, raw.get("execution_time_ms"), params, raw.get("benchmark_method"))
        if result.action != "performance":
            reports.append(CaseReport(id=case.test_case_id, params=params, correct=True))
            continue
        measurement = (raw.get("metadata") or {}).get("harness_measurement")
        try:
            paired = paired_numbers(measurement) if isinstance(measurement, dict) else None
        except ResultFileError as exc:
            raise StepFailure(FailureKind.TAMPERING, f"{RESULT_PREFIX} case {case.test_case_id}: {exc}") from None
        paired_all = paired_all and paired is not None
        reports.append(_case_report(file_case, paired))
    return reports, paired_all


def _arena_result(
    task: Task, invocation: Invocation, ran: CommandOutcome, lines: list[str], cpu: bool, measuring_baseline: bool
) -> ArenaResult:
    """The invocation's checked result; a protocol break is tampering (the task's fault in validate-task)."""
    spec = _spec(task)
    assert spec.arena is not None
    blame = FailureKind.INFRA_ERROR if invocation.role == "task" else FailureKind.TAMPERING
    if not any(line.startswith(RESULT_PREFIX) for line in lines):
        kind = (
            FailureKind.INFRA_ERROR
            if invocation.role == "task"
            else (FailureKind.COMPILE_ERROR if invocation.action == "compile" else FailureKind.CRASH)
        )
        raise StepFailure(kind, f"{ran.describe()} (printed no {RESULT_PREFIX} line)")
    try:
        result = parse_command_result(
            lines, role=invocation.role, action=invocation.action, returncode=ran.exit_code, cpu=cpu
        )
        if spec.arena.manifest is not None:
            spec.arena.manifest.validate(result)
    except ArenaProtocolError as exc:
        raise StepFailure(blame, f"{RESULT_PREFIX} of `{invocation.command}`: {exc}") from None
    if invocation.role == "task" and not result.passed:
        raise StepFailure(FailureKind.INFRA_ERROR, f"validate-task failed on the pristine task: {result.reason}")
    return result


def _arena_failure(result: ArenaResult, step: Step, accept_diagnostic: bool) -> StepFailure | None:
    if result.passed:
        return None
    kinds = {result.failure_kind, *(c.raw.get("failure_kind") for c in result.cases if c.status == "FAIL")}
    if accept_diagnostic and step is Step.CORRECTNESS and kinds <= {"numerical_mismatch"}:
        return None  # the baseline's correctness is diagnostic: a numerical mismatch is accepted
    reason = (result.reason or "FAIL")[:500]
    if step is Step.COMPILE:
        return StepFailure(FailureKind.COMPILE_ERROR, reason)
    if step is Step.CORRECTNESS or kinds & NUMERICAL_KINDS:
        return StepFailure(FailureKind.INCORRECT, reason)
    return StepFailure(FailureKind.PERFORMANCE_ERROR, reason)


GATE = Path(__file__).resolve().parent / "gate" / "gate.py"
ENV_GATE = "AKA_COMPAT_GATE"  # 0: every command starts inside its turn (to compare the two on a GPU)
SHELL_SPECIALS = set("$`\\*?~!#[]{}\n\r")  # expansions, comments, a second line: such a command is left to bash


def gated_command(command: str) -> str | None:
    """`python3 SCRIPT.py ARGS...` or `pytest ARGS...` (nothing in it a shell would act on but the
    quoting) as a command that starts now, imports torch, and runs once its token comes
    (`gate/gate.py`); None for any other command."""
    if SHELL_SPECIALS & set(command):
        return None
    lexer = shlex.shlex(command, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    try:
        words = list(lexer)
    except ValueError:  # unbalanced quotes
        return None
    if not words or any(set(word) <= set(lexer.punctuation_chars) for word in words):  # ; & | < > ( )
        return None
    if words[0] == "pytest":
        return shlex.join(["python3", str(GATE), "--pytest", *words[1:]])
    if script_argv(words) is None:
        return None
    return shlex.join([words[0], str(GATE), *words[1:]])


def _run_in_turn(
    env_setup: StepSetup, setup: StepSetup, command: str, step: Step, target: Target
) -> tuple[CommandOutcome, StepProcess, float]:
    """One of the original's commands in its turn on the device, and the time the evaluation had
    left as it began. A Python script is started before the turn, gated (`gated_command`): its
    start-up and torch's import no longer take turn time, which a timed turn keeps every other
    evaluation's timed step waiting through. Anything else starts inside its turn: it runs at
    once, and GPU work started before the turn would run inside another evaluation's timed step.
    Verdicts name the task's own command; the log shows the gated one that ran."""
    gated = gated_command(command) if os.environ.get(ENV_GATE, "1").strip() != "0" else None
    process = start_isolated(env_setup, gated, step, target) if gated else None
    try:
        with device_turn(setup.device, exclusive=step is Step.PERFORMANCE) as turn:
            began = time.monotonic()
            setup.waited_for_device(turn.waited)
            # Triton's cache (kernels, autotuning) is kept across the evaluation's commands
            # (`BuildCaches.kept`, set by `run_steps`): a later command compiles nothing again.
            # A gated command's cache is seeded from it as its token is sent (`finish_isolated`).
            process = process or start_isolated(env_setup, command, step, target)
            left = setup.time_left()
            ran, _, _ = finish_isolated(process, left, turn, setup.hard_end())  # they never use our result pipe
    except BaseException:
        if process is not None:  # it may never have got its turn
            process.abandon()
        raise
    held = time.monotonic() - began - turn.paused_s()  # stood stopped for timed steps: not held
    stepped_aside(setup, turn, step.value)
    # the original's commands log no turns of their own: HELD_NOTE (benchmarks/device_holds.py reads it too)
    how = "gated, started before its turn" if gated else "started in its turn"
    append_log_note(
        setup, f"original {step.value} command held the device {held:.3f} s after waiting {turn.waited:.3f} s ({how})"
    )
    return dataclasses.replace(ran, command=command), process, left


HELD_NOTE = re.compile(r"^# aka: original (\w+) command held the device ([0-9.]+) s after waiting ([0-9.]+) s", re.M)


def run_original_step(setup: StepSetup, step: Step, target: Target) -> StepOutcome:
    """Run every command of `step` for an original-format task; the first failure decides."""
    task, spec = setup.task, _spec(setup.task)
    measuring = setup.measuring_baseline
    outcome = StepOutcome(step, isolation=list(detect_sandbox().features), trust=default_trust(spec.schema).value)
    env_setup = dataclasses.replace(
        setup, extra_env={**setup.extra_env, **original_environment(task, target, measuring)}
    )
    arena: list[ArenaResult] = []
    try:
        for invocation in invocations(task, step, target, measuring):
            if setup.rebuild is not None:
                setup.rebuild()
            prepare_directory(task, setup.eval_dir)
            ran, process, left = _run_in_turn(env_setup, setup, invocation.command, step, target)
            lines = output_lines(process, (RESULT_PREFIX, GEAK_PREFIX))
            append_log(process.started.log_path, setup.log_path)
            outcome.commands.append(ran)
            if ran.timed_out:
                outcome.deadline_cut = left < process.timeout
                raise StepFailure(FailureKind.TIMEOUT, ran.describe())
            if ran.stopped or ran.breach:
                raise StepFailure(FailureKind.TAMPERING, ran.describe())
            if ran.flooded is not None:  # its result lines cannot be trusted to be its own last word
                raise StepFailure(
                    FailureKind.COMPILE_ERROR if step is Step.COMPILE else FailureKind.CRASH, ran.describe()
                )
            if spec.arena is None:
                cases, trust = _v1_result(task, step, setup.eval_dir, ran, lines, measuring)
                outcome.cases += cases
                outcome.trust = (trust or Trust(outcome.trust)).value
                continue
            result = _arena_result(task, invocation, ran, lines, not setup.device.is_gpu, measuring)
            if invocation.role != "task":
                arena.append(result)
        if arena:
            merged = merge_results(arena)
            failure = _arena_failure(
                merged, step, measuring and spec.arena is not None and spec.arena.diagnostic_baseline
            )
            if failure is not None:
                raise failure
            cases, paired = _arena_cases(merged)
            outcome.cases += cases
            if step is Step.PERFORMANCE:
                outcome.trust = (Trust.ARENA_LINE_PAIRED if paired else Trust.ARENA_LINE).value
    except ArenaProtocolError as exc:  # two commands of one action reported one case
        outcome.failure = FailureKind.INFRA_ERROR if measuring else FailureKind.TAMPERING
        outcome.message = f"{RESULT_PREFIX}: {exc}"
        return outcome
    except StepFailure as failure:
        outcome.failure, outcome.message = failure.kind, failure.message
        return outcome
    if step is Step.PERFORMANCE and not any(c.time_ms for c in outcome.cases):
        outcome.failure, outcome.message = FailureKind.PERFORMANCE_ERROR, "performance step reported no timed case"
    return outcome
