"""A task's evaluation steps (`python3 harness.py compile|correctness|performance`): the judge.

The step process is the judge. It claims the result channel, starts the workers the step needs
(`aka.harness.sides`), and never imports candidate code: the candidate runs only in its worker,
on inputs the judge wrote into memory it lends, and the judge compares what comes back, times it
against its own clock, and writes the one `aka-step-report/1`. Whatever the candidate does wrong
becomes `status: failed` with a failure kind and a one-line reason; only a fault of the harness
or the task itself exits non-zero (the evaluator then never charges the candidate).

Run by hand (no evaluator's channel: an agent or an author checking the sources in a shell), the
report is printed, a one-line verdict follows on standard error, and a failed step exits 1, so
that a command's exit status tells whoever runs it whether the step passed.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

import torch

from aka.evaluation.wire import ENV_STEP, StepExit
from aka.harness import stall
from aka.harness.channel import ReportChannel
from aka.harness.checks import correctness_step, reference_for
from aka.harness.cuda_driver import CudaOutOfMemoryError
from aka.harness.host_memory import available_bytes, host_allocation_failed
from aka.harness.link import WorkerFailure
from aka.harness.perf import performance_step
from aka.harness.phases import Phases
from aka.harness.remote import RemoteSide, make_undumpable
from aka.harness.report import StepResult
from aka.harness.sides import StepWorkers, load_side, set_up
from aka.harness.task import NO_GPU_MESSAGE, HarnessError, KernelTask, StepContext, exact_float32
from aka.harness.turns import (
    CaseMemory,
    MemoryShortfall,
    candidate_took,
    free_gpu_bytes,
    memory_freed_by_ending,
    others_took,
)
from aka.harness.verify import UNTIMEABLE

JUDGE_FEATURE = "separate-judge"
TRITON_COMPILE_ERRORS = {"CompilationError", "CompileTimeAssertionFailure", "OutOfResources"}
log = logging.getLogger(__name__)


def compile_step(task: KernelTask, ctx: StepContext, side: RemoteSide | None) -> StepResult:
    """Build and load the candidate in its worker; on a GPU, one call also JIT-compiles its
    Triton kernels (a Triton compile error fails the step, anything else is left to correctness)."""
    if ctx.target != "candidate" or side is None:
        return StepResult("compile", "ok", "the baseline is built when it is timed")
    builds_cuda = task.build is not None or "cuda" in ctx.family
    loaded = load_side(side, "compile", [], 1, build=task.build is not None, may_lack_tools=builds_cuda)
    if isinstance(loaded, StepResult):
        return loaded
    cases = task.cases_for(ctx.profile)
    if ctx.device.type == "cuda" and cases:
        inputs, expected = reference_for(task, ctx, cases[0], cases[0].seed, "normal")
        memory = CaseMemory(side, ctx.device, inputs, expected)
        try:
            turn = memory.call(inputs, load=0)
        finally:
            memory.close()
        if not turn.reply.ok:
            if turn.reply.text("exception") in TRITON_COMPILE_ERRORS:
                return StepResult("compile", "failed", turn.reply.text("error"))
            log.warning("trial call failed (left to the correctness step): %s", turn.reply.text("error"))
    return StepResult("compile", "ok")


def run_step(
    task: KernelTask, ctx: StepContext, workers: StepWorkers, task_file: Path, phases: Phases | None = None
) -> StepResult:
    """Run one step with its workers, or report it skipped when the task needs a GPU this machine lacks.
    `phases`: the timed step's turn on the device (aka.harness.phases)."""
    if task.requires_gpu and ctx.device.type != "cuda" and ctx.step != "compile":
        return StepResult(ctx.step, "skipped", NO_GPU_MESSAGE)
    try:
        if workers.candidate is not None:
            set_up(workers.candidate, task, ctx, task_file, "candidate")
        if workers.baseline is not None:
            reference = ctx.target == "reference" or ctx.baseline == "reference"  # torch2*, instruction2*
            set_up(workers.baseline, task, ctx, task_file, "reference" if reference else "baseline")
        if ctx.step == "compile":
            result = compile_step(task, ctx, workers.candidate)
        elif ctx.step == "correctness":
            result = correctness_step(task, ctx, workers.candidate)
        else:
            assert workers.baseline is not None, "the performance step has a baseline worker"
            result = performance_step(task, ctx, workers.baseline, workers.candidate, phases)
        _blame_full_gpu(result, ctx, workers.candidate)
        return result
    except WorkerFailure as failure:
        if not _charged_to_candidate(failure, workers):
            raise HarnessError(f"a worker of the task's own code failed: {failure}") from failure
        return StepResult(ctx.step, "failed", str(failure), failure_kind=failure.kind)
    except (MemoryShortfall, torch.OutOfMemoryError, torch.AcceleratorError, CudaOutOfMemoryError) as exc:
        if isinstance(exc, torch.AcceleratorError) and "out of memory" not in str(exc):
            raise  # a CUDA error of another kind: the harness's fault, with its traceback
        host = isinstance(exc, MemoryShortfall) and ctx.device.type != "cuda"
        need = exc.need if isinstance(exc, MemoryShortfall) else None
        return _short_of_memory(
            exc, ctx, workers.candidate, host, need, f"the judge ran out of {'host' if host else 'GPU'} memory: {exc}"
        )
    except (MemoryError, RuntimeError) as exc:  # the judge's own allocations (candidate code runs in the workers)
        if isinstance(exc, RuntimeError) and not host_allocation_failed(exc):
            raise
        return _short_of_memory(
            exc,
            ctx,
            workers.candidate,
            True,
            None,
            f"the judge ran out of host memory under the step's limit ({exc or 'MemoryError'}): "
            "a limit of this machine and harness, not of the candidate",
        )


def _short_of_memory(
    exc: BaseException, ctx: StepContext, candidate: RemoteSide | None, host: bool, need: int | None, harness: str
) -> StepResult:
    """The judge ran short of the host's or the GPU's memory: the candidate's failure where its
    worker took it (`turns.candidate_took`: what ending the worker gives back, against the fall
    since its code loaded), else the harness's (`harness`, an `infra_error`). The step fails either
    way, so the worker is ended to read what it held."""

    def read() -> int:
        return (available_bytes() or 0) if host else free_gpu_bytes(ctx.device)

    before = None if candidate is None else candidate.host_before_load if host else candidate.free_before_load
    free_now = read()
    freed = None
    if candidate is not None and before is not None:
        freed = memory_freed_by_ending(candidate, read, free_now)
    blame = candidate_took(need, before, free_now, freed, "host" if host else "GPU")
    if blame is None:
        raise HarnessError(harness) from exc
    return StepResult(ctx.step, "failed", blame, failure_kind=UNTIMEABLE)


def _blame_full_gpu(result: StepResult, ctx: StepContext, candidate: RemoteSide | None) -> None:
    """A candidate that failed for want of GPU memory that others took fails the step as the
    harness's (`turns.others_took`), an `infra_error` judged again, not the candidate's score.
    Whatever the failure says: on a full GPU torch's allocator can fail building its out-of-memory
    message (an NVML assert, seen on the H200 beside a 135 GiB hoard, judged `compile_error`), and
    a message is the candidate's to write anyway; the readings of the GPU decide."""
    if result.status != "failed" or ctx.device.type != "cuda" or candidate is None:
        return
    reason = others_took(candidate.free_before_load, lambda: free_gpu_bytes(ctx.device), candidate)
    if reason is not None:
        raise HarnessError(reason)


def _charged_to_candidate(failure: WorkerFailure, workers: StepWorkers) -> bool:
    """The candidate's worker failing is the candidate's doing; so is the baseline's, once candidate
    code has run where it could reach the baseline's worker (no namespaces of their own)."""
    candidate = workers.candidate
    if candidate is None:
        return False
    return failure.side == "candidate" or (candidate.loaded and not workers.isolated)


def judge_step(task: KernelTask, ctx: StepContext, environ: Mapping[str, str] | None = None) -> StepResult:
    """One step judged in this process with workers of its own, started and stopped around it:
    `run_task` without the channel (tools and tests that run a step in-process)."""
    workers = StepWorkers.start(ctx, dict(os.environ if environ is None else environ))
    try:
        result = run_step(task, ctx, workers, _task_file(task))
        result.isolation = [JUDGE_FEATURE, *workers.features()]
        return result
    finally:
        workers.close()


def _task_file(task: KernelTask) -> Path:
    """The file that declares `task` (the step's `harness.py`), which the workers import as a module."""
    for module in list(sys.modules.values()):
        path = getattr(module, "__file__", None)
        if isinstance(path, str) and path.endswith(".py") and any(value is task for value in vars(module).values()):
            return Path(path).resolve()
    return Path.cwd() / "harness.py"


def _forget_directory(directory: Path) -> None:
    """The evaluation directory leaves the import path: nothing written there later (a worker
    shares the file system where it cannot be confined) is ever imported by the judge."""
    sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != directory.resolve()]


def run_task(task: KernelTask, argv: Sequence[str] | None = None, environ: Mapping[str, str] | None = None) -> int:
    """The step CLI: `harness.py STEP` (or `$AKA_STEP`). Returns 0 once the report is sent. As the
    process's own command line (`argv` None) it then leaves at once: the report is sent and the
    workers are gone, and tearing down torch and triton took a second more per step."""
    code = _judge(task, argv, environ)
    if argv is None:
        logging.shutdown()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    return code


def _judge(task: KernelTask, argv: Sequence[str] | None, environ: Mapping[str, str] | None) -> int:
    make_undumpable()
    if not logging.getLogger().handlers:
        logging.basicConfig(
            level=logging.INFO, stream=sys.stderr, format="%(levelname)s %(name)s +%(relativeCreated).0fms: %(message)s"
        )
    phases = Phases.claim()  # before any worker starts, and out of the environment they get
    exact_float32()  # the references the judge computes
    args = list(sys.argv[1:] if argv is None else argv)
    env = dict(os.environ if environ is None else environ)
    workers: StepWorkers | None = None
    device: torch.device | None = None
    try:
        ctx = StepContext.from_env(args[0] if args else env.get(ENV_STEP, ""), env)
        device = ctx.device
        workers = StepWorkers.start(ctx, env)  # they start up while this step waits for its turn
        log.info("workers forked")
        workers.wait_started(ctx)  # then this step says it is ready for its turn
        log.info("workers started")
        channel = ReportChannel.claim()
        log.info("the step's turn came")
        task_file = _task_file(task)
        _forget_directory(Path.cwd())
        result = run_step(task, ctx, workers, task_file, phases)
        result.isolation = [JUDGE_FEATURE, *workers.features()]
        by_hand = channel.fd is None
        channel.send(result.to_json())
    except HarnessError as exc:
        log.error("%s: %s", task.name, exc)
        return StepExit.TASK_FAULT
    except Exception as exc:
        if _gpu_full_before_candidate_code(exc, device, workers):
            log.exception("%s: the GPU had no memory left for the judge before candidate code ran here", task.name)
            return StepExit.TASK_FAULT  # another process holds it: an infra_error, judged again
        log.exception("%s: unexpected error in the judge", task.name)
        return StepExit.HARNESS_BUG
    finally:
        stall.release()  # the step's result stands (or its error): no watchdog ends it now
        if workers is not None:
            workers.close()
        phases.close()
    log.info(
        "%s %s (%s, %s): %s%s",
        task.name,
        ctx.step,
        ctx.target,
        ctx.device,
        result.status,
        f": {result.message}" if result.message else "",
    )
    if not by_hand:
        return StepExit.REPORTED
    sys.stderr.write(verdict(result) + "\n")
    return StepExit.FAILED_BY_HAND if result.status == "failed" else StepExit.REPORTED


def _gpu_full_before_candidate_code(
    exc: BaseException, device: torch.device | None, workers: StepWorkers | None
) -> bool:
    """The judge's own CUDA call failed for want of GPU memory while no candidate code had run in
    this step (its worker not loaded): the GPU was full of another process's memory (another
    evaluation's hoarding candidate: on an H100 its neighbours' compile steps were charged
    `compile_error`). The judge never runs candidate code, so its exception is its own; once the
    candidate's code has loaded, `_short_of_memory` and `_blame_full_gpu` decide instead."""
    if device is None or device.type != "cuda":
        return False
    if workers is not None and workers.candidate is not None and workers.candidate.loaded:
        return False
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, (torch.OutOfMemoryError, CudaOutOfMemoryError)) or "out of memory" in str(seen):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def verdict(result: StepResult) -> str:
    """One line that says how the step went, for a step run by hand: `correctness: FAIL (incorrect):
    2 of 2 cases failed; ...`, `performance: PASS, mean speedup 1.31x over 4 case(s)`."""
    if result.status == "failed":
        kind = f" ({result.failure_kind})" if result.failure_kind else ""
        return f"{result.step}: FAIL{kind}: {result.message or 'no reason given'}"
    if result.status == "skipped":
        return f"{result.step}: SKIPPED (not judged on this machine): {result.message or ''}".rstrip(": ")
    speedups = [c.speedup for c in result.cases if c.speedup is not None and c.speedup > 0]
    if speedups and len(speedups) == len(result.cases):
        return (
            f"{result.step}: PASS, mean speedup {sum(speedups) / len(speedups):.3f}x over {len(speedups)} "
            "case(s) (baseline time / yours)"
        )
    return f"{result.step}: PASS" + (f" ({len(result.cases)} case(s))" if result.cases else "")
