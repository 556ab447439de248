"""The correctness step, judged in the judge: every case on several seeds and input distributions.

Each case is checked three times on fresh inputs: the case's own seed (normal values), a second
seed (uniform values of the same spread), and a seed drawn now, at evaluation time, that no agent
can have seen. The judge draws the inputs and computes the expected output; the candidate's
worker gets the inputs in the judge's memory, and the judge compares what it copied back
(`aka.harness.verify`). A reference that is NaN or Inf on the task's own inputs is a defect of
the task (`HarnessError`), unless the task declares it (`nonfinite_reference`); so is a case whose
reference an all-zeros output, or one value everywhere, matches on every check (`zeros_would_pass`,
`constant_would_pass`): there a "correct" verdict says nothing, and a zeros or constant kernel
would earn a reward. The reference must also give the same output twice on the same inputs
(asked on each case's first check, in every evaluation and in `aka task check`: a task whose
baseline is the reference has no correctness step before its first candidate).
"""

from __future__ import annotations

import functools
import logging
import secrets
from collections.abc import Sequence
from pathlib import Path

import torch

from aka.evaluation.kernel_check import triton_kernels_in
from aka.harness.cases import Case, Distribution, input_distribution
from aka.harness.compare import Output, compare_outputs, constant_would_pass, zeros_would_pass
from aka.harness.link import WorkerFailure
from aka.harness.remote import RemoteSide
from aka.harness.report import CaseResult, StepResult
from aka.harness.sides import load_side, source_dir
from aka.harness.task import HarnessError, KernelTask, StepContext, expected_output, kernel_language, make_case_inputs
from aka.harness.turns import CaseMemory, Turn
from aka.harness.verify import INCORRECT, POLICY, Problem, delivered_problems, max_abs_error, nonfinite_reference, worst

SECOND_SEED_OFFSET = 7919
ABLATION_DRAWS = 4  # inputs drawn for an ablation call until its answer is not all zeros
log = logging.getLogger(__name__)


def check_plan(case: Case, eval_seed: int) -> list[tuple[int, Distribution]]:
    return [(case.seed, "normal"), (case.seed + SECOND_SEED_OFFSET, "wide_uniform"), (eval_seed ^ case.seed, "normal")]


def reference_for(
    task: KernelTask, ctx: StepContext, case: Case, seed: int, distribution: Distribution
) -> tuple[tuple[torch.Tensor, ...], Output]:
    """A check's inputs and expected output; a non-finite reference stops the step as the task's fault."""
    with input_distribution(distribution):
        inputs = make_case_inputs(task, case, seed, ctx.device)
    expected = expected_output(task, inputs, ctx.device)
    problem = None if task.nonfinite_reference else nonfinite_reference(expected)
    if problem is not None:
        raise HarnessError(
            f"the task's reference is not finite on its own inputs (case {case.id}, seed {seed}, "
            f"{distribution}): {problem}; a defect of the task, not of the candidate (declare "
            "nonfinite_reference=True in its KernelTask if NaN/Inf are the right answer)"
        )
    return inputs, expected


def zeros_defect(case: Case) -> HarnessError:
    return HarnessError(
        f"the task's reference cannot tell a wrong kernel from a right one: an all-zeros output matches it "
        f"within tolerance on every check of case {case.id} (every value within atol + rtol * |value| of 0; "
        "KernelBench issue #165); a defect of the task (its inputs' scale or its tolerances), not of the candidate"
    )


def constant_defect(case: Case) -> HarnessError:
    return HarnessError(
        f"the task's reference cannot tell a wrong kernel from a right one: one value written everywhere "
        f"matches it within tolerance on every check of case {case.id} (a near-constant output on the task's "
        "own inputs); a defect of the task, not of the candidate"
    )


def random_reference(case: Case, seed: int) -> HarnessError:
    return HarnessError(
        f"the task's reference is not deterministic: two calls on the same inputs (case {case.id}, seed "
        f"{seed}) differ beyond the tolerance (dropout left in training mode, say), so no kernel can match it; "
        "a defect of the task, not of the candidate"
    )


def _reference_problem(task: KernelTask, ctx: StepContext, case: Case, plan: list[tuple[int, Distribution]]) -> None:
    """The reference as a judge of the case, in a correctness step with no candidate (`AKA_TARGET`
    the reference or the baseline): not matched by zeros or by one value on every check, and the
    same output twice on the same inputs (a red team found a KernelBench problem whose reference
    is random on every call, session 52)."""
    zeros = constant = True
    for at, check in enumerate(plan):  # every check runs (each must be finite), one alive at a time
        expected = reference_for(task, ctx, case, *check)[1]
        if at == 0:
            _deterministic(task, ctx, case, check, expected)
        zeros = zeros and zeros_would_pass(expected, task.tolerances)
        constant = constant and constant_would_pass(expected, task.tolerances)
    if zeros:
        raise zeros_defect(case)
    if constant:
        raise constant_defect(case)


def _deterministic(
    task: KernelTask, ctx: StepContext, case: Case, check: tuple[int, Distribution], expected: Output
) -> None:
    """The reference again on the check's inputs must give `expected`: no candidate can match one
    that does not, so it is the task's defect (`HarnessError`), never the candidate's `incorrect`."""
    if not compare_outputs(reference_for(task, ctx, case, *check)[1], expected, task.tolerances).correct:
        raise random_reference(case, check[0])


def _check_case(task: KernelTask, ctx: StepContext, side: RemoteSide, case: Case, eval_seed: int) -> CaseResult:
    worst_error = 0.0
    memory: CaseMemory | None = None
    zeros_pass = constant_pass = True
    try:
        for at, (seed, distribution) in enumerate(check_plan(case, eval_seed)):
            inputs, expected = reference_for(task, ctx, case, seed, distribution)
            if at == 0:
                _deterministic(task, ctx, case, (seed, distribution), expected)
            zeros_pass = zeros_pass and zeros_would_pass(expected, task.tolerances)
            constant_pass = constant_pass and constant_would_pass(expected, task.tolerances)
            memory = memory or CaseMemory(side, ctx.device, inputs, expected, f"check-{case.id}")
            turn = memory.call(inputs, load=0, poison=True)
            where = "the evaluation-time seed" if seed == eval_seed ^ case.seed else f"seed {seed}, {distribution}"
            if not turn.reply.ok:
                return CaseResult(case, correct=False, message=turn.reply.text("error") or "the call failed")
            problem = worst(
                delivered_problems(
                    turn.reply, memory.snapshots, expected, task.tolerances, memory.changed_inputs(inputs)
                )
            )
            if problem is not None:
                return CaseResult(
                    case, correct=False, message=f"[{problem.kind}] {problem.message} ({where})", kind=problem.kind
                )
            worst_error = max(worst_error, max_abs_error(memory.snapshots, expected, task.tolerances))
    finally:
        if memory is not None:
            memory.close()
    if zeros_pass:
        raise zeros_defect(case)
    if constant_pass:
        raise constant_defect(case)
    return CaseResult(case, correct=True, max_abs_error=worst_error)


@functools.cache
def _baseline_triton_kernels(baseline: Path, names: frozenset[str]) -> frozenset[str]:
    """`triton_kernels_in` the pristine baseline, parsed once a step (asked again for every case)."""
    return frozenset(triton_kernels_in(baseline, names))


def _provenance(
    task: KernelTask, ctx: StepContext, side: RemoteSide, instrumented: list[str], case: Case
) -> Problem | None:
    """Target kernels with no Triton object to count launches of: in a Triton family none may be
    missing (a plain function of the target's name, with the work done in numpy, passed on the
    CPU: red team, session 50), nor in any family where the task's own baseline writes it as a
    Triton kernel (an e2e or repository task's target as a plain function, or a real kernel whose
    module hid from the launch counter by rebinding its `__file__` or leaving `sys.modules`,
    passed at 5-31x: red team F, session 54); CUDA-source targets the profiler must see run."""
    missing = [k for k in ctx.target_kernels if k not in instrumented]
    not_triton = missing
    if missing and kernel_language(ctx.family) != "triton":
        not_triton = sorted(_baseline_triton_kernels(Path.cwd() / source_dir(ctx), frozenset(missing)))
    if not_triton:
        return Problem(
            POLICY,
            f"target kernel(s) {', '.join(not_triton)} are not Triton kernels (@triton.jit) of the candidate's "
            "sources: the work must be done in them",
        )
    if ctx.device.type != "cuda" or not missing:
        return None
    inputs, expected = reference_for(task, ctx, case, case.seed, "normal")
    memory = CaseMemory(side, ctx.device, inputs, expected)
    try:
        names = side.expect_ok(
            {"op": "kernels", "arena": memory.name, "inputs": memory.input_names(0), "values": memory.values(inputs)},
            300.0,
        ).texts("names")
    finally:
        memory.close()
    absent = [k for k in missing if not any(k in name for name in names)]
    if absent:
        return Problem(
            POLICY, f"target kernel(s) {', '.join(absent)} never ran; the GPU ran: {', '.join(names[:4]) or 'nothing'}"
        )
    return None


def _ablation(
    task: KernelTask, ctx: StepContext, side: RemoteSide, instrumented: list[str], case: Case
) -> Problem | None:
    """The target kernels did the work: on fresh inputs, with them launching nothing (the
    worker's launch counter drops their launches) and the allocator poisoned, the output must not
    come out right. A red team's transpose and gather were done whole by allowed operators
    (`contiguous`, `select`, `stack`) beside a kernel launched on one element (session 50). Made
    on every case (a candidate honest only on the first case it saw passed a check of the first
    alone, session 51) and again among the timed calls (`aka.harness.perf.CasePairs`). In the
    candidate's process like every guard: a candidate that looks for this call can still pass it
    (docs/evaluation.md, Known gaps)."""
    if not instrumented or not ctx.target_kernels:
        return None
    drawn = ablation_inputs(task, ctx, case, [secrets.randbelow(2**31) for _ in range(ABLATION_DRAWS)])
    if drawn is None:
        return None
    inputs, expected = drawn
    memory = CaseMemory(side, ctx.device, inputs, expected, f"ablation-{case.id}")
    try:
        turn = memory.call(inputs, load=0, poison=True, without_targets=True)
        return ablation_problem(turn, memory, expected, task, instrumented)
    finally:
        memory.close()


def ablation_inputs(
    task: KernelTask, ctx: StepContext, case: Case, seeds: Sequence[int]
) -> tuple[tuple[torch.Tensor, ...], Output] | None:
    """Inputs for an ablation call whose right output an all-zeros one would not match, from the
    first seed that gives them (None where none does: the call could not tell; an empty answer
    cannot tell either). A kernel that
    leaves a zeroed output alone where the answer is zero is honest: cross-entropy's rows all
    ignored (two rows, the last always ignored) have a loss of zeros, and an honest solution was
    judged a `policy_violation` (session 51)."""
    for seed in seeds:
        inputs, expected = reference_for(task, ctx, case, seed, "normal")
        outputs = [expected] if isinstance(expected, torch.Tensor) else list(expected)
        if any(isinstance(t, torch.Tensor) and t.numel() for t in outputs) and not zeros_would_pass(
            expected, task.tolerances
        ):
            return inputs, expected
        log.info("%s: the ablation's inputs of seed %d have an empty or all-zeros answer: drawn again", case.id, seed)
    return None


def ablation_problem(
    turn: Turn,
    memory: CaseMemory,
    expected: Output,
    task: KernelTask,
    instrumented: Sequence[str],
) -> Problem | None:
    """A `policy_violation` where a call made with the target kernels launching nothing still
    delivered the right output (a call that failed or came out wrong is what an honest one does).
    The output alone decides: a red team's wrapper changed an input, computed the output on the
    host and had its target kernel only put the input back, so with the kernel suppressed the
    input stayed changed and the call counted as wrong (session 52)."""
    if not turn.reply.ok:
        return None
    problems = delivered_problems(turn.reply, memory.snapshots, expected, task.tolerances, [])
    if any(problem.kind == INCORRECT for problem in problems):  # its findings (no launch) aside
        return None
    return Problem(
        POLICY,
        f"the output is right with its target kernel(s) {', '.join(instrumented)} launching nothing: "
        "the work is done outside them",
    )


def correctness_step(task: KernelTask, ctx: StepContext, side: RemoteSide | None) -> StepResult:
    """Every case against the reference; the first problem of a case is its verdict (`side`: the
    candidate's worker, set up; None when the step checks the reference itself)."""
    cases = task.cases_for(ctx.profile)
    eval_seed = secrets.randbelow(2**31)
    if ctx.target != "candidate" or side is None:  # the reference itself: finite on every check
        for case in cases:
            _reference_problem(task, ctx, case, check_plan(case, eval_seed))
        return StepResult("correctness", "ok", None, [CaseResult(c, correct=True) for c in cases], eval_seed=eval_seed)
    loaded = load_side(side, "correctness", cases, 1)
    if isinstance(loaded, StepResult):
        return loaded
    results: list[CaseResult] = []
    try:
        for case in cases:
            results.append(_check_case(task, ctx, side, case, eval_seed))
            log.info("%s: %s", case.id, results[-1].message or "ok")
        if all(r.correct for r in results):
            for at, case in enumerate(cases):  # each case: a candidate may work honestly on one alone
                provenance = _provenance(task, ctx, side, loaded, case) or _ablation(task, ctx, side, loaded, case)
                if provenance is not None:
                    message = f"[{provenance.kind}] {provenance.message}"
                    results[at] = CaseResult(case, correct=False, message=message, kind=provenance.kind)
                    break
    except WorkerFailure as failure:
        done = {r.case.id for r in results}
        message = f"[{failure.kind}] {failure}"
        results += [CaseResult(c, correct=False, message=message, kind=failure.kind) for c in cases if c.id not in done]
    bad = [r for r in results if r.correct is not True]
    if not bad:
        return StepResult("correctness", "ok", None, results, eval_seed=eval_seed)
    kind = worst([Problem(r.kind or INCORRECT, r.message or "") for r in bad])
    return StepResult(
        "correctness",
        "failed",
        f"{len(bad)} of {len(results)} cases failed; first: {bad[0].case.id}: {bad[0].message}",
        results,
        failure_kind=kind.kind if kind else INCORRECT,
        eval_seed=eval_seed,
    )
