"""One task, start to finish: workspace, baseline, prompt, agent, independent evaluation, result."""

from __future__ import annotations

import hashlib
import logging
import shutil
import time
import traceback
from dataclasses import dataclass
from pathlib import Path

from aka import __version__
from aka.agents.registry import AgentContext
from aka.compat.perf_helpers import helper_files, materialize_helpers
from aka.config.run_config import LoadedRunConfig
from aka.config.task_config import BaselineSource
from aka.config.tasks import IGNORED_NAMES, Task, task_files, task_identity
from aka.device import DeviceInfo
from aka.evaluation.baseline import BaselineRecord, baseline_builds, frozen_or_measured
from aka.evaluation.eval_dir import build_eval_dir, copy_original_sources
from aka.evaluation.speedup import BASELINE_SLOWDOWN_LIMIT, apply_timings, slowed_baselines
from aka.evaluation.step_process import run_confined
from aka.evaluation.step_report import CaseReport
from aka.evaluation.step_spec import Step, Target, step_environment
from aka.evaluation.steps import StepOutcome, evaluate_candidate
from aka.evaluation.wire import HELDOUT_FILE
from aka.progress import Phase, phase
from aka.results.scoring import Scorer, finite_score
from aka.results.task_result import (
    CHEATING_KINDS,
    AgentOutcome,
    FailureKind,
    HeldoutOutcome,
    HeldoutResult,
    TaskResult,
    TaskStatus,
    write_task_result,
)
from aka.run.completion import source_hashes, write_completion
from aka.run.disk_space import disk_full, free_agent_scratch, full_after_evaluation, is_disk_full, low_on_space
from aka.run.layout import AGENT_WORK_DIR, EVALUATION_DIR, REPOSITORIES_DIR, new_task_workspace
from aka.run.prompt import build_prompt
from aka.run.repository import materialize
from aka.trees import UnusableFileError, agent_file_digest, read_agent_file

logger = logging.getLogger(__name__)


WRONG_WHEN_TIMED = frozenset({FailureKind.INCORRECT, *CHEATING_KINDS})


@dataclass(frozen=True)
class RunContext:
    """What a task runs with; `arm`, `repeat` and `label` name the trial of a multi-arm or repeated run."""

    run_dir: Path
    config: LoadedRunConfig
    device: DeviceInfo
    scorer: Scorer
    arm: str | None = None
    repeat: int | None = None
    label: str | None = None
    worker: str | None = None  # the worker of a parallel run that runs the trial (aka.parallel.pool)


def _run_agent(ctx: RunContext, task: Task, workspace: Path, prompt: str, baseline: BaselineRecord) -> AgentOutcome:
    work = workspace / AGENT_WORK_DIR
    before = source_hashes(workspace, task)
    context = AgentContext(
        agent_name=ctx.config.agent_name,
        settings=ctx.config.agent_settings,
        options=ctx.config.agent_options,
        task_name=task.name,
        prompt=prompt,
        editable_files=tuple(task.config.source_file_path),
        log_path=workspace / "agent.log",
        task=task,
        device=ctx.device,
        baseline=baseline,
    )
    start = time.monotonic()
    try:
        outcome = ctx.config.agent.launch(context, task.directory, work)
    except Exception as exc:
        logger.exception("agent %s raised on %s", ctx.config.agent_name, task.name)
        outcome = AgentOutcome(
            agent=ctx.config.agent_name, ok=False, exit_reason="exception", message=f"{type(exc).__name__}: {exc}"
        )
    after = source_hashes(workspace, task)
    return outcome.model_copy(
        update={
            "wall_seconds": round(time.monotonic() - start, 3),
            "files_changed": [rel for rel in task.config.source_file_path if before[rel] != after[rel]],
        }
    )


def copy_for_agent(task: Task, work: Path) -> None:
    """The agent's copy of the task: everything but caches and the hidden (held-out) files, plus
    the original editable files in `.aka_baseline/`, where the harness's performance step looks
    for the baseline, so the agent can time its edits by hand as the evaluation will."""
    hidden = {task.directory / rel for rel in task.config.hidden_files}

    def ignore(directory: str, names: list[str]) -> set[str]:
        skipped = set(shutil.ignore_patterns(*IGNORED_NAMES, "*.pyc")(directory, names))
        return skipped | {n for n in names if Path(directory) / n in hidden}

    shutil.copytree(task.directory, work, ignore=ignore)
    copy_original_sources(task, work)
    if task.original is not None:  # the original's perf helpers, so the agent's own runs work
        materialize_helpers(work, set(task.config.source_file_path))


def judged_files(task: Task) -> list[str]:
    """What the judge reads in the agent's copy: the task's files (tampering) and the declared
    sources; anything else there is the agent's scratch."""
    return [p.relative_to(task.directory).as_posix() for p in task_files(task.directory)] + list(
        task.config.source_file_path
    )


def tampered_files(task: Task, work: Path) -> list[str]:
    """Task files other than the editable ones that the agent changed or deleted in its copy.

    They never reach the evaluation (it starts from the pristine task), but trying is cheating."""
    editable = set(task.config.source_file_path) | set(task.config.hidden_files)
    helpers = helper_files(task.directory, editable) if task.original is not None else {}
    changed = []
    for path in task_files(task.directory):
        rel = path.relative_to(task.directory).as_posix()
        if rel in editable:
            continue
        expected = helpers[rel].encode() if rel in helpers else path.read_bytes()
        try:
            unchanged = read_agent_file(work, rel, limit=len(expected)) == expected
        except UnusableFileError:  # grown, linked or made unreadable
            unchanged = False
        if not unchanged:
            changed.append(rel)
    return changed


def edited_sources(task: Task, work: Path) -> list[str]:
    """The editable files the agent changed, created or deleted in its copy."""
    edited = []
    for rel in task.config.source_file_path:
        original = task.directory / rel
        before = hashlib.sha256(original.read_bytes()).hexdigest() if original.is_file() else None
        if agent_file_digest(work, rel) != before:  # an unusable file counts as edited
            edited.append(rel)
    return edited


def _run_exports(task: Task, workspace: Path, device: DeviceInfo) -> dict[str, bool]:
    """Run the task's exports for an accepted candidate, confined as a step (they run its code);
    each command's exit status is recorded."""
    export_dir = workspace / "exports"
    export_dir.mkdir(exist_ok=True)
    build_eval_dir(task, workspace / EVALUATION_DIR, workspace / AGENT_WORK_DIR)
    env = step_environment(
        task, device, Step.EXPORT, Target.CANDIDATE, workspace / EVALUATION_DIR, {"AKA_EXPORT_DIR": str(export_dir)}
    )
    return {
        command: run_confined(
            task,
            device,
            command,
            workspace / EVALUATION_DIR,
            env,
            task.config.export_timeout,
            workspace / "exports.log",
            [export_dir],
        ).ok
        for command in task.config.export_command
    }


def _heldout(ctx: RunContext, task: Task, workspace: Path, result: TaskResult) -> HeldoutResult | None:
    if HELDOUT_FILE not in task.config.hidden_files or not result.pass_compilation:
        return None
    return evaluate_heldout(
        task,
        workspace / AGENT_WORK_DIR,
        workspace,
        ctx.device,
        result.speedup_ratio,
        baseline_builds(ctx.run_dir, task),
    )


def evaluate_heldout(
    task: Task,
    candidate_dir: Path,
    scratch: Path,
    device: DeviceInfo,
    speedup: float | None,
    trusted_cache: Path | None = None,
) -> HeldoutResult:
    """Correctness and paired speed of the candidate on the hidden held-out cases, next to the
    baseline's own held-out correctness (the PyTorch reference is correct by definition); during a
    run, and after it (`aka heldout`, aka.heldout.post_run). `speedup`: the candidate's on the
    task's own cases, for the generalization gap."""
    outcomes = evaluate_candidate(task, candidate_dir, scratch, device, heldout=True, trusted_cache=trusted_cache)
    by_step = {o.step: o for o in outcomes}
    correctness, performance = by_step.get(Step.CORRECTNESS), by_step.get(Step.PERFORMANCE)
    candidate_ok = (
        correctness is not None
        and correctness.passed
        and (performance is None or performance.failure not in WRONG_WHEN_TIMED)
    )
    baseline_ok = True
    if task.config.baseline_source is BaselineSource.SOURCE:
        baseline_ok = all(
            o.passed
            for o in evaluate_candidate(
                task, task.directory, scratch / "heldout_baseline", device, heldout=True, through=2
            )
        )
    outcome = {
        (True, True): HeldoutOutcome.BOTH_PASS,
        (True, False): HeldoutOutcome.OPT_REGRESSION,
        (False, True): HeldoutOutcome.OPT_IMPROVEMENT,
        (False, False): HeldoutOutcome.BOTH_FAIL,
    }
    timed = TaskResult(task_name=task.name, task_type=task.family)
    if candidate_ok and performance is not None and performance.passed:  # as `_fully_timed`
        apply_timings(
            timed,
            BaselineRecord(task_name=task.name, task_identity="", device="", source=task.config.baseline_source),
            performance.cases,
        )
    gap = round(speedup - timed.speedup_ratio, 6) if speedup is not None and timed.speedup_ratio is not None else None
    failed = next((o for o in outcomes if not o.passed), None)
    return HeldoutResult(
        outcome=outcome[(baseline_ok, candidate_ok)],
        baseline_correct=baseline_ok,
        candidate_correct=candidate_ok,
        speedup_ratio=timed.speedup_ratio,
        generalization_gap=gap,
        # the kind, not the message: a candidate's own text carried the held-out inputs it met
        # into the result (red team, session 50); the held-out evaluation's log has the details
        message=f"{failed.step.value}: {failed.failure.value} on the held-out cases" if failed else None,
        cases=timed.cases,
    )


def _status(result: TaskResult) -> TaskStatus:
    if result.failure_kind is FailureKind.INFRA_ERROR:
        return TaskStatus.INFRA
    if result.failure_kind is FailureKind.SKIPPED:
        return TaskStatus.SKIP
    if result.pass_compilation and result.pass_correctness:
        return TaskStatus.PASS
    return TaskStatus.PARTIAL if result.pass_compilation else TaskStatus.FAIL


def _judge(
    ctx: RunContext,
    task: Task,
    baseline: BaselineRecord,
    agent: AgentOutcome,
    outcomes: list[StepOutcome],
    tampered: list[str],
) -> TaskResult:
    return judge_outcomes(
        task,
        baseline,
        ctx.device,
        ctx.scorer,
        ctx.config.config.scorer,
        agent,
        outcomes,
        tampered,
        ctx.config.agent_settings.model,
    )


def judge_outcomes(
    task: Task,
    baseline: BaselineRecord,
    device: DeviceInfo,
    scorer: Scorer,
    scorer_name: str,
    agent: AgentOutcome,
    outcomes: list[StepOutcome],
    tampered: list[str],
    model: str | None = None,
) -> TaskResult:
    """The verdict on one candidate's step outcomes: a run's and the RL API's (aka.rl) alike, so a
    trainer gets the reward `aka run` gives for the same candidate."""
    by_step = {o.step: o for o in outcomes}
    compile_ = by_step.get(Step.COMPILE)
    correctness = by_step.get(Step.CORRECTNESS)
    performance = by_step.get(Step.PERFORMANCE)
    result = TaskResult(
        task_name=task.name,
        task_type=task.family,
        device=device.name,
        agent=agent,
        device_uuid=device.uuid,
        device_count=1 if device.mask else device.count,
        scorer=scorer_name,
        tampered_files=tampered,
        optimization_summary=(
            f"Candidate by agent '{agent.agent}'"
            + (f" (model {model})" if model else "")
            + f"; evaluated independently by aka {__version__} on {device.name}."
            + (f" Agent: {agent.message}" if agent.message else "")
        ),
    )
    result.pass_compilation = compile_ is not None and compile_.passed
    if compile_ is not None and not compile_.passed:
        result.compilation_error_message = compile_.message
    if correctness is not None:
        wrong_when_timed = performance is not None and performance.failure in WRONG_WHEN_TIMED
        result.pass_correctness = correctness.passed and not wrong_when_timed
        if not correctness.passed:
            result.correctness_error_message = correctness.message
        elif wrong_when_timed and performance is not None:
            result.correctness_error_message = f"wrong output during timing: {performance.message}"
    first_failure = next((o for o in outcomes if not o.passed), None)
    if result.tampered_files:
        result.failure_kind = FailureKind.TAMPERING
        changed = ", ".join(result.tampered_files[:5])
        result.failure_message = f"the agent modified task files it may not edit: {changed}"
    elif not agent.ok:
        result.failure_kind = FailureKind.AGENT_TIMEOUT if agent.exit_reason == "timeout" else FailureKind.AGENT_ERROR
        result.failure_message = f"{agent.exit_reason}: {agent.message}"
        if not outcomes:
            result.failure_message += " (it changed none of the editable files: no candidate was evaluated)"
    elif first_failure is not None:
        result.failure_kind, result.failure_message = first_failure.failure, first_failure.message
    if first_failure is not None and first_failure.skipped and not result.tampered_files:
        result.failure_kind, result.failure_message = FailureKind.SKIPPED, first_failure.message
    if result.pass_correctness:
        timed = _fully_timed(result, baseline, performance)
        apply_timings(result, baseline, timed)
        slowed = slowed_baselines(baseline, timed) if device.is_gpu else []
        if slowed and result.failure_kind is FailureKind.NONE:
            result.failure_kind = FailureKind.TAMPERING
            result.failure_message = (
                f"the baseline ran over {BASELINE_SLOWDOWN_LIMIT}x slower next to the candidate "
                f"than alone (cases {', '.join(slowed[:3])}): interference"
            )
    eval_seeds = [o.eval_seed for o in outcomes if o.eval_seed is not None]
    result.eval_seed = eval_seeds[0] if eval_seeds else None
    result.isolation = outcomes[-1].isolation if outcomes else []
    result.trust = next((o.trust for o in reversed(outcomes) if o.trust), None)
    result.status = _status(result)
    result.score = finite_score(scorer, result) if result.status not in (TaskStatus.SKIP, TaskStatus.INFRA) else 0.0
    return result


def _fully_timed(result: TaskResult, baseline: BaselineRecord, performance: StepOutcome | None) -> list[CaseReport]:
    """The candidate's timed cases, if they earn a speedup: only from a performance step that
    passed and timed every case the baseline has. A candidate that crashed, hung or failed in some
    cases had the speedup of the others scored (a red team's crashed on its slow cases: 2.2x the
    reward its kernel earns); a step that timed fewer cases than the baseline's fails here."""
    if performance is None or not performance.passed:
        return []
    timed = {c.id for c in performance.cases if c.time_ms}
    untimed = [c.id for c in baseline.cases if c.time_ms and c.id not in timed]
    if untimed:
        if result.failure_kind is FailureKind.NONE:
            result.failure_kind = FailureKind.PERFORMANCE_ERROR
            result.failure_message = f"{len(untimed)} case(s) the baseline has were not timed: {', '.join(untimed[:5])}"
        return []
    return performance.cases


def _infra_result(ctx: RunContext, task: Task, message: str) -> TaskResult:
    return TaskResult(
        task_name=task.name,
        task_type=task.family,
        device=ctx.device.name,
        failure_kind=FailureKind.INFRA_ERROR,
        failure_message=message,
        status=TaskStatus.INFRA,
        optimization_summary="Not evaluated: infrastructure error (not the agent's failure).",
    )


def _of_trial(ctx: RunContext, result: TaskResult) -> TaskResult:
    result.arm, result.repeat = ctx.arm, ctx.repeat
    return result


def run_task(ctx: RunContext, task: Task) -> tuple[Path, TaskResult]:
    """Run one task in a new workspace; infrastructure faults become INFRA results, not crashes."""
    workspace = new_task_workspace(ctx.run_dir, task, ctx.label)
    identity = task_identity(task)  # the task folder's (config pins a repository's revision)
    if task.problem is not None:  # found among many, but not loadable: this task's failure only
        result = _infra_result(ctx, task, f"the task cannot be loaded: {task.problem}")
        write_task_result(workspace, _of_trial(ctx, result))
        return workspace, result
    try:
        task = materialize(task, ctx.run_dir / REPOSITORIES_DIR)
        with phase(Phase.BASELINE):
            baseline = frozen_or_measured(ctx.run_dir, task, identity, ctx.device, workspace / "baseline")
        if baseline.status is FailureKind.INFRA_ERROR:
            result = _infra_result(ctx, task, baseline.message or "baseline failed")
            write_task_result(workspace, _of_trial(ctx, result))
            return workspace, result
        work = workspace / AGENT_WORK_DIR
        copy_for_agent(task, work)
        prompt = build_prompt(task, work, baseline, ctx.device)
        (workspace / "prompt.md").write_text(prompt, encoding="utf-8")
        with phase(Phase.AGENT):
            agent = _run_agent(ctx, task, workspace, prompt, baseline)
        if low_on_space(workspace):  # what the agent filled the disk with must not fail its evaluation
            free_agent_scratch(workspace, judged_files(task))
        evaluated = source_hashes(workspace, task)
        started = time.monotonic()
        # An agent that failed and changed nothing handed over no candidate: the task's own
        # sources would pass and score as if it had solved the task.
        no_candidate = not agent.ok and not edited_sources(task, workspace / AGENT_WORK_DIR)
        outcomes = (
            []
            if no_candidate
            else evaluate_candidate(
                task,
                workspace / AGENT_WORK_DIR,
                workspace,
                ctx.device,
                trusted_cache=baseline_builds(ctx.run_dir, task),
            )
        )
        evaluation_seconds = round(time.monotonic() - started, 3)
        result = _judge(ctx, task, baseline, agent, outcomes, tampered_files(task, workspace / AGENT_WORK_DIR))
        result.evaluation_seconds = evaluation_seconds
        held_out_now = ctx.config.config.heldout == "during" and HELDOUT_FILE in task.config.hidden_files
        if result.pass_correctness and held_out_now:
            with phase(Phase.HELDOUT):
                result.heldout = _heldout(ctx, task, workspace, result)
        if task.config.export_command and result.status is TaskStatus.PASS and result.failure_kind is FailureKind.NONE:
            with phase(Phase.EXPORT):
                result.exports = _run_exports(task, workspace, ctx.device)
    except Exception as exc:
        if is_disk_full(exc) or low_on_space(workspace):
            raise disk_full(ctx.run_dir, f"{task.name}: {exc}") from exc
        logger.error("infrastructure error on %s:\n%s", task.name, traceback.format_exc())
        result = _infra_result(ctx, task, f"{type(exc).__name__}: {exc}")
        write_task_result(workspace, _of_trial(ctx, result))
        return workspace, result
    if result.status is not TaskStatus.PASS and full_after_evaluation(workspace, judged_files(task)):
        raise disk_full(ctx.run_dir, f"{task.name} was evaluated with the disk full; its result is not kept")
    write_task_result(workspace, _of_trial(ctx, result))
    write_completion(workspace, task, identity, evaluated)
    return workspace, result
