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
device alone once per case). With `$AKA_ONE_TURN=1` it holds the device alone once: the pairs
first, then the candidate's worker is ended and the baseline calibrated (`_one_turn`).
"""

from __future__ import annotations

import dataclasses
import logging
import secrets
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field

import torch

from aka.evaluation.wire import (
    DRAIN_S,
    ENV_TIMING_BUDGET,
    one_turn,
    phased_set_up,
    timing_budget_s,
    wanted_placements,
)
from aka.harness.cases import Case
from aka.harness.checks import ABLATION_DRAWS, ablation_inputs, ablation_problem, reference_for
from aka.harness.compare import Output
from aka.harness.link import WorkerFailure
from aka.harness.paired import (
    Calibration,
    ClaimError,
    InterferenceError,
    LateLaunchError,
    PairedConfig,
    TakenPairs,
    UnexplainedTimeError,
    calibrate,
    judge_pairs,
    pairs_per_batch,
    take_pairs,
)
from aka.harness.phases import ALONE, SHARED, Phases
from aka.harness.remote import RemoteSide
from aka.harness.report import CaseResult, StepResult
from aka.harness.sides import load_side, source_dir
from aka.harness.speed_of_light import Floor, case_floor
from aka.harness.task import HarnessError, KernelTask, StepContext
from aka.harness.timing import CPU_METHOD, CUDA_METHOD
from aka.harness.turns import CaseMemory, Placements, Turn, nbytes
from aka.harness.verify import (
    CRASH,
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


PAIR_CALL_PARTS = (
    "reference",
    "ablation",
    "baseline call",
    "baseline pause",
    "candidate call",
    "candidate pause",
    "check",
)


def pair_seed(case: Case, index: int, salt: int) -> int:
    """Timed pair `index`'s inputs come from the case's seed salted at evaluation time."""
    return ((case.seed * 1_000_003 + index * 7919) ^ salt) % 2**63


@dataclass
class CasePairs:
    """Fresh inputs for every pair; the candidate's output of every call checked.

    With `ablate_every` (the pairs of a batch), the candidate is also called as it is timed but
    with its target kernels (`instrumented`) launching nothing, on inputs of its own, before pairs
    drawn at random: an output still right there means the work is done outside them
    (`checks.ablation_problem`). Each load once in the first batch (each is a module of its own,
    with state of its own), then one load in turn in every later batch. The correctness step's
    ablation alone let a candidate be honest there and do the work elsewhere in this step, told
    the step by its environment or by its first pause (red team, session 51)."""

    task: KernelTask
    ctx: StepContext
    case: Case
    baseline_memory: CaseMemory
    candidate_memory: CaseMemory | None
    loads: int
    salt: int
    prepared: dict[int, tuple[tuple[torch.Tensor, ...], Output]] = field(default_factory=dict)
    ablate_every: int = 0
    instrumented: Sequence[str] = ()
    ablation_salt: int = field(default_factory=lambda: secrets.randbits(62))
    ablation_load: int = field(default_factory=lambda: secrets.randbelow(1 << 30))
    _planned: list[tuple[int, int]] = field(default_factory=list)  # this batch's (place, load) ablations
    # where the pairs' seconds go, finer than `paired.take_pairs`' parts (logged: what to shorten)
    parts: dict[str, float] = field(default_factory=lambda: dict.fromkeys(PAIR_CALL_PARTS, 0.0))

    @contextmanager
    def _part(self, name: str) -> Iterator[None]:
        at = time.perf_counter()
        try:
            yield
        finally:
            self.parts[name] += time.perf_counter() - at

    def parts_text(self) -> str:
        return ", ".join(f"{name}={seconds:.3f}" for name, seconds in self.parts.items())

    def prepare(self, index: int, hold_ms: float) -> None:
        with self._part("ablation"):
            for load in self._ablations_before(index):
                self._ablate(index, load, hold_ms)
        with self._part("reference"):
            self.prepared[index] = reference_for(
                self.task, self.ctx, self.case, pair_seed(self.case, index, self.salt), "normal"
            )

    def _ablations_before(self, index: int) -> list[int]:
        """The loads to ablate before pair `index` (a batch's places drawn as it starts)."""
        if self.candidate_memory is None or self.ablate_every <= 0 or not self.instrumented:
            return []
        batch, place = divmod(index, self.ablate_every)
        if place == 0:
            loads = range(self.loads) if batch == 0 else [(self.ablation_load + batch) % self.loads]
            self._planned = [(secrets.randbelow(self.ablate_every), load) for load in loads]
        return [load for at, load in self._planned if at == place]

    def _ablate(self, index: int, load: int, hold_ms: float) -> None:
        """One ablation call, before the pair's inputs exist (one live set of inputs at a time)."""
        assert self.candidate_memory is not None, "the candidate is loaded"
        memory = self.candidate_memory
        salts = [self.ablation_salt ^ load ^ (draw << 40) for draw in range(ABLATION_DRAWS)]
        seeds = [pair_seed(self.case, index, salt) for salt in salts]
        drawn = ablation_inputs(self.task, self.ctx, self.case, seeds)
        if drawn is None:
            return
        inputs, expected = drawn
        turn = memory.timed_call(inputs, load, hold_ms, without_targets=True)
        memory.side.pause()
        problem = ablation_problem(turn, memory, expected, self.task, self.instrumented)
        log.info("%s: load %d ablated before pair %d: %s", self.case.id, load, index, "right" if problem else "wrong")
        if problem is not None:
            raise ProblemError(problem)

    def baseline(self, index: int, hold_ms: float) -> Turn:
        with self._part("baseline call"):
            turn = self.baseline_memory.timed_call(self.prepared[index][0], index % self.loads, hold_ms)
        with self._part("baseline pause"):
            self.baseline_memory.side.pause()  # both sides alike: a stopped worker resumes for its turn
            if self.candidate_memory is not None:  # nothing of the candidate ran while the baseline was timed
                self.candidate_memory.side.stayed_paused()
        if not turn.reply.ok:
            raise HarnessError(f"the task's own baseline failed a timed call: {turn.reply.text('error')}")
        return turn

    def candidate(self, index: int, hold_ms: float) -> Turn:
        assert self.candidate_memory is not None, "the candidate is loaded"
        inputs, expected = self.prepared[index]
        with self._part("candidate call"):
            turn = self.candidate_memory.timed_call(inputs, index % self.loads, hold_ms)
        with self._part("candidate pause"):
            self.candidate_memory.side.pause()  # nothing of the candidate runs while the baseline is timed
        with self._part("check"):
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


@dataclass
class TimedCase:
    """A case's pairs, taken and not yet judged, with its speed-of-light floor."""

    case: Case
    pairs: TakenPairs
    floor: Floor | None


def _take_case(
    task: KernelTask,
    ctx: StepContext,
    baseline: RemoteSide,
    candidate: RemoteSide,
    case: Case,
    config: PairedConfig,
    phases: Phases,
    hold_ms: float,
    set_up_shared: bool,
    instrumented: Sequence[str],
) -> TimedCase | CaseResult:
    """The case's pairs, taken with the device alone (a failed `CaseResult` where the candidate
    failed them). With `set_up_shared` (`$AKA_PHASED_SET_UP=1`, phases, a candidate that does not
    autotune: its warm-up would be one more first call), the case is set up while the device is
    shared (its inputs, references and arenas, the candidate's checked warm-up calls) and its
    memory freed once the device is shared again: beside eight validations that set-up was CPU
    work that took 2.1 of gelu's 6.7 s alone (docs/benchmarks/2026-12-04_session39_h200.md)."""
    if set_up_shared:
        phases.want(SHARED)
    elif phases.mode != ALONE:
        candidate.pause()  # nothing of it runs while the evaluator waits for the device alone
        phases.want(ALONE)
    began = time.perf_counter()  # its set-up is logged: besides pairs and calibration, what the turn spends
    base_memory = _memory(baseline, task, ctx, case, f"paired-{case.id}", sides=2)
    cand_memory = _memory(candidate, task, ctx, case, f"paired-{case.id}", placements=base_memory.placements)
    gpu = ctx.device.type == "cuda"
    source = CasePairs(
        task,
        ctx,
        case,
        base_memory,
        cand_memory,
        config.loads,
        secrets.randbits(62),
        ablate_every=pairs_per_batch(config, gpu) if ctx.target_kernels else 0,
        instrumented=instrumented,
    )
    try:
        warm_up(cand_memory, task, ctx, case, config.loads, candidate=True)
        candidate.pause()  # nothing of it runs while the evaluator waits for the device alone
        log.info("%s: set up in %.3f s", case.id, time.perf_counter() - began)
        phases.want(ALONE)
        pairs = take_pairs(source, config, gpu, hold_ms)
        log.info("%s: pair parts: %s", case.id, source.parts_text())
    except (ProblemError, ClaimError, LateLaunchError, WorkerFailure) as exc:
        return _failed(case, exc)
    finally:
        source.release()
        if set_up_shared and phases.mode == ALONE:
            # what the stopped candidate queued finishes before another evaluation's turn alone
            # (as the evaluator drains a shared phase); freeing the memory resumes its worker
            time.sleep(DRAIN_S)
            phases.want(SHARED)
        base_memory.close()
        cand_memory.close()
    floor = None
    if gpu:
        floor = case_floor(task, case, ctx.device, output_bytes=nbytes(cand_memory.snapshots))
    return TimedCase(case, pairs, floor)


def _failed(case: Case, exc: Exception) -> CaseResult:
    kind, message = _timing_problem(exc)
    return CaseResult(case, correct=False, message=f"[{kind}] {message}", kind=kind)


def _judge_case(
    timed: TimedCase,
    calibration: Calibration,
    config: PairedConfig,
    gpu: bool,
    recalibrate: Callable[[], Calibration] | None = None,
) -> CaseResult:
    """The case's pairs held to the judge's spans and the baseline's calibration, its time to the
    floor. A baseline slower in the pairs than alone is asked again with `recalibrate` (the
    baseline alone once the candidate's worker is gone) where given: see `_not_quiet`."""
    case, floor = timed.case, timed.floor
    try:
        paired = judge_pairs(timed.pairs, calibration, config, gpu)
    except InterferenceError as exc:
        if recalibrate is not None:
            _not_quiet(timed, recalibrate(), config, gpu, exc)
        return _failed(case, exc)
    except UnexplainedTimeError as exc:
        return _failed(case, exc)
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


def _not_quiet(timed: TimedCase, fresh: Calibration, config: PairedConfig, gpu: bool, exc: InterferenceError) -> None:
    """Raise `HarnessError` (an `infra_error`, judged again) where the baseline alone, timed again
    after the candidate's worker and everything it queued on the GPU are gone, is as slow as in the
    pairs: the slowness was not the candidate's but the device's (another process's GPU work time
    slicing with the timed turn: on an H100 both sides' hand-overs grew by 1.1 ms beside
    evaluations stopped mid-work, and an untouched candidate was judged `tampering`)."""
    try:
        judge_pairs(timed.pairs, fresh, config, gpu)
    except (InterferenceError, UnexplainedTimeError):
        return  # still slower next to the candidate than alone, or it hid time of its own: its doing
    raise HarnessError(
        f"{timed.case.id}: the device was not quiet while the pairs were timed ({exc}; the baseline "
        "alone after the candidate's worker ended was as slow): another process's GPU work ran then"
    )


def _timed_cases(
    task: KernelTask,
    ctx: StepContext,
    baseline: RemoteSide,
    candidate: RemoteSide,
    cases: Sequence[Case],
    config: PairedConfig,
    phases: Phases,
) -> list[CaseResult]:
    """Calibrated first, the candidate's code loaded after it: the device alone twice with phases."""
    phases.want(ALONE)
    calibrations = _calibrate(baseline, task, ctx, cases, config)
    phases.want(SHARED)  # no candidate code has run yet: it loads only after the calibration
    instrumented = _load_candidate(candidate, task, ctx, cases, config.loads, phases)
    set_up_shared = phases.active and not candidate.autotunes and phased_set_up()
    gpu = ctx.device.type == "cuda"
    results: list[CaseResult] = []
    for case in _while_alive(candidate, cases):
        calibration = calibrations[case.id]
        timed = _take_case(
            task, ctx, baseline, candidate, case, config, phases, calibration.hold_ms, set_up_shared, instrumented
        )

        def recalibrate(case: Case = case) -> Calibration:
            candidate.kill()  # its GPU context and what it queued go with it; the step fails either way
            time.sleep(DRAIN_S)
            phases.want(ALONE)
            log.info("%s: the baseline was slower next to the candidate; timed alone again without it", case.id)
            return _calibrate(baseline, task, ctx, [case], config)[case.id]

        judged = (
            _judge_case(timed, calibration, config, gpu, recalibrate if gpu else None)
            if isinstance(timed, TimedCase)
            else timed
        )
        results.append(judged)
        _log_case(results[-1])
    return _every_case(results, cases)


def _one_turn(
    task: KernelTask,
    ctx: StepContext,
    baseline: RemoteSide,
    candidate: RemoteSide,
    cases: Sequence[Case],
    config: PairedConfig,
    phases: Phases,
) -> list[CaseResult]:
    """`$AKA_ONE_TURN=1`: the device alone once. Both sides are set up while it is shared; alone,
    the pairs of every case, then the candidate's worker is ended (its process tree killed: its
    GPU context, and whatever it queued there, goes with it), then the baseline is calibrated and
    the pairs are judged against that. The calibration stays out of the candidate's reach as
    before (no candidate process exists while it runs); it only moves from before the candidate's
    code to after its end, and the step no longer waits twice for the device alone."""
    instrumented = _load_candidate(candidate, task, ctx, cases, config.loads, phases)
    gpu = ctx.device.type == "cuda"
    taken = [
        _take_case(task, ctx, baseline, candidate, case, config, phases, config.hold_ms, False, instrumented)
        for case in _while_alive(candidate, cases)
    ]
    timed = [t for t in taken if isinstance(t, TimedCase)]
    calibrations: dict[str, Calibration] = {}
    if timed:
        candidate.kill()
        time.sleep(DRAIN_S)
        log.info("the candidate's worker ended before the calibration")
        calibrations = _calibrate(baseline, task, ctx, [t.case for t in timed], config)
    results = []
    for outcome in taken:
        case_result = (
            outcome
            if isinstance(outcome, CaseResult)
            else _judge_case(outcome, calibrations[outcome.case.id], config, gpu)
        )
        results.append(case_result)
        _log_case(case_result)
    return _every_case(results, cases)


def _every_case(results: list[CaseResult], cases: Sequence[Case]) -> list[CaseResult]:
    """A case left untimed by a worker that ended on its own, after cases that all passed, fails
    the step as a crash: ending itself between cases, a candidate chose which cases were timed (a
    red team's exited as a slow case's buffers were unmapped, and the speedup of its one fast case
    was scored: 2.4x the reward its kernel earns)."""
    if len(results) < len(cases) and all(r.correct is True for r in results):
        untimed = len(cases) - len(results)
        message = f"[{CRASH}] the candidate's worker ended before this case: {untimed} case(s) not timed"
        results.append(CaseResult(cases[len(results)], correct=False, message=message, kind=CRASH))
    return results


def _while_alive(candidate: RemoteSide, cases: Sequence[Case]) -> Iterator[Case]:
    """The cases, until one ends the candidate's worker (its failure killed it: a timeout, a
    crash, tampering): that case's verdict is the step's, not a `crash` in the next one's set-up."""
    for case in cases:
        if not candidate.alive():
            log.info("the candidate's worker was ended: %d case(s) not timed", len(cases) - cases.index(case))
            return
        yield case


def _load_candidate(
    candidate: RemoteSide, task: KernelTask, ctx: StepContext, cases: Sequence[Case], loads: int, phases: Phases
) -> list[str]:
    """The candidate loaded `loads` times; the target kernels whose launches its worker counts."""
    started = load_side(candidate, "performance", cases, loads)
    if isinstance(started, StepResult):
        raise _NotLoaded(started)
    log.info("candidate loaded %d time(s)", loads)
    if phases.active:
        _first_calls(candidate, task, ctx, cases, loads, candidate=True)
    return started


class _NotLoaded(Exception):
    """The candidate's code did not load: the step's result says why."""

    def __init__(self, result: StepResult) -> None:
        super().__init__(result.message)
        self.result = result


def _log_case(result: CaseResult) -> None:
    log.info("%s: %s (%s pairs)", result.case.id, result.message or f"{result.speedup:.4f}x", result.samples)


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
    loaded = load_side(baseline, "performance", cases, loads, source_dir(ctx), may_lack_tools=True)
    if isinstance(loaded, StepResult):
        raise HarnessError(f"the task's own baseline sources do not load: {loaded.message}")
    log.info("baseline loaded %d time(s)", loads)
    if phases.active:
        _first_calls(baseline, task, ctx, cases, loads, candidate=False)
    if candidate is None:
        phases.want(ALONE)
        return StepResult("performance", "ok", None, [_time_alone(baseline, task, ctx, case, config) for case in cases])
    order = _one_turn if phases.active and one_turn() else _timed_cases
    try:
        results = order(task, ctx, baseline, candidate, cases, config, phases)
    except _NotLoaded as not_loaded:
        return not_loaded.result
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
