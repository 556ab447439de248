"""The performance step: the candidate timed against the baseline, paired, in this one process.

The baseline (the original sources from `.aka_baseline/`, or the PyTorch reference) is loaded
and called once per case, so its kernels are compiled and held in memory, before the candidate
is imported (and before compiling switches to the evaluation's shared cache). Every timed pair
gets fresh inputs; the timed outputs go through the same checks as the correctness step; and a
time under the case's speed-of-light floor is an impossible speedup.

Each side is loaded `PairedConfig.loads` times (separate Triton JIT functions and CUDA modules,
so separate code addresses) and its calls go to the loads in turn: on the H200 one load of a
kernel ran up to 0.9% faster or slower than another load of the same code, an offset that
stays for the life of the process, and spreading each side over three loads cut it to about a
third (docs/benchmarks/2026-12-01_code_placement_h200.md).
With `AKA_TARGET=baseline` (or `reference`) only that side is timed, alone: the run's frozen
baseline record.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import secrets
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import torch

from aka.harness.candidates import BASELINE_SOURCES_DIR, separate_load, use_shared_cache
from aka.harness.cases import Case, sync
from aka.harness.checks import make_verifier
from aka.harness.compare import Output
from aka.harness.guard import ForbiddenOps
from aka.harness.paired import EVENT_METHOD, HiddenWorkError, LateLaunchError, PairedConfig, time_paired
from aka.harness.report import CaseResult, StepResult, describe_exception
from aka.harness.runner import (
    CandidateError,
    KernelTask,
    StepContext,
    device_lost,
    expected_output,
    load_source,
    make_case_inputs,
)
from aka.harness.speed_of_light import case_floor
from aka.harness.timing import time_function
from aka.harness.verify import (
    IMPOSSIBLE,
    INCORRECT,
    POLICY,
    UNTIMEABLE,
    CallVerifier,
    Problem,
    ProblemError,
    worst,
)

log = logging.getLogger(__name__)


def _time_alone(task: KernelTask, ctx: StepContext, function: Callable[..., object], case: Case) -> CaseResult:
    inputs = make_case_inputs(task, case, case.seed, ctx.device)
    timing = time_function(lambda: function(*inputs), ctx.device, task.timing)
    return CaseResult(case, time_ms=timing.time_ms, timing_method=timing.method)


def pair_inputs(task: KernelTask, case: Case, index: int, salt: int, device: torch.device) -> tuple[torch.Tensor, ...]:
    """Timed pair `index`'s fresh inputs, from the case's seed salted at evaluation time."""
    seed = (case.seed * 1_000_003 + index * 7919) ^ salt
    return make_case_inputs(task, case, seed % 2**63, device)


class InTurn:
    """Calls several loads of the same sources in turn, one per call."""

    def __init__(self, loads: list[Callable[..., object]]) -> None:
        self.loads, self.calls = loads, 0

    def __call__(self, *args: object) -> object:
        load = self.loads[self.calls % len(self.loads)]
        self.calls += 1
        return load(*args)


def load_separately(task: KernelTask, cases: list[Case], count: int,
                    directory: Path | None = None) -> list[Callable[..., object]] | StepResult:
    """`count` separate loads of the sources in `directory` (default: the candidate in cwd)."""
    loads: list[Callable[..., object]] = []
    for serial in range(count):
        with separate_load(serial) if serial else contextlib.nullcontext():
            loaded = load_source(task, "performance", cases, directory)
        if isinstance(loaded, StepResult):
            return loaded
        loads.append(loaded)
    return loads


@dataclass
class CasePairs:
    """Fresh inputs for every timed pair, drawn from seeds salted at evaluation time."""

    task: KernelTask
    ctx: StepContext
    case: Case
    verifier: CallVerifier
    baseline_fn: Callable[..., object]
    candidate_fn: Callable[..., object]
    salt: int
    prepared: dict[int, tuple[tuple[torch.Tensor, ...], tuple[torch.Tensor, ...], Output | None]] = field(
        default_factory=dict)

    def prepare(self, index: int, checked: bool) -> None:
        inputs = pair_inputs(self.task, self.case, index, self.salt, self.ctx.device)
        pristine = tuple(t.clone() for t in inputs) if checked else ()
        expected = expected_output(self.task, inputs, self.ctx.device) if checked else None
        self.prepared[index] = (inputs, pristine, expected)

    def baseline(self, index: int) -> object:
        """Under the same (ignored) torch-operator guard as the candidate: equal host overhead."""
        with ForbiddenOps() if self.verifier.enforce_policy else contextlib.nullcontext():
            return self.baseline_fn(*self.prepared[index][0])

    def candidate(self, index: int) -> object:
        return self.verifier.call(self.candidate_fn, self.prepared[index][0], None)

    def check(self, index: int, output: object) -> None:
        inputs, pristine, expected = self.prepared[index]
        assert expected is not None, "only prepared-for-check pairs are checked"
        self.verifier.check(output, inputs, pristine, expected)

    def release(self) -> None:
        self.prepared.clear()


def _time_case(task: KernelTask, ctx: StepContext, verifier: CallVerifier, baseline: Callable[..., object],
               candidate: Callable[..., object], case: Case, config: PairedConfig) -> CaseResult:
    pairs = CasePairs(task, ctx, case, verifier, baseline, candidate, secrets.randbits(62))
    launches_before = verifier.launches.total()
    try:
        paired = time_paired(pairs, ctx.device, config)
    except ProblemError as exc:
        return CaseResult(case, correct=False, message=f"[{exc.problem.kind}] timed call: {exc.problem.message}",
                          kind=exc.problem.kind)
    except HiddenWorkError as exc:
        return CaseResult(case, correct=False, message=f"[{POLICY}] {exc}", kind=POLICY)
    except LateLaunchError as exc:
        return CaseResult(case, correct=False, message=f"[{UNTIMEABLE}] {exc}", kind=UNTIMEABLE)
    except CandidateError as exc:
        return CaseResult(case, correct=False, message=describe_exception(exc), kind=INCORRECT)
    finally:
        pairs.release()
    if verifier.launches.instrumented and verifier.launches.total() == launches_before:
        return CaseResult(case, correct=False, message=f"[{POLICY}] the timed calls launched no target kernel",
                          kind=POLICY)
    flushed = paired.method == EVENT_METHOD
    floor = case_floor(task, case, ctx.device, l2_flushed=flushed) if ctx.device.type == "cuda" else None
    if floor is not None and floor.rejects(paired.candidate_ms):
        return CaseResult(case, correct=False, kind=IMPOSSIBLE, floor_ms=floor.ms,
                          message=f"[{IMPOSSIBLE}] {paired.candidate_ms:.4f} ms is below the speed-of-light "
                                  f"floor {floor.ms:.4f} ms ({floor.bound})")
    return CaseResult(case, correct=True, time_ms=paired.candidate_ms, timing_method=paired.method,
                      baseline_time_ms=paired.baseline_ms, speedup=paired.speedup, speedup_ci_low=paired.ci_low,
                      speedup_ci_high=paired.ci_high, samples=paired.pairs, late_pairs=paired.late_pairs,
                      floor_ms=floor.ms if floor is not None else None)


def performance_step(task: KernelTask, ctx: StepContext) -> StepResult:
    """Paired times per case; `AKA_TARGET=reference` or `baseline` times that side alone (the run's
    frozen baseline record)."""
    cases = task.cases_for(ctx.profile)
    timed_alone = ctx.target != "candidate"
    loads = 1 if timed_alone else max(1, task.paired.loads)
    if ctx.target == "reference" or ctx.baseline == "reference":  # torch2*, instruction2*: PyTorch is the baseline
        baselines: list[Callable[..., object]] | StepResult = [task.reference]
    else:
        baselines = load_separately(task, list(cases), loads, ctx.baseline_dir or Path.cwd() / BASELINE_SOURCES_DIR)
    if isinstance(baselines, StepResult):
        raise RuntimeError(f"the task's own baseline sources do not load: {baselines.message}")
    if timed_alone:
        return StepResult("performance", "ok", None, [_time_alone(task, ctx, baselines[0], case) for case in cases])
    for case in cases:  # every specialization of every baseline load is compiled before any candidate code runs
        for load in baselines:
            load(*make_case_inputs(task, case, case.seed, ctx.device))
        sync(ctx.device)
    use_shared_cache()
    candidates = load_separately(task, list(cases), loads)
    if isinstance(candidates, StepResult):
        return candidates
    verifier = make_verifier(task, ctx)
    results: list[CaseResult] = []
    config = task.paired.for_cases(len(cases))
    config = dataclasses.replace(config, warmup=max(config.warmup, len(candidates)))  # each load compiles untimed
    baseline, candidate = InTurn(baselines), InTurn(candidates)
    for index, case in enumerate(cases):
        results.append(_time_case(task, ctx, verifier, baseline, candidate, case, config))
        log.info("%s: %s", case.id, results[-1].message or f"{results[-1].speedup:.4f}x")
        if results[-1].correct is False and device_lost(ctx.device):
            results += [CaseResult(c, correct=False, message="not run: the GPU context was lost")
                        for c in cases[index + 1:]]
            break
    bad = [r for r in results if r.correct is not True]
    if not bad:
        return StepResult("performance", "ok", None, results)
    kind = worst([Problem(r.kind or INCORRECT, r.message or "") for r in bad])
    return StepResult("performance", "failed", f"{len(bad)} of {len(results)} cases failed; first: "
                      f"{bad[0].case.id}: {bad[0].message}", results, failure_kind=kind.kind if kind else INCORRECT)
