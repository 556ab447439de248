"""The performance step: the candidate timed against the baseline, paired, each in its own worker.

Order matters. The baseline's worker loads the pristine sources (or the PyTorch reference) and
calls every load on every case, so its kernels are compiled and in memory, and is then timed
alone on every case (`calibrate`): all before the candidate's worker loads any candidate code.
Then the pairs: fresh inputs for every pair, written by the judge; every candidate output
checked; the candidate's times held to the judge's spans and the baseline's to its calibration
(`aka.harness.paired`); a time under the case's speed-of-light floor is an impossible speedup.

Each side is loaded `PairedConfig.loads` times (separate Triton JIT functions and CUDA modules,
so separate code addresses) and pair i calls load i mod loads on both sides: on the H200 one load
of a kernel ran up to 0.9% faster or slower than another load of the same code, an offset that
stays for the life of the process (docs/benchmarks/2026-12-01_code_placement_h200.md).
With `AKA_TARGET=baseline` (or `reference`) only that side is timed, alone: the run's frozen
baseline record.

The step holds the device alone only while it calibrates and times (`aka.harness.phases`): each
side's first calls on every case, which load or compile its kernels, are made while the device
is shared, the baseline's before the calibration and the candidate's after it; with
`$AKA_PHASED_SET_UP=1` also each case's set-up before its pairs and clean-up after them (the
device alone once per case).
"""

from __future__ import annotations

import dataclasses
import logging
import secrets
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import torch

from aka.evaluation.wire import DRAIN_S, ENV_TIMING_BUDGET, phased_set_up, timing_budget_s, wanted_placements
from aka.harness.cases import Case
from aka.harness.checks import reference_for
from aka.harness.compare import Output
from aka.harness.link import WorkerFailure
from aka.harness.paired import (
    Calibration,
    ClaimError,
    InterferenceError,
    LateLaunchError,
    PairedConfig,
    UnexplainedTimeError,
    calibrate,
    time_paired,
)
from aka.harness.phases import ALONE, SHARED, Phases
from aka.harness.remote import RemoteSide
from aka.harness.report import CaseResult, StepResult
from aka.harness.sides import load_side, source_dir
from aka.harness.speed_of_light import case_floor
from aka.harness.task import HarnessError, KernelTask, StepContext
from aka.harness.timing import CPU_METHOD, CUDA_METHOD
from aka.harness.turns import CaseMemory, Placements, Turn, nbytes
from aka.harness.verify import (
    IMPOSSIBLE,
    INCORRECT,
    TAMPERING,
    UNTIMEABLE,
    Problem,
    ProblemError,
    delivered_problems,
    worst,
)

log = logging.getLogger(__name__)


def pair_seed(case: Case, index: int, salt: int) -> int:
    """Timed pair `index`'s inputs come from the case's seed salted at evaluation time."""
    return ((case.seed * 1_000_003 + index * 7919) ^ salt) % 2**63


@dataclass
class CasePairs:
    """Fresh inputs for every pair; the candidate's output of every call checked."""

    task: KernelTask
    ctx: StepContext
    case: Case
    baseline_memory: CaseMemory
    candidate_memory: CaseMemory | None
    loads: int
    salt: int
    prepared: dict[int, tuple[tuple[torch.Tensor, ...], Output]] = field(default_factory=dict)

    def prepare(self, index: int) -> None:
        self.prepared[index] = reference_for(
            self.task, self.ctx, self.case, pair_seed(self.case, index, self.salt), "normal"
        )

    def baseline(self, index: int, hold_ms: float) -> Turn:
        turn = self.baseline_memory.timed_call(self.prepared[index][0], index % self.loads, hold_ms)
        self.baseline_memory.side.pause()  # both sides alike: a stopped worker resumes for its turn
        if not turn.reply.ok:
            raise HarnessError(f"the task's own baseline failed a timed call: {turn.reply.text('error')}")
        return turn

    def candidate(self, index: int, hold_ms: float) -> Turn:
        assert self.candidate_memory is not None, "the candidate is loaded"
        inputs, expected = self.prepared[index]
        turn = self.candidate_memory.timed_call(inputs, index % self.loads, hold_ms)
        self.candidate_memory.side.pause()  # nothing of the candidate runs while the baseline is timed
        check(turn, self.candidate_memory, inputs, expected, self.task)
        return turn

    def release(self) -> None:
        self.prepared.clear()


def check(turn: Turn, memory: CaseMemory, inputs: Sequence[torch.Tensor], expected: Output, task: KernelTask) -> None:
    """A candidate call's output against the expected one (raises `ProblemError`)."""
    if not turn.reply.ok:
        raise ProblemError(Problem(INCORRECT, turn.reply.text("error") or "the call failed"))
    problem = worst(
        delivered_problems(turn.reply, memory.snapshots, expected, task.tolerances, memory.changed_inputs(inputs))
    )
    if problem is not None:
        raise ProblemError(problem)


def warm_up(memory: CaseMemory, task: KernelTask, ctx: StepContext, case: Case, loads: int, candidate: bool) -> None:
    """Every load called once on the case (its kernels compile here, untimed); checked for the candidate."""
    for load in range(loads):
        inputs, expected = reference_for(task, ctx, case, pair_seed(case, -1 - load, 0), "normal")
        turn = memory.call(inputs, load)
        if candidate:
            check(turn, memory, inputs, expected, task)
        elif not turn.reply.ok:
            raise HarnessError(f"the task's own baseline fails on case {case.id}: {turn.reply.text('error')}")


def _memory(
    side: RemoteSide,
    task: KernelTask,
    ctx: StepContext,
    case: Case,
    name: str,
    sides: int = 1,
    placements: Placements | None = None,
) -> CaseMemory:
    inputs, expected = reference_for(task, ctx, case, case.seed, "normal")
    return CaseMemory(side, ctx.device, inputs, expected, name, sides, placements, wanted_placements())


def _time_alone(side: RemoteSide, task: KernelTask, ctx: StepContext, case: Case, config: PairedConfig) -> CaseResult:
    """One side alone: the median of its calls (the run's frozen baseline)."""
    memory = _memory(side, task, ctx, case, f"alone-{case.id}")
    try:
        warm_up(memory, task, ctx, case, 1, candidate=False)
        source = CasePairs(task, ctx, case, memory, None, 1, secrets.randbits(62))
        calibration = calibrate(source, config, ctx.device.type == "cuda")
    finally:
        memory.close()
    return CaseResult(
        case, time_ms=calibration.claimed_ms, timing_method=CUDA_METHOD if ctx.device.type == "cuda" else CPU_METHOD
    )


def _timing_problem(exc: Exception) -> tuple[str, str]:
    if isinstance(exc, ProblemError):
        return exc.problem.kind, f"timed call: {exc.problem.message}"
    if isinstance(exc, UnexplainedTimeError | InterferenceError | ClaimError):
        return TAMPERING, str(exc)
    if isinstance(exc, WorkerFailure):
        if exc.side != "candidate":
            raise exc  # the step decides whose fault that is (aka.harness.runner)
        return exc.kind, str(exc)
    return UNTIMEABLE, str(exc)


def _time_case(
    task: KernelTask,
    ctx: StepContext,
    baseline: RemoteSide,
    candidate: RemoteSide,
    case: Case,
    calibration: Calibration,
    config: PairedConfig,
    phases: Phases,
) -> CaseResult:
    """The case's pairs, timed with the device alone. With `phases`, `$AKA_PHASED_SET_UP=1` and a
    candidate that does not autotune (its warm-up would be one more first call), the case is set
    up while the device is shared (its inputs, references and arenas, the candidate's checked
    warm-up calls) and its memory freed once the device is shared again: beside eight validations
    that set-up was CPU work that took 2.1 of gelu's 6.7 s alone (docs/benchmarks/
    2026-12-04_session39_h200.md)."""
    in_phases = phases.active and not candidate.autotunes and phased_set_up()
    if in_phases:
        phases.want(SHARED)
    elif phases.mode != ALONE:
        candidate.pause()  # nothing of it runs while the evaluator waits for the device alone
        phases.want(ALONE)
    began = time.perf_counter()  # its set-up is logged: besides pairs and calibration, what the turn spends
    base_memory = _memory(baseline, task, ctx, case, f"paired-{case.id}", sides=2)
    cand_memory = _memory(candidate, task, ctx, case, f"paired-{case.id}", placements=base_memory.placements)
    source = CasePairs(task, ctx, case, base_memory, cand_memory, config.loads, secrets.randbits(62))
    try:
        warm_up(cand_memory, task, ctx, case, config.loads, candidate=True)
        candidate.pause()  # nothing of it runs while the evaluator waits for the device alone
        log.info("%s: set up in %.3f s", case.id, time.perf_counter() - began)
        phases.want(ALONE)
        paired = time_paired(source, calibration, config, ctx.device.type == "cuda")
    except (ProblemError, UnexplainedTimeError, InterferenceError, ClaimError, LateLaunchError, WorkerFailure) as exc:
        kind, message = _timing_problem(exc)
        return CaseResult(case, correct=False, message=f"[{kind}] {message}", kind=kind)
    finally:
        source.release()
        if in_phases and phases.mode == ALONE:
            # what the stopped candidate queued finishes before another evaluation's turn alone
            # (as the evaluator drains a shared phase); freeing the memory resumes its worker
            time.sleep(DRAIN_S)
            phases.want(SHARED)
        base_memory.close()
        cand_memory.close()
    floor = None
    if ctx.device.type == "cuda":
        floor = case_floor(task, case, ctx.device, output_bytes=nbytes(cand_memory.snapshots))
    if floor is not None and floor.rejects(paired.candidate_ms):
        return CaseResult(
            case,
            correct=False,
            kind=IMPOSSIBLE,
            floor_ms=floor.ms,
            message=f"[{IMPOSSIBLE}] {paired.candidate_ms:.4f} ms is below the speed-of-light "
            f"floor {floor.ms:.4f} ms ({floor.bound})",
        )
    return CaseResult(
        case,
        correct=True,
        time_ms=paired.candidate_ms,
        timing_method=paired.method,
        baseline_time_ms=paired.baseline_ms,
        speedup=paired.speedup,
        speedup_ci_low=paired.ci_low,
        speedup_ci_high=paired.ci_high,
        samples=paired.pairs,
        late_pairs=paired.late_pairs,
        floor_ms=floor.ms if floor is not None else None,
        unexplained_ms=paired.unexplained_ms,
        span_speedup=paired.span_speedup,
    )


def _calibrate(
    baseline: RemoteSide, task: KernelTask, ctx: StepContext, cases: Sequence[Case], config: PairedConfig
) -> dict[str, Calibration]:
    """The baseline alone on every case (each load warmed up first): before any candidate code loads."""
    calibrations, set_up, calls = {}, 0.0, 0.0
    for case in cases:
        began = time.perf_counter()
        memory = _memory(baseline, task, ctx, case, f"calibration-{case.id}")
        try:
            warm_up(memory, task, ctx, case, config.loads, candidate=False)
            source = CasePairs(task, ctx, case, memory, None, config.loads, secrets.randbits(62))
            ready = time.perf_counter()
            calibrations[case.id] = calibrate(source, config, ctx.device.type == "cuda")
            set_up, calls = set_up + ready - began, calls + time.perf_counter() - ready
        finally:
            memory.close()
    log.info("baseline calibrated on %d case(s): set-up %.3f s, calls %.3f s", len(cases), set_up, calls)
    return calibrations


def _first_calls(
    side: RemoteSide, task: KernelTask, ctx: StepContext, cases: Sequence[Case], loads: int, candidate: bool
) -> None:
    """Every load called once on every case while the device is shared: the first calls load or
    compile the kernels, the costly part of a side's set-up, so the warm-up in the turn alone
    finds them ready. A candidate's failure here only ends its first calls: the warm-up in the
    turn alone meets it again and decides the verdict, as without phases. A side that holds a
    Triton autotuner makes them alone instead: its first call times its configs, and beside other
    evaluations' kernels it would pick by their noise."""
    name = "candidate" if candidate else "baseline"
    if side.autotunes:
        log.info("%s autotunes: its first calls wait for the device alone", name)
        return
    began = time.perf_counter()
    for case in cases:
        memory = _memory(side, task, ctx, case, f"first-{case.id}")
        try:
            warm_up(memory, task, ctx, case, loads, candidate=candidate)
        except (ProblemError, WorkerFailure):
            if not candidate:
                raise
            break
        finally:
            memory.close()
    log.info("%s's first calls made in %.3f s", name, time.perf_counter() - began)


def performance_step(
    task: KernelTask,
    ctx: StepContext,
    baseline: RemoteSide,
    candidate: RemoteSide | None,
    phases: Phases | None = None,
) -> StepResult:
    """Paired times per case; without a `candidate` (`AKA_TARGET=reference` or `baseline`) the
    baseline's worker is timed alone (the run's frozen baseline record). `phases` is the device's
    turn (module docstring); without it the step is taken to hold the device alone throughout."""
    phases = phases or Phases.none()
    cases = list(task.cases_for(ctx.profile))
    config = task.paired
    try:
        budget = timing_budget_s()
    except ValueError as exc:
        raise HarnessError(str(exc)) from None
    if budget is not None:
        log.info("pairs take at most %.2g s in this step (%s)", budget, ENV_TIMING_BUDGET)
        config = dataclasses.replace(config, step_budget_s=budget)
    config = config.for_cases(len(cases))
    loads = 1 if candidate is None else max(1, config.loads)
    config = dataclasses.replace(config, loads=loads)
    loaded = load_side(baseline, "performance", cases, loads, source_dir(ctx))
    if isinstance(loaded, StepResult):
        raise HarnessError(f"the task's own baseline sources do not load: {loaded.message}")
    log.info("baseline loaded %d time(s)", loads)
    if phases.active:
        _first_calls(baseline, task, ctx, cases, loads, candidate=False)
    phases.want(ALONE)
    if candidate is None:
        return StepResult("performance", "ok", None, [_time_alone(baseline, task, ctx, case, config) for case in cases])
    calibrations = _calibrate(baseline, task, ctx, cases, config)
    phases.want(SHARED)  # no candidate code has run yet: it loads only after the calibration
    started = load_side(candidate, "performance", cases, loads)
    if isinstance(started, StepResult):
        return started
    log.info("candidate loaded %d time(s)", loads)
    if phases.active:
        _first_calls(candidate, task, ctx, cases, loads, candidate=True)
    results: list[CaseResult] = []
    for case in cases:
        results.append(_time_case(task, ctx, baseline, candidate, case, calibrations[case.id], config, phases))
        log.info(
            "%s: %s (%s pairs)", case.id, results[-1].message or f"{results[-1].speedup:.4f}x", results[-1].samples
        )
    bad = [r for r in results if r.correct is not True]
    if not bad:
        return StepResult("performance", "ok", None, results)
    kind = worst([Problem(r.kind or INCORRECT, r.message or "") for r in bad])
    return StepResult(
        "performance",
        "failed",
        f"{len(bad)} of {len(results)} cases failed; first: {bad[0].case.id}: {bad[0].message}",
        results,
        failure_kind=kind.kind if kind else INCORRECT,
    )
