"""The correctness step: every case checked on several seeds and input distributions.

Each case is checked three times on fresh inputs: the case's own seed (normal values), a second
seed (uniform values of the same spread), and a seed drawn now, at evaluation time, that no agent
can have seen. Every call goes through `CallVerifier`, which also enforces the kernel-family
policy and kernel provenance.
"""

from __future__ import annotations

import logging
import secrets
from pathlib import Path

from aka.harness.candidates import BASELINE_MODULE_PREFIX
from aka.harness.cases import Case, Distribution, input_distribution
from aka.harness.compare import compare_outputs
from aka.harness.guard import PersistingL2, modules_under, policy_applies
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
from aka.harness.verify import INCORRECT, POLICY, CallVerifier, Problem, cuda_kernel_names, worst

SECOND_SEED_OFFSET = 7919
log = logging.getLogger(__name__)


def make_verifier(task: KernelTask, ctx: StepContext) -> CallVerifier:
    """A verifier with the candidate's target Triton kernels instrumented (cwd's modules only)."""
    verifier = CallVerifier(ctx.device, task.tolerances, policy_applies(ctx.family), task.allowed_torch_ops,
                            persisting_l2=PersistingL2() if ctx.device.type == "cuda" else None)
    if verifier.persisting_l2 is not None:
        verifier.persisting_l2.pin()
    candidate_modules = [m for m in modules_under(Path.cwd()) if not m.__name__.startswith(BASELINE_MODULE_PREFIX)]
    verifier.launches.instrument(candidate_modules, ctx.target_kernels)
    return verifier


def check_plan(case: Case, eval_seed: int) -> list[tuple[int, Distribution]]:
    return [(case.seed, "normal"), (case.seed + SECOND_SEED_OFFSET, "wide_uniform"), (eval_seed ^ case.seed, "normal")]


def _check_case(task: KernelTask, ctx: StepContext, verifier: CallVerifier, function: object, case: Case,
                eval_seed: int) -> CaseResult:
    worst_error = 0.0
    for seed, distribution in check_plan(case, eval_seed):
        with input_distribution(distribution):
            inputs = make_case_inputs(task, case, seed, ctx.device)
        pristine = tuple(t.clone() for t in inputs)
        expected = expected_output(task, inputs, ctx.device)
        try:
            output = verifier.call(function, inputs, expected)  # type: ignore[arg-type]
            problems = verifier.problems(output, inputs, pristine, expected)
        except CandidateError as exc:
            return CaseResult(case, correct=False, message=describe_exception(exc))
        problem = worst(problems)
        if problem is not None:
            where = "the evaluation-time seed" if seed == eval_seed ^ case.seed else f"seed {seed}, {distribution}"
            return CaseResult(case, correct=False, message=f"[{problem.kind}] {problem.message} ({where})",
                              kind=problem.kind)
        worst_error = max(worst_error, compare_outputs(output, expected, task.tolerances).max_abs_error or 0.0)
    return CaseResult(case, correct=True, max_abs_error=worst_error)


def _cuda_provenance(task: KernelTask, ctx: StepContext, verifier: CallVerifier, function: object,
                     case: Case) -> Problem | None:
    """CUDA-source targets (no Triton object to instrument): the profiler must see them run."""
    missing = [k for k in ctx.target_kernels if k not in verifier.launches.instrumented]
    if ctx.device.type != "cuda" or not missing:
        return None
    inputs = make_case_inputs(task, case, case.seed, ctx.device)
    names = cuda_kernel_names(lambda: function(*inputs))  # type: ignore[operator]
    absent = [k for k in missing if not any(k in name for name in names)]
    if absent:
        return Problem(POLICY, f"target kernel(s) {', '.join(absent)} never ran; the GPU ran: "
                               f"{', '.join(names[:4]) or 'nothing'}")
    return None


def correctness_step(task: KernelTask, ctx: StepContext) -> StepResult:
    """Every case against the reference; the first problem of a case is its verdict."""
    cases = task.cases_for(ctx.profile)
    eval_seed = secrets.randbelow(2**31)
    if ctx.target != "candidate":
        loaded: object = task.reference
    else:
        source = load_source(task, "correctness", cases)
        if isinstance(source, StepResult):
            return source
        loaded = source
    verifier = make_verifier(task, ctx)
    results: list[CaseResult] = []
    for index, case in enumerate(cases):
        results.append(_check_case(task, ctx, verifier, loaded, case, eval_seed))
        log.info("%s: %s", case.id, results[-1].message or "ok")
        if results[-1].correct is False and device_lost(ctx.device):
            results += [CaseResult(c, correct=False, message="not run: the GPU context was lost")
                        for c in cases[index + 1:]]
            break
    if ctx.target == "candidate" and all(r.correct for r in results) and cases:
        try:
            provenance = _cuda_provenance(task, ctx, verifier, loaded, cases[0])
        except CandidateError as exc:
            provenance = Problem(INCORRECT, describe_exception(exc))
        if provenance is not None:
            results[0] = CaseResult(cases[0], correct=False, message=f"[{provenance.kind}] {provenance.message}",
                                    kind=provenance.kind)
    bad = [r for r in results if r.correct is not True]
    if not bad:
        return StepResult("correctness", "ok", None, results, eval_seed=eval_seed)
    kind = worst([Problem(r.kind or INCORRECT, r.message or "") for r in bad])
    return StepResult("correctness", "failed", f"{len(bad)} of {len(results)} cases failed; first: "
                      f"{bad[0].case.id}: {bad[0].message}", results, failure_kind=kind.kind if kind else INCORRECT,
                      eval_seed=eval_seed)

