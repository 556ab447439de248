"""The validator's deterministic checks of one task, each a `Check` with its evidence.

Every check that runs code runs it as a run would: the task's reference in a probe process of
its own (`aka.validation.probe`), candidates through the real evaluator
(`aka.evaluation.steps.evaluate_candidate`) from a fresh evaluation directory.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aka.config.tasks import Task
from aka.device import DeviceInfo
from aka.evaluation.device_lock import run_sharing_device
from aka.evaluation.eval_dir import build_eval_dir
from aka.evaluation.kernel_check import missing_kernels
from aka.evaluation.step_process import RunningTime
from aka.evaluation.step_spec import Step, case_profile, step_timeout
from aka.evaluation.steps import INFRA_ATTEMPTS, INFRA_RETRY_WAIT_S, StepOutcome, evaluate_candidate
from aka.results.task_result import FailureKind
from aka.validation.report import Check, Evidence, Status, excerpt
from aka.validation.static_scan import scan_task

HANG_WARN_SHARE = 0.5  # a step that needs more than half of its timeout is close to one
AA_BAND = 0.05  # the A/A speedup of the untouched baseline must lie within 1 +- 5%


class ValidationStopped(Exception):
    """A validation running tasks side by side is stopping: the tasks still running start nothing more."""


# Set when `aka validate --parallel` stops (SIGTERM, an error in another task).
stopping = threading.Event()


def _unless_stopping() -> None:
    if stopping.is_set():
        raise ValidationStopped("the validation is stopping")


@dataclass
class Evaluation:
    """One evaluation of a candidate, with what the checks read from it."""

    label: str
    outcomes: list[StepOutcome]
    duration_s: float
    deadline_s: float
    evidence: list[Evidence] = field(default_factory=list)

    @property
    def failed(self) -> StepOutcome | None:
        return next((o for o in self.outcomes if not o.passed), None)


def evaluate(
    task: Task, candidate: Path, scratch: Path, device: DeviceInfo, label: str, through: int, heldout: bool = False
) -> Evaluation:
    """The real evaluator on `candidate`'s editable files, with a time limit of the steps' own timeouts
    (its waits for the device not counted). An `infra_error` is no verdict on the candidate, and
    the usual one is passing (the GPU's memory taken by whatever else runs on it: session 39):
    the evaluation is made again, up to `INFRA_ATTEMPTS` in all, each attempt in the evidence."""
    steps = (Step.COMPILE, Step.CORRECTNESS, Step.PERFORMANCE)[:through]
    budget = sum(step_timeout(task, s) for s in steps) + 60.0
    start = time.monotonic()
    evidence: list[Evidence] = []
    for attempt in range(1, INFRA_ATTEMPTS + 1):
        _unless_stopping()
        outcomes = evaluate_candidate(
            task, candidate, scratch, device, heldout=heldout, through=through, time_limit=RunningTime(budget)
        )
        _unless_stopping()  # its steps may have been killed under it: that is no verdict on the candidate
        infra = next((o for o in outcomes if o.failure is FailureKind.INFRA_ERROR), None)
        retried = infra is not None and attempt < INFRA_ATTEMPTS
        evidence += _evidence(outcomes, f"attempt {attempt} of {INFRA_ATTEMPTS} (infra_error, made again): " * retried)
        if not retried:
            break
        time.sleep(INFRA_RETRY_WAIT_S)
    return Evaluation(label, outcomes, time.monotonic() - start, budget, evidence)


def _evidence(outcomes: list[StepOutcome], prefix: str) -> list[Evidence]:
    evidence = [
        Evidence(
            command=f"{prefix}{o.step.value}: {c.command}",
            exit_code=c.exit_code,
            duration_s=round(c.seconds, 2),
            output_excerpt=excerpt(c.output_tail or "", 600),
        )
        for o in outcomes
        for c in o.commands
    ]
    if not evidence and outcomes:
        first = outcomes[0]
        evidence = [
            Evidence(
                command=f"{prefix}{first.step.value}: (before any command)",
                output_excerpt=f"{first.failure.value}: {first.message or ''}",
            )
        ]
    return evidence


def describe(outcome: StepOutcome | None) -> str:
    if outcome is None:
        return "passes"
    return f"{outcome.step.value}: {outcome.failure.value}: {(outcome.message or '').strip()[:400]}"


def schema_check(task: Task) -> Check:
    config = task.config
    return Check(
        name="schema",
        status=Status.PASS,
        message=f"config.yaml loads: {task.family}, baseline {config.baseline_source.value}, "
        f"{len(config.source_file_path)} editable file(s)",
        evidence=[Evidence(command=f"aka.config.tasks.load_task({task.directory / 'config.yaml'})", exit_code=0)],
    )


def files_check(task: Task, scratch: Path, skeleton: bool, solution: Path | None) -> Check:
    """Editable, hidden and harness files present; the target kernels defined (in the solution, for a skeleton)."""
    start = time.monotonic()
    problems = [
        f"editable file {rel} is missing"
        for rel in task.config.source_file_path
        if not (task.directory / rel).is_file()
    ]
    problems += [
        f"hidden file {rel} is missing" for rel in task.config.hidden_files if not (task.directory / rel).is_file()
    ]
    commands = [c for step in Step for c in (getattr(task.config, f"{step.value}_command", None) or [])]
    problems += [
        f"{word} (named by a step command) is missing"
        for c in commands
        for word in c.split()
        if word.endswith(".py") and not (task.directory / word).is_file()
    ]
    static = scratch / "static"
    source = solution if skeleton else None
    build_eval_dir(task, static, source)
    absent = [] if skeleton and solution is None else missing_kernels(task, static)
    problems += [f"target kernel {k} is not defined" for k in absent]
    kernels = ", ".join(task.config.target_kernel_functions) or "none declared"
    note = (
        " (skeleton: checked in the solution)"
        if skeleton and solution
        else " (skeleton without a solution: not checked)"
        if skeleton
        else ""
    )
    return Check(
        name="files_and_symbols",
        status=Status.FAIL if problems else Status.PASS,
        message="; ".join(problems) or f"all files present; target kernels {kernels} defined{note}",
        evidence=[
            Evidence(
                command="file checks and aka.evaluation.kernel_check.missing_kernels",
                exit_code=1 if problems else 0,
                duration_s=round(time.monotonic() - start, 2),
            )
        ],
    )


def self_containment_check(task: Task) -> Check:
    start = time.monotonic()
    problems, read = scan_task(task.directory)
    return Check(
        name="self_containment",
        status=Status.FAIL if problems else Status.PASS,
        message="; ".join(problems[:10]) or f"{read} file(s) read: no network, absolute path or outside read",
        evidence=[
            Evidence(
                command="aka.validation.static_scan.scan_task (imports, string constants, path climbs)",
                exit_code=1 if problems else 0,
                duration_s=round(time.monotonic() - start, 2),
                output_excerpt=excerpt("\n".join(problems)),
            )
        ],
    )


@dataclass
class Probe:
    data: dict[str, Any] | None
    evidence: Evidence


def run_probe(task: Task, scratch: Path, device: DeviceInfo, heldout: bool) -> Probe:
    """The probe in a copy of the pristine task, with the correctness step's timeout."""
    _unless_stopping()
    folder = scratch / "probe"
    build_eval_dir(task, folder, None, heldout)
    profile = case_profile(device)
    command = [sys.executable, "-m", "aka.validation.probe", profile]
    if heldout:
        command.append(case_profile(device, heldout=True))
    env = dict(os.environ)
    if device.kind == "cpu":
        env["TRITON_INTERPRET"] = "1"
    start = time.monotonic()
    timeout = step_timeout(task, Step.CORRECTNESS)
    try:
        done = run_sharing_device(device, command, folder, env, timeout)  # never beside a timed step
        code, output = done.returncode, done.stdout + done.stderr
    except subprocess.TimeoutExpired as exc:
        stderr = exc.stderr.decode(errors="replace") if isinstance(exc.stderr, bytes) else exc.stderr or ""
        code, output = None, f"timed out after {timeout:.0f} s: {stderr}"
    data = None
    if code == 0:
        lines = [line for line in output.splitlines() if line.startswith("{")]
        data = json.loads(lines[-1]) if lines else None
    shown = (
        output
        if data is None
        else "\n".join(
            f"{part}: {data[part]['cases']} case(s), {data[part]['checks']} input set(s) computed twice, "
            f"{len(data[part]['problems'])} problem(s)"
            for part in ("cases", "heldout")
            if part in data
        )
    )
    evidence = Evidence(
        command=" ".join(["python", *command[1:]]),
        exit_code=code,
        duration_s=round(time.monotonic() - start, 2),
        output_excerpt=excerpt(shown, 800),
    )
    return Probe(data, evidence)


def reference_check(probe: Probe) -> Check:
    if probe.data is None:
        return Check(
            name="reference_deterministic",
            status=Status.FAIL,
            message="the probe could not run the task's reference (see the output)",
            evidence=[probe.evidence],
        )
    cases = probe.data["cases"]
    problems = cases["problems"]
    return Check(
        name="reference_deterministic",
        status=Status.FAIL if problems else Status.PASS,
        message="; ".join(problems[:5])
        or f"inputs and reference identical on a second run and finite on "
        f"{cases['checks']} input set(s) of {cases['cases']} case(s)",
        evidence=[probe.evidence],
    )


def heldout_check(probe: Probe, evaluation: Evaluation | None, skeleton: bool) -> Check:
    held = (probe.data or {}).get("heldout")
    evidence = [probe.evidence, *(evaluation.evidence if evaluation else [])]
    if held is None:
        return Check(
            name="heldout_cases", status=Status.FAIL, message="the probe did not read heldout.py", evidence=evidence
        )
    problems = list(held["problems"])
    failed = evaluation.failed if evaluation else None
    if failed is not None and failed.skipped:
        return Check(
            name="heldout_cases",
            status=Status.WARN if not problems else Status.FAIL,
            message="; ".join(problems)
            or f"reference fine on {held['cases']} case(s); the baseline's "
            f"held-out evaluation needs a GPU ({describe(failed)})",
            evidence=evidence,
        )
    if failed is not None:
        problems.append(f"the {'solution' if skeleton else 'baseline'} fails its held-out cases: {describe(failed)}")
    return Check(
        name="heldout_cases",
        status=Status.FAIL if problems else Status.PASS,
        message="; ".join(problems[:5])
        or f"{held['cases']} held-out case(s): reference deterministic and "
        f"finite, the {'solution' if skeleton else 'baseline'} passes them",
        evidence=evidence,
    )


def baseline_check(untouched: Evaluation, solution: Evaluation | None, skeleton: bool) -> Check:
    """The untouched sources pass (a skeleton's fail cleanly and its solution passes)."""
    failed = untouched.failed
    evidence = untouched.evidence + (solution.evidence if solution else [])
    if skeleton:
        clean = failed is not None and failed.failure is not FailureKind.INFRA_ERROR
        problems = (
            []
            if clean or (failed and failed.skipped)
            else [f"the untouched skeleton does not fail cleanly: {describe(failed)}"]
        )
        if solution is None:
            return Check(
                name="baseline_correct",
                status=Status.FAIL if problems else Status.WARN,
                message="; ".join(problems) or "skeleton fails cleanly; no solution to prove it solvable (--solutions)",
                evidence=evidence,
            )
        failed = solution.failed
        label = "solution"
    else:
        problems, label = [], "baseline"
    if failed is not None and failed.skipped:
        return Check(
            name="baseline_correct",
            status=Status.FAIL if problems else Status.WARN,
            message="; ".join(problems) or f"needs a GPU: {describe(failed)}",
            evidence=evidence,
        )
    if failed is not None:
        problems.append(f"the {label} does not pass: {describe(failed)}")
    return Check(
        name="baseline_correct",
        status=Status.FAIL if problems else Status.PASS,
        message="; ".join(problems) or f"the {label} compiles and is correct on every case",
        evidence=evidence,
    )


def hang_check(task: Task, evaluations: list[Evaluation]) -> Check:
    """Every step finished within its timeout (the evaluation within its deadline); close calls warned."""
    problems, close, lines = [], [], []
    for evaluation in evaluations:
        for outcome in evaluation.outcomes:
            limit = step_timeout(task, outcome.step)
            seconds = sum(c.seconds for c in outcome.commands)
            lines.append(f"{evaluation.label} {outcome.step.value}: {seconds:.1f} s of {limit:.0f} s")
            if (
                outcome.deadline_cut
                or any(c.timed_out for c in outcome.commands)
                or outcome.failure is FailureKind.TIMEOUT
            ):
                problems.append(f"{evaluation.label} {outcome.step.value} did not finish within {limit:.0f} s")
            elif seconds > HANG_WARN_SHARE * limit:
                close.append(f"{evaluation.label} {outcome.step.value} took {seconds:.0f} s of its {limit:.0f} s")
    status = Status.FAIL if problems else Status.WARN if close else Status.PASS
    return Check(
        name="hang",
        status=status,
        message="; ".join(problems or close) or "; ".join(lines),
        evidence=[
            Evidence(
                command="step durations of the evaluations above against their timeouts",
                exit_code=1 if problems else 0,
                duration_s=round(sum(e.duration_s for e in evaluations), 2),
                output_excerpt="\n".join(lines),
            )
        ],
    )


def aa_check(device: DeviceInfo, evaluation: Evaluation | None) -> Check:
    """The untouched baseline timed against itself: every case's speedup within 1 +- AA_BAND."""
    if device.kind == "cpu":
        return Check(name="aa_timing", status=Status.WARN, message="no GPU: A/A timing is measured on the device only")
    if evaluation is None:
        return Check(
            name="aa_timing", status=Status.WARN, message="nothing passing to time (a skeleton without a solution)"
        )
    perf = next((o for o in evaluation.outcomes if o.step is Step.PERFORMANCE), None)
    if perf is None or not perf.passed:
        return Check(
            name="aa_timing",
            status=Status.WARN if perf is None or perf.skipped else Status.FAIL,
            message=f"no performance step result: {describe(perf)}",
            evidence=evaluation.evidence,
        )
    speedups = [(c.id, c.speedup) for c in perf.cases if c.speedup is not None]
    outside = [f"{case} {s:.3f}x" for case, s in speedups if abs(s - 1.0) > AA_BAND]
    shown = ", ".join(f"{case} {s:.3f}x" for case, s in speedups)
    return Check(
        name="aa_timing",
        status=Status.FAIL if outside else Status.PASS if speedups else Status.WARN,
        message=f"A/A outside 1 +- {AA_BAND:.0%}: {', '.join(outside)}"
        if outside
        else f"A/A speedups {shown or 'none reported'}",
        evidence=evaluation.evidence,
    )
