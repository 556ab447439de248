"""What a task author declares (`KernelTask`) and the environment a step runs in (`StepContext`).

Both are plain data, imported by the judge (the step process, which never runs candidate code)
and by the workers (the processes that do); neither imports the steps, so the step modules can
import this one without a cycle.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import torch

from aka.config.families import family_named
from aka.evaluation.wire import (
    ENV_BASELINE,
    ENV_BASELINE_DIR,
    ENV_CASE_PROFILE,
    ENV_CUDA_ARCH,
    ENV_DEVICE,
    ENV_TARGET,
    ENV_TARGET_KERNELS,
    ENV_TASK_FAMILY,
    HELDOUT_FILE,
)
from aka.harness.cases import Case, make_generator, sync
from aka.harness.compare import Output, Tolerance
from aka.harness.paired import PairedConfig
from aka.harness.timing import TimingConfig

STEPS = ("compile", "correctness", "performance")
PROFILES = ("full", "ci", "heldout", "heldout_ci")
NO_GPU_MESSAGE = "needs an NVIDIA GPU; this machine has none"
KERNEL_LANGUAGES = ("triton", "cuda", "hip", "flydsl")


def policy_applies(family: str) -> bool:
    """Kernel families must do the work in their kernels (aka.config.families); e2e and repository tasks
    are exempt. A family the registry does not know is held to it when its name ends in a kernel
    language (a step run by hand on a task of a newer aka)."""
    known = family_named(family)
    return known.torch_policy if known is not None else family.endswith(KERNEL_LANGUAGES)


def kernel_language(family: str) -> str | None:
    """The language a family's kernels are written in (aka.config.families); for a family the
    registry does not know, the kernel language its name ends in."""
    known = family_named(family)
    if known is not None:
        return known.language
    return next((language for language in KERNEL_LANGUAGES if family.endswith(language)), None)


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
        """Checked without initializing CUDA (NVML counts the devices): the judge forks its
        workers after this, and a forked child cannot initialize CUDA its parent initialized."""
        if step not in STEPS:
            raise HarnessError(f"unknown step '{step}'; expected one of {', '.join(STEPS)}")
        device = torch.device(environ.get(ENV_DEVICE) or ("cuda" if _cuda_visible() else "cpu"))
        if device.type not in ("cpu", "cuda"):
            raise HarnessError(f"{ENV_DEVICE}={device} is neither cpu nor cuda")
        if device.type == "cuda" and not _cuda_visible():
            raise HarnessError(f"{ENV_DEVICE} asks for cuda, but torch sees no CUDA device")
        target = environ.get(ENV_TARGET) or "candidate"
        profile = environ.get(ENV_CASE_PROFILE) or ("ci" if device.type == "cpu" else "full")
        if target not in ("candidate", "reference", "baseline"):
            raise HarnessError(f"{ENV_TARGET}={target} is neither candidate, baseline nor reference")
        if profile not in PROFILES:
            raise HarnessError(f"{ENV_CASE_PROFILE}={profile} is not one of {', '.join(PROFILES)}")
        baseline = environ.get(ENV_BASELINE) or "source"
        baseline_dir = environ.get(ENV_BASELINE_DIR)
        kernels = tuple(k for k in (environ.get(ENV_TARGET_KERNELS) or "").split(",") if k)
        return cls(
            step,
            device,
            target,
            profile,
            environ.get(ENV_CUDA_ARCH) or None,
            environ.get(ENV_TASK_FAMILY) or family_from_config(),
            kernels,
            baseline,
            Path(baseline_dir) if baseline_dir else None,
        )


def _cuda_visible() -> bool:
    """torch.cuda.is_available() through NVML, which leaves CUDA uninitialized in this process."""
    previous = os.environ.get("PYTORCH_NVML_BASED_CUDA_CHECK")
    os.environ["PYTORCH_NVML_BASED_CUDA_CHECK"] = "1"
    try:
        return torch.cuda.is_available()
    finally:
        if previous is None:
            del os.environ["PYTORCH_NVML_BASED_CUDA_CHECK"]
        else:
            os.environ["PYTORCH_NVML_BASED_CUDA_CHECK"] = previous


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
    entry point; it only ever runs in a worker process. `min_bytes(case)` (the fewest bytes a
    correct kernel must move) and `min_flops(case)` (the fewest operations, on
    `flops_operand_bits`-wide operands) give a speed-of-light floor: a candidate timed below it is
    rejected as an impossible speedup (without `min_bytes`, the bytes of the outputs are the
    floor). `nonfinite_reference`: the reference may hold NaN or Inf on the task's inputs (a
    candidate must then match them); otherwise a non-finite reference is a defect of the task.
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
    # allowed operators this task forbids: where a copy is the whole work (a transpose, a gather),
    # `x.t().contiguous()` beside a target kernel that only copied its result passed (session 51)
    forbidden_torch_ops: frozenset[str] = frozenset()
    nonfinite_reference: bool = False

    def cases_for(self, profile: str, directory: Path | None = None) -> Sequence[Case]:
        """`full` cases, or the small `ci` ones (falling back to `full` when a task has none); the
        held-out profiles read `CASES` / `CI_CASES` from the task's hidden `heldout.py`."""
        if profile.startswith("heldout"):
            return heldout_cases(profile, directory)
        return self.ci_cases if profile == "ci" and self.ci_cases else self.cases


def heldout_cases(profile: str, directory: Path | None = None) -> Sequence[Case]:
    """Held-out cases live in `heldout.py`, a hidden file the agent's workspace never contains."""
    path = (directory or Path.cwd()) / HELDOUT_FILE
    if not path.is_file():
        raise HarnessError(f"profile {profile} needs {HELDOUT_FILE} in the evaluation directory")
    namespace: dict[str, object] = {"__file__": str(path)}
    exec(compile(path.read_text(), str(path), "exec"), namespace)
    cases = namespace.get("CI_CASES" if profile == "heldout_ci" else "CASES") or namespace.get("CASES")
    if not isinstance(cases, list | tuple) or not all(isinstance(c, Case) for c in cases) or not cases:
        raise HarnessError(f"{HELDOUT_FILE} must define CASES (and may define CI_CASES) as lists of Case")
    return list(cases)


def make_case_inputs(task: KernelTask, case: Case, seed: int, device: torch.device) -> tuple[torch.Tensor, ...]:
    return tuple(task.make_inputs(case, make_generator(seed, device), device))


def expected_output(task: KernelTask, inputs: tuple[torch.Tensor, ...], device: torch.device) -> Output:
    """The reference on copies of the inputs (the judge keeps the originals to compare against)."""
    expected = task.reference(*(t.clone() for t in inputs))
    sync(device)
    return expected


def exact_float32() -> None:
    """float32 convolutions and matmuls in float32, in the judge and in both workers: torch lets
    cuDNN use TF32 by default, so a convolution reference was off from an exact float32 kernel by
    up to 6e-4 against KernelBench's 1e-4 tolerance (a red team's emulation, session 52), and a
    baseline timed in TF32 is not the one the check holds to float32."""
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False
