"""The workers a step needs, started before the step's turn, and loading a side's code into one.

A step process starts its workers as soon as it starts (they import torch and create their CUDA
context while the step waits for its turn), and sets them up at its turn, once the evaluation
directory holds what this step judges. Caches: the baseline's worker in the performance step
builds into the step's own fresh cache (seeded with the frozen baseline's builds of pristine
code); every candidate worker builds into the evaluation's shared cache, so the candidate's
kernels compile once per evaluation and nothing it leaves there can reach the baseline.
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import torch

from aka.evaluation.wire import BASELINE_SOURCES_DIR, ENV_SHARED_CACHE, HELDOUT_FILE
from aka.harness import syscall_filter
from aka.harness.cases import Case
from aka.harness.guard import ENFORCE, OBSERVE, OFF
from aka.harness.host_memory import available_bytes
from aka.harness.link import WorkerFailure
from aka.harness.remote import NAMESPACE_FEATURE, RemoteError, RemoteSide, adopt_orphans
from aka.harness.report import CaseResult, StepResult
from aka.harness.task import HarnessError, KernelTask, StepContext, policy_applies
from aka.harness.turns import free_gpu_bytes
from aka.process import tree
from aka.trees import remove_tree

log = logging.getLogger(__name__)

SETUP_TIMEOUT_S = 300.0
LOAD_TIMEOUT_S = 900.0  # a CUDA source builds with nvcc inside the load


@dataclass
class StepWorkers:
    """The step's workers: the candidate's, and in a paired performance step the baseline's."""

    home: Path
    candidate: RemoteSide | None = None
    baseline: RemoteSide | None = None

    @classmethod
    def start(cls, ctx: StepContext, environ: Mapping[str, str]) -> StepWorkers:
        home = Path(tempfile.mkdtemp(prefix="aka-workers-", dir=environ.get("TMPDIR") or None))
        env = dict(environ)
        shared = environ.get(ENV_SHARED_CACHE)
        own = environ.get("TRITON_CACHE_DIR")
        device = ctx.device.type
        workers = cls(home)
        either = shared or own
        adopt_orphans()  # before any worker runs: what one leaves behind stays in reach
        if ctx.step == "performance" and ctx.target == "candidate":
            workers.baseline = RemoteSide("baseline", device, home, _path(own), env)
            workers.candidate = RemoteSide("candidate", device, home, _path(shared), env)
        elif ctx.step == "performance":
            workers.baseline = RemoteSide("baseline", device, home, _path(either), env)
        elif ctx.target == "candidate":
            workers.candidate = RemoteSide("candidate", device, home, _path(either), env)
        return workers

    def wait_started(self, ctx: StepContext) -> None:
        """Before the step's turn: the workers answer once started (torch imported, their CUDA
        context made), and on a GPU the judge makes its own context too, so that no turn on the
        device, which keeps every timed step of other evaluations waiting, is spent starting up.
        A worker that does not answer here is found out at its set-up, as before."""
        for side in (self.candidate, self.baseline):
            if side is not None:
                try:
                    side.request({"op": "ping"}, SETUP_TIMEOUT_S)
                except (WorkerFailure, RemoteError) as exc:
                    log.warning("the %s's worker did not start before the turn: %s", side.role, exc)
        if ctx.device.type == "cuda":
            try:
                torch.cuda.current_stream().synchronize()
            except Exception as exc:  # noqa: BLE001 - the step meets it again where it uses the GPU
                log.warning("the judge's CUDA did not start before the turn: %s", exc)

    @property
    def isolated(self) -> bool:
        sides = [s for s in (self.candidate, self.baseline) if s is not None]
        return bool(sides) and all(s.isolated for s in sides)

    def features(self) -> list[str]:
        """What the step's `isolation` says of its workers: their own namespaces, their calls filtered,
        no Unix socket made by them."""
        sides = [s for s in (self.candidate, self.baseline) if s is not None]
        return (
            [NAMESPACE_FEATURE] * self.isolated
            + [syscall_filter.FEATURE] * bool(sides and all(s.filtered for s in sides))
            + [syscall_filter.SOCKETS_FEATURE] * bool(sides and all(s.sockets_closed for s in sides))
        )

    def close(self) -> None:
        for side in (self.candidate, self.baseline):
            if side is not None:
                side.close()
        remove_tree(self.home)


def _path(value: str | None) -> Path | None:
    return Path(value) if value else None


def set_up(side: RemoteSide, task: KernelTask, ctx: StepContext, task_file: Path, role: str) -> None:
    """The worker's copy of the evaluation directory (without held-out files) and the task in it."""
    side.role = role
    # The baseline runs under the same guards, observed and never enforced: they put Python work
    # into each call's launch path (the dispatch mode, ~10 us a call on a two-core CPU) that is
    # the evaluator's, not the candidate's. With them on the candidate's side alone an unchanged
    # candidate came late to its pairs far more often than its baseline (H100, session 52's A/A:
    # 477 pairs late for it alone against 56); alike on both sides, an A/A pair runs one code.
    applies = policy_applies(ctx.family)
    policy = (ENFORCE if role == "candidate" else OBSERVE) if applies else OFF
    try:
        side.setup(
            Path.cwd(),
            task_file.name,
            task.name,
            ctx.device.type,
            policy,
            [*sorted(task.allowed_torch_ops), *(f"-{name}" for name in sorted(task.forbidden_torch_ops))],
            ctx.target_kernels,
            (HELDOUT_FILE,),
            SETUP_TIMEOUT_S,
        )
    except RemoteError as exc:  # no candidate code has run yet: the task's own files do not import
        raise HarnessError(f"the {role}'s worker cannot import the task: {exc}") from exc
    side.filtered = syscall_filter.filtered(side.process.pid)  # the kernel's word, not the worker's
    # the process that serves (inside its namespace, under its first process) set the second filter
    # once its CUDA was up; no side's code has run yet, so each process of the tree is the harness's
    side.sockets_closed = any(syscall_filter.closed_to_sockets(pid) for pid in tree(side.process.pid))
    log.info(
        "%s's worker set up (%s, %s)",
        role,
        "isolated" if side.isolated else "not isolated",
        "system calls filtered" if side.filtered else "no system call filter",
    )


def source_dir(ctx: StepContext) -> str:
    """Where a baseline worker finds the pristine sources, relative to its copy of the directory."""
    if ctx.baseline_dir is not None and ctx.baseline_dir.is_relative_to(Path.cwd()):
        return os.fspath(ctx.baseline_dir.relative_to(Path.cwd()))
    return BASELINE_SOURCES_DIR


def judge_has_nvcc() -> bool:
    return shutil.which("nvcc") is not None


def load_side(
    side: RemoteSide,
    step: str,
    cases: Sequence[Case],
    count: int,
    directory: str = ".",
    build: bool = False,
    may_lack_tools: bool = False,
) -> list[str] | StepResult:
    """Load `count` copies of the side's code (after its build, if asked); the target kernels it
    instruments, or the report of why it has none (skipped: a missing tool; failed otherwise).

    A worker's "missing tool" is only a claim: its side's code can raise the error or write the
    reply itself, and a skip drops the reward. It skips only where the caller says this load may
    need a tool (`may_lack_tools`) and the judge, looking itself, finds nvcc missing too."""
    if not side.loaded:  # what the machine and the GPU had before the side's code ran
        side.host_before_load = available_bytes()
        if side.device == "cuda":
            side.free_before_load = free_gpu_bytes(torch.device("cuda", torch.cuda.current_device()))
    side.loaded = True  # from here on the side's code may run in the worker
    try:
        if build:
            side.expect_ok({"op": "build"}, LOAD_TIMEOUT_S)
        reply = side.expect_ok({"op": "load", "count": count, "source_dir": directory}, LOAD_TIMEOUT_S)
    except RemoteError as exc:
        if exc.kind == "tool_missing" and may_lack_tools and not judge_has_nvcc():
            return StepResult(step, "skipped", str(exc))
        message = f"{'building' if build else 'loading'} the candidate failed: {exc}"
        return StepResult(step, "failed", message, [CaseResult(c, correct=False, message=message) for c in cases])
    except WorkerFailure as failure:
        message = f"loading the candidate: {failure}"
        return StepResult(
            step,
            "failed",
            message,
            [CaseResult(c, correct=False, message=message) for c in cases],
            failure_kind=failure.kind,
        )
    side.autotunes = reply.boolean("autotunes", False)
    return reply.texts("instrumented")
