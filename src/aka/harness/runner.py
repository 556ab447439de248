"""A task's evaluation steps (`python3 harness.py compile|correctness|performance`).

`run_task` reads the contract's environment (docs/result-format.md), runs one step and writes one
`aka-step-report/1` object. Whatever the candidate does wrong (an import error, a Triton compile
error, a crash, a wrong value) becomes `status: failed` with a one-line reason; only a fault of the
harness or the task itself (a broken reference, a bad environment) exits non-zero.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import torch

from aka.harness.candidates import ToolMissingError
from aka.harness.cases import Case, make_generator
from aka.harness.compare import Output, Tolerance, compare_outputs
from aka.harness.report import CaseResult, StepResult, describe_exception, write_report
from aka.harness.timing import TimingConfig, time_function

STEPS = ("compile", "correctness", "performance")
NO_GPU_MESSAGE = "needs an NVIDIA GPU; this machine has none"
_TRITON_COMPILE_ERRORS = {"CompilationError", "CompileTimeAssertionFailure", "OutOfResources"}
CandidateError: tuple[type[BaseException], ...] = (Exception, SystemExit)

log = logging.getLogger(__name__)


class HarnessError(Exception):
    """A fault of the harness, the task or the environment, never of the candidate: exit non-zero."""


@dataclass(frozen=True)
class StepContext:
    """The contract's environment variables, checked once."""

    step: str
    device: torch.device
    target: str
    profile: str
    cuda_arch: str | None
    result_file: Path | None

    @classmethod
    def from_env(cls, step: str, environ: Mapping[str, str]) -> StepContext:
        if step not in STEPS:
            raise HarnessError(f"unknown step '{step}'; expected one of {', '.join(STEPS)}")
        default_device = "cuda" if torch.cuda.is_available() else "cpu"
        device = torch.device(environ.get("AKA_DEVICE") or default_device)
        if device.type not in ("cpu", "cuda"):
            raise HarnessError(f"AKA_DEVICE={device} is neither cpu nor cuda")
        if device.type == "cuda" and not torch.cuda.is_available():
            raise HarnessError("AKA_DEVICE asks for cuda, but torch sees no CUDA device")
        target = environ.get("AKA_TARGET") or "candidate"
        profile = environ.get("AKA_CASE_PROFILE") or ("ci" if device.type == "cpu" else "full")
        if target not in ("candidate", "reference"):
            raise HarnessError(f"AKA_TARGET={target} is neither candidate nor reference")
        if profile not in ("full", "ci"):
            raise HarnessError(f"AKA_CASE_PROFILE={profile} is neither full nor ci")
        result = environ.get("AKA_RESULT_FILE")
        return cls(step, device, target, profile, environ.get("AKA_CUDA_ARCH") or None,
                   Path(result) if result else None)


@dataclass(frozen=True)
class KernelTask:
    """What a task author declares: cases, inputs, the PyTorch reference and how to load the candidate.

    `build` (for compiled sources) runs in the compile step; `load_candidate` must be callable in
    any step and return the candidate's entry point, so a build it needs must be cached.
    """

    name: str
    cases: Sequence[Case]
    make_inputs: Callable[[Case, torch.Generator, torch.device], tuple[torch.Tensor, ...]]
    reference: Callable[..., Output]
    load_candidate: Callable[[], Callable[..., object]]
    ci_cases: Sequence[Case] = ()
    build: Callable[[], object] | None = None
    tolerances: Mapping[torch.dtype | str, Tolerance] = field(default_factory=dict)
    requires_gpu: bool = False
    timing: TimingConfig = field(default_factory=TimingConfig)

    def cases_for(self, profile: str) -> Sequence[Case]:
        """`full` cases, or the small `ci` ones (falling back to `full` when a task has none)."""
        return self.ci_cases if profile == "ci" and self.ci_cases else self.cases


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _device_lost(device: torch.device) -> bool:
    """After a candidate error: is the CUDA context still usable (an illegal access poisons it)?"""
    try:
        _sync(device)
    except RuntimeError:
        return True
    return False


def _inputs(task: KernelTask, case: Case, device: torch.device) -> tuple[torch.Tensor, ...]:
    return tuple(task.make_inputs(case, make_generator(case.seed, device), device))


def _expected(task: KernelTask, inputs: tuple[torch.Tensor, ...], device: torch.device) -> Output:
    """The reference runs on copies, so a candidate that writes into its inputs cannot change it."""
    expected = task.reference(*(t.clone() for t in inputs))
    _sync(device)
    return expected


def _summarise(step: str, results: list[CaseResult]) -> StepResult:
    bad = [r for r in results if r.correct is False or r.message]
    if not bad:
        return StepResult(step, "ok", None, results)
    return StepResult(step, "failed", f"{len(bad)} of {len(results)} cases failed; first: "
                                      f"{bad[0].case.id}: {bad[0].message}", results)


def _load(task: KernelTask, step: str, cases: Sequence[Case]) -> Callable[..., object] | StepResult:
    """The candidate's entry point, or the failed/skipped report explaining why there is none."""
    try:
        return task.load_candidate()
    except ToolMissingError as exc:
        return StepResult(step, "skipped", str(exc))
    except CandidateError as exc:
        message = f"loading the candidate failed: {describe_exception(exc)}"
        wrong = [CaseResult(c, correct=False, message=message) for c in cases]
        return StepResult(step, "failed", message, wrong)


def compile_step(task: KernelTask, ctx: StepContext) -> StepResult:
    """Build and import the candidate; on a GPU, one call also JIT-compiles its Triton kernels."""
    if ctx.target == "reference":
        return StepResult("compile", "ok", "the PyTorch reference needs no build")
    try:
        if task.build is not None:
            task.build()
    except ToolMissingError as exc:
        return StepResult("compile", "skipped", str(exc))
    except CandidateError as exc:
        return StepResult("compile", "failed", describe_exception(exc))
    loaded = _load(task, "compile", [])
    if isinstance(loaded, StepResult):
        return loaded
    cases = task.cases_for(ctx.profile)
    if ctx.device.type == "cuda" and cases:
        inputs = _inputs(task, cases[0], ctx.device)
        try:
            loaded(*inputs)
            _sync(ctx.device)
        except CandidateError as exc:
            if type(exc).__name__ in _TRITON_COMPILE_ERRORS:
                return StepResult("compile", "failed", describe_exception(exc))
            log.warning("trial call failed (left to the correctness step): %s", describe_exception(exc))
    return StepResult("compile", "ok")


def correctness_step(task: KernelTask, ctx: StepContext) -> StepResult:
    """Every case's output against the reference, within the dtype's tolerance."""
    cases = task.cases_for(ctx.profile)
    loaded = task.reference if ctx.target == "reference" else _load(task, "correctness", cases)
    if isinstance(loaded, StepResult):
        return loaded
    results: list[CaseResult] = []
    for index, case in enumerate(cases):
        inputs = _inputs(task, case, ctx.device)
        expected = _expected(task, inputs, ctx.device)
        try:
            got = loaded(*inputs)
            _sync(ctx.device)
        except CandidateError as exc:
            results.append(CaseResult(case, correct=False, message=describe_exception(exc)))
            if _device_lost(ctx.device):
                results += [CaseResult(c, correct=False, message="not run: the GPU context was lost")
                            for c in cases[index + 1:]]
                break
            continue
        verdict = compare_outputs(got, expected, task.tolerances)
        results.append(CaseResult(case, correct=verdict.correct, max_abs_error=verdict.max_abs_error,
                                  message=None if verdict.correct else verdict.message))
        log.info("%s: %s", case.id, verdict.message)
    return _summarise("correctness", results)


def _time_case(task: KernelTask, ctx: StepContext, function: Callable[..., object], case: Case) -> CaseResult:
    """Time one case; for the candidate, the output of the last timed call is checked too."""
    inputs = _inputs(task, case, ctx.device)
    if ctx.target == "reference":
        timing = time_function(lambda: function(*inputs), ctx.device, task.timing)
        return CaseResult(case, time_ms=timing.time_ms, timing_method=timing.method)
    expected = _expected(task, inputs, ctx.device)
    last: list[object] = [None]

    def call() -> None:
        last[0] = function(*inputs)

    try:
        measured = time_function(call, ctx.device, task.timing)
        _sync(ctx.device)
    except CandidateError as exc:
        return CaseResult(case, correct=False, message=describe_exception(exc))
    verdict = compare_outputs(last[0], expected, task.tolerances)
    if not verdict.correct:
        return CaseResult(case, correct=False, max_abs_error=verdict.max_abs_error,
                          message=f"output of the timed calls is wrong: {verdict.message}")
    return CaseResult(case, correct=True, time_ms=measured.time_ms, timing_method=measured.method,
                      max_abs_error=verdict.max_abs_error)


def performance_step(task: KernelTask, ctx: StepContext) -> StepResult:
    """The median time of each case, for the candidate or (`AKA_TARGET=reference`) the reference."""
    cases = task.cases_for(ctx.profile)
    loaded = task.reference if ctx.target == "reference" else _load(task, "performance", cases)
    if isinstance(loaded, StepResult):
        return loaded
    results: list[CaseResult] = []
    for index, case in enumerate(cases):
        results.append(_time_case(task, ctx, loaded, case))
        log.info("%s: %s ms", case.id, f"{results[-1].time_ms:.4g}" if results[-1].time_ms else "-")
        if results[-1].message and _device_lost(ctx.device):
            results += [CaseResult(c, correct=False, message="not run: the GPU context was lost")
                        for c in cases[index + 1:]]
            break
    return _summarise("performance", results)


def run_step(task: KernelTask, ctx: StepContext) -> StepResult:
    """Run one step, or report it skipped when the task needs a GPU this machine lacks."""
    if task.requires_gpu and ctx.device.type != "cuda" and ctx.step != "compile":
        return StepResult(ctx.step, "skipped", NO_GPU_MESSAGE)
    steps = {"compile": compile_step, "correctness": correctness_step, "performance": performance_step}
    return steps[ctx.step](task, ctx)


def run_task(task: KernelTask, argv: Sequence[str] | None = None,
             environ: Mapping[str, str] | None = None) -> int:
    """The step CLI: `harness.py STEP` (or `$AKA_STEP`). Returns 0 once the report is written."""
    if not logging.getLogger().handlers:
        logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                            format="%(levelname)s %(name)s: %(message)s")
    args = list(sys.argv[1:] if argv is None else argv)
    env = dict(os.environ if environ is None else environ)
    try:
        ctx = StepContext.from_env(args[0] if args else env.get("AKA_STEP", ""), env)
        os.environ.pop("AKA_RESULT_FILE", None)
        result = run_step(task, ctx)
        write_report(result, ctx.result_file)
    except HarnessError as exc:
        log.error("%s: %s", task.name, exc)
        return 2
    except Exception:
        log.exception("%s: harness error (not the candidate's fault)", task.name)
        return 3
    log.info("%s %s (%s, %s): %s%s", task.name, ctx.step, ctx.target, ctx.device, result.status,
             f": {result.message}" if result.message else "")
    return 0
