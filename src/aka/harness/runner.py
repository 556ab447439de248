"""A task's evaluation steps (`python3 harness.py compile|correctness|performance`).

`run_task` claims the result channel and snapshots what it trusts before any candidate code is
imported, runs one step, verifies nothing it relies on was patched, and sends one
`aka-step-report/1`. Whatever the candidate does wrong becomes `status: failed` with a failure
kind and a one-line reason; only a fault of the harness or the task itself exits non-zero.
"""

from __future__ import annotations

import logging
import os
import re
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import torch

from aka.harness.candidates import ToolMissingError, use_shared_cache
from aka.harness.cases import Case, make_generator, sync
from aka.harness.channel import ReportChannel
from aka.harness.compare import Output, Tolerance
from aka.harness.guard import IntegritySnapshot
from aka.harness.paired import PairedConfig
from aka.harness.report import CaseResult, StepResult, describe_exception
from aka.harness.timing import TimingConfig

STEPS = ("compile", "correctness", "performance")
PROFILES = ("full", "ci", "heldout", "heldout_ci")
HELDOUT_MODULE = "heldout.py"
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
    family: str = "triton2triton"
    target_kernels: tuple[str, ...] = ()
    baseline: str = "source"
    baseline_dir: Path | None = None

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
        if target not in ("candidate", "reference", "baseline"):
            raise HarnessError(f"AKA_TARGET={target} is neither candidate, baseline nor reference")
        if profile not in PROFILES:
            raise HarnessError(f"AKA_CASE_PROFILE={profile} is not one of {', '.join(PROFILES)}")
        baseline = environ.get("AKA_BASELINE") or "source"
        baseline_dir = environ.get("AKA_BASELINE_DIR")
        kernels = tuple(k for k in (environ.get("AKA_TARGET_KERNELS") or "").split(",") if k)
        return cls(step, device, target, profile, environ.get("AKA_CUDA_ARCH") or None,
                   environ.get("AKA_TASK_FAMILY") or family_from_config(), kernels, baseline,
                   Path(baseline_dir) if baseline_dir else None)


def family_from_config(directory: Path | None = None) -> str:
    """`task_type` of the task's config.yaml (a step run by hand has no AKA_TASK_FAMILY), read
    without a YAML parser so the harness needs nothing beyond torch; triton2triton if absent."""
    path = (directory or Path.cwd()) / "config.yaml"
    text = path.read_text(encoding="utf-8", errors="replace") if path.is_file() else ""
    found = re.search(r"^task_type:\s*['\"]?([A-Za-z0-9_]+)", text, re.MULTILINE)
    return found.group(1) if found else "triton2triton"


@dataclass(frozen=True)
class KernelTask:
    """What a task author declares: cases, inputs, the PyTorch reference and how to load a source.

    `load_candidate(directory)` imports or builds the editable sources found in `directory` (the
    evaluation directory for the candidate, `.aka_baseline/` for the original) and returns the
    entry point. `min_bytes(case)` (the fewest bytes a correct kernel must move) and
    `min_flops(case)` (the fewest operations, on `flops_operand_bits`-wide operands) give a
    speed-of-light floor: a candidate timed below it is rejected as an impossible speedup.
    """

    name: str
    cases: Sequence[Case]
    make_inputs: Callable[[Case, torch.Generator, torch.device], tuple[torch.Tensor, ...]]
    reference: Callable[..., Output]
    load_candidate: Callable[[Path], Callable[..., object]]
    ci_cases: Sequence[Case] = ()
    build: Callable[[Path], object] | None = None
    tolerances: Mapping[torch.dtype | str, Tolerance] = field(default_factory=dict)
    requires_gpu: bool = False
    timing: TimingConfig = field(default_factory=TimingConfig)
    paired: PairedConfig = field(default_factory=PairedConfig)
    min_bytes: Callable[[Case], int] | None = None
    min_flops: Callable[[Case], int] | None = None
    flops_operand_bits: int = 16
    allowed_torch_ops: frozenset[str] = frozenset()

    def cases_for(self, profile: str) -> Sequence[Case]:
        """`full` cases, or the small `ci` ones (falling back to `full` when a task has none); the
        held-out profiles read `CASES` / `CI_CASES` from the task's hidden `heldout.py`."""
        if profile.startswith("heldout"):
            return heldout_cases(profile)
        return self.ci_cases if profile == "ci" and self.ci_cases else self.cases


def heldout_cases(profile: str) -> Sequence[Case]:
    """Held-out cases live in `heldout.py`, a hidden file the agent's workspace never contains."""
    path = Path.cwd() / HELDOUT_MODULE
    if not path.is_file():
        raise HarnessError(f"profile {profile} needs {HELDOUT_MODULE} in the evaluation directory")
    namespace: dict[str, object] = {"__file__": str(path)}
    exec(compile(path.read_text(), str(path), "exec"), namespace)
    cases = namespace.get("CI_CASES" if profile == "heldout_ci" else "CASES") or namespace.get("CASES")
    if not isinstance(cases, list | tuple) or not all(isinstance(c, Case) for c in cases) or not cases:
        raise HarnessError(f"{HELDOUT_MODULE} must define CASES (and may define CI_CASES) as lists of Case")
    return list(cases)


def device_lost(device: torch.device) -> bool:
    """After a candidate error: is the CUDA context still usable (an illegal access poisons it)?"""
    try:
        sync(device)
    except RuntimeError:
        return True
    return False


def make_case_inputs(task: KernelTask, case: Case, seed: int, device: torch.device) -> tuple[torch.Tensor, ...]:
    return tuple(task.make_inputs(case, make_generator(seed, device), device))


def expected_output(task: KernelTask, inputs: tuple[torch.Tensor, ...], device: torch.device) -> Output:
    """The reference runs on copies, so a candidate that writes into its inputs cannot change it."""
    expected = task.reference(*(t.clone() for t in inputs))
    sync(device)
    return expected


def load_source(task: KernelTask, step: str, cases: Sequence[Case],
                directory: Path | None = None) -> Callable[..., object] | StepResult:
    """The entry point of the sources in `directory` (default: the candidate in cwd), or the
    failed/skipped report explaining why there is none."""
    try:
        return task.load_candidate(directory or Path.cwd())
    except ToolMissingError as exc:
        return StepResult(step, "skipped", str(exc))
    except CandidateError as exc:
        message = f"loading the candidate failed: {describe_exception(exc)}"
        return StepResult(step, "failed", message, [CaseResult(c, correct=False, message=message) for c in cases])


def compile_step(task: KernelTask, ctx: StepContext) -> StepResult:
    """Build and import the candidate; on a GPU, one call also JIT-compiles its Triton kernels."""
    if ctx.target != "candidate":
        return StepResult("compile", "ok", "the baseline is built when it is timed")
    try:
        if task.build is not None:
            task.build(Path.cwd())
    except ToolMissingError as exc:
        return StepResult("compile", "skipped", str(exc))
    except CandidateError as exc:
        return StepResult("compile", "failed", describe_exception(exc))
    loaded = load_source(task, "compile", [])
    if isinstance(loaded, StepResult):
        return loaded
    cases = task.cases_for(ctx.profile)
    if ctx.device.type == "cuda" and cases:
        inputs = make_case_inputs(task, cases[0], cases[0].seed, ctx.device)
        try:
            loaded(*inputs)
            sync(ctx.device)
        except CandidateError as exc:
            if type(exc).__name__ in _TRITON_COMPILE_ERRORS:
                return StepResult("compile", "failed", describe_exception(exc))
            log.warning("trial call failed (left to the correctness step): %s", describe_exception(exc))
    return StepResult("compile", "ok")


def run_step(task: KernelTask, ctx: StepContext) -> StepResult:
    """Run one step, or report it skipped when the task needs a GPU this machine lacks."""
    from aka.harness.checks import correctness_step
    from aka.harness.perf import performance_step

    if task.requires_gpu and ctx.device.type != "cuda" and ctx.step != "compile":
        return StepResult(ctx.step, "skipped", NO_GPU_MESSAGE)
    if ctx.step != "performance" or ctx.target != "candidate":
        use_shared_cache()  # no baseline is built next to a candidate here (see performance_step)
    steps: dict[str, Callable[[KernelTask, StepContext], StepResult]] = {
        "compile": compile_step, "correctness": correctness_step, "performance": performance_step}
    return steps[ctx.step](task, ctx)


def run_task(task: KernelTask, argv: Sequence[str] | None = None,
             environ: Mapping[str, str] | None = None) -> int:
    """The step CLI: `harness.py STEP` (or `$AKA_STEP`). Returns 0 once the report is sent."""
    channel = ReportChannel.claim()
    integrity = IntegritySnapshot()
    if not logging.getLogger().handlers:
        logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(levelname)s %(name)s: %(message)s")
    args = list(sys.argv[1:] if argv is None else argv)
    env = dict(os.environ if environ is None else environ)
    try:
        ctx = StepContext.from_env(args[0] if args else env.get("AKA_STEP", ""), env)
        result = run_step(task, ctx)
        tampered = integrity.changed()
        if tampered:
            result = StepResult(ctx.step, "failed", f"the candidate patched what the harness relies on: "
                                f"{', '.join(tampered[:5])}", result.cases, failure_kind="tampering")
        channel.send(result.to_json())
    except HarnessError as exc:
        log.error("%s: %s", task.name, exc)
        return 2
    except Exception:
        log.exception("%s: harness error (not the candidate's fault)", task.name)
        return 3
    log.info("%s %s (%s, %s): %s%s", task.name, ctx.step, ctx.target, ctx.device, result.status,
             f": {result.message}" if result.message else "")
    return 0
