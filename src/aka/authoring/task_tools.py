"""Authoring tools: `aka task new` writes a working scaffold; `aka task check` proves a task on the CPU.

The scaffold is a complete, passing task (a scaled copy, `y = 2x`) in the family's language, so an
author starts from something the evaluator already accepts and changes one piece at a time.
"""

from __future__ import annotations

import contextlib
import tempfile
from dataclasses import dataclass
from pathlib import Path

from aka.config.families import FAMILIES
from aka.config.tasks import load_task, task_identity
from aka.device import DeviceInfo
from aka.errors import AkaError, ConfigError
from aka.evaluation.baseline import measure_baseline
from aka.evaluation.eval_dir import build_eval_dir
from aka.evaluation.kernel_check import missing_kernels
from aka.evaluation.steps import evaluate_candidate
from aka.progress import Phase, phase
from aka.results.task_result import FailureKind
from aka.run.repository import materialize

TRITON_FAMILIES = tuple(f.name for f in FAMILIES.values() if f.scaffold == "triton")
CUDA_FAMILIES = tuple(f.name for f in FAMILIES.values() if f.scaffold == "cuda")
SKELETON_FAMILIES = tuple(f.name for f in FAMILIES.values() if f.skeleton)

TRITON_KERNEL = '''"""The editable source: `scale(x)` returns 2 * x, computed by the Triton kernel `scale_kernel`."""

import torch
import triton
import triton.language as tl

BLOCK_SIZE = 256


@triton.jit
def scale_kernel(x_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    offsets = tl.program_id(axis=0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask, other=0.0)
    tl.store(out_ptr + offsets, x * 2, mask=mask)


def scale(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    scale_kernel[(triton.cdiv(x.numel(), BLOCK_SIZE),)](x, out, x.numel(), BLOCK_SIZE=BLOCK_SIZE)
    return out
'''
CUDA_KERNEL = """// The editable source: scale_kernel computes out = 2 * x; scale_launch is called through ctypes.
#include <cuda_runtime.h>

#define THREADS_PER_BLOCK 256

__global__ void scale_kernel(const float* x, float* out, long long n) {
    long long i = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (i < n) out[i] = 2.0f * x[i];
}

extern "C" int scale_launch(const float* x, float* out, long long n, cudaStream_t stream) {
    if (n <= 0) return 0;
    const long long blocks = (n + THREADS_PER_BLOCK - 1) / THREADS_PER_BLOCK;
    scale_kernel<<<static_cast<unsigned int>(blocks), THREADS_PER_BLOCK, 0, stream>>>(x, out, n);
    return static_cast<int>(cudaGetLastError());
}
"""
TRITON_IMPORTS = """
import torch

from aka.harness import Case, KernelTask, candidate_function, random_tensor, run_task
"""
CUDA_IMPORTS = """
from collections.abc import Callable
from pathlib import Path

import torch

from aka.harness import Case, CudaSource, KernelTask, call_launcher, random_tensor, run_task

SOURCE = CudaSource("kernel.cu")
"""
TRITON_LOADER = 'load_candidate=candidate_function("kernel", "scale"),'
CUDA_LOADER = """load_candidate=load_candidate,
    build=SOURCE.build,
    requires_gpu=True,"""
CUDA_HELPERS = """

def load_candidate(directory: Path) -> Callable[[torch.Tensor], torch.Tensor]:
    launch = SOURCE.launcher(directory, "scale_launch")

    def scale(x: torch.Tensor) -> torch.Tensor:
        out = torch.empty_like(x)
        call_launcher(launch, x, out, x.numel())
        return out

    return scale
"""
HARNESS = '''"""Evaluation steps: `python3 harness.py compile|correctness|performance` (see docs/tasks.md)."""
{imports}

SIZES = (1_000_003, 4_194_304, 16_777_259)


def make_inputs(case: Case, generator: torch.Generator, device: torch.device) -> tuple[torch.Tensor, ...]:
    return (random_tensor((case.int_param("n"),), case.dtype(), generator, device),)


def reference(x: torch.Tensor) -> torch.Tensor:
    return x * 2
{helpers}

TASK = KernelTask(
    name="{name}",
    cases=[Case.make(n=n, dtype=dtype) for n in SIZES for dtype in ({dtypes})],
    ci_cases=[Case.make(n=1000, dtype="float32"), Case.make(n=4099, dtype="float32")],
    make_inputs=make_inputs,
    reference=reference,
    {loader}
    min_bytes=lambda case: 2 * case.int_param("n") * case.dtype().itemsize,
)

if __name__ == "__main__":
    raise SystemExit(run_task(TASK))
'''
HELDOUT = '''"""Held-out cases: hidden from the agent (listed in hidden_files), used to measure generalization."""

from aka.harness import Case

CASES = [Case.make(n=n, dtype="float32") for n in (777, 65_537, 3_000_017, 9_999_991)]
CI_CASES = [Case.make(n=n, dtype="float32") for n in (777, 2051)]
'''
CONFIG = """task_type: {family}
source_file_path: [{source}]
target_kernel_functions: [scale_kernel]
compile_command: [python3 harness.py compile]
correctness_command: [python3 harness.py correctness]
performance_command: [python3 harness.py performance]
compile_timeout: 300
correctness_timeout: 600
performance_timeout: 900
baseline: {baseline}
hidden_files: [heldout.py]
tunables:
  - name: {knob}
    values: [128, 256, 512, 1024]
prompt:
  instructions: |
    Make {source} faster without changing its results: y = 2 * x for a contiguous 1-D tensor.
  cheatsheet: |
    Memory-bound: one read and one write per element. Larger blocks amortize per-block overhead.
"""


def scaffold_task(root: Path, name: str) -> Path:
    """Write a working task `root/name` (FAMILY/SUITE/NAME) for a Triton or CUDA family."""
    parts = name.strip("/").split("/")
    if len(parts) != 3:
        raise AkaError(f"task name '{name}': use FAMILY/SUITE/NAME, e.g. triton2triton/mine/scale")
    family = parts[0]
    if family not in TRITON_FAMILIES + CUDA_FAMILIES:
        raise AkaError(f"task name '{name}': scaffolds exist for {', '.join(TRITON_FAMILIES + CUDA_FAMILIES)}")
    target = root / name
    if target.exists():
        raise AkaError(f"{target} already exists; choose another name")
    cuda = family in CUDA_FAMILIES
    imports = CUDA_IMPORTS if cuda else TRITON_IMPORTS
    target.mkdir(parents=True)
    source = "kernel.cu" if cuda else "kernel.py"
    (target / source).write_text(CUDA_KERNEL if cuda else TRITON_KERNEL)
    (target / "harness.py").write_text(
        HARNESS.format(
            imports=imports,
            helpers=CUDA_HELPERS if cuda else "",
            name=name,
            loader=CUDA_LOADER if cuda else TRITON_LOADER,
            dtypes='"float32",' if cuda else '"float32", "float16"',
        )
    )
    (target / "heldout.py").write_text(HELDOUT)
    baseline = "reference" if family.startswith(("torch2", "instruction2")) else "source"
    (target / "config.yaml").write_text(
        CONFIG.format(
            family=family, source=source, baseline=baseline, knob="THREADS_PER_BLOCK" if cuda else "BLOCK_SIZE"
        )
    )
    return target


@dataclass(frozen=True)
class TaskCheck:
    name: str
    ok: bool
    detail: str


def check_task(
    root: Path, task_dir: Path, device: DeviceInfo, solution: Path | None = None, heldout_through: int = 3
) -> list[TaskCheck]:
    """Static checks, then the real evaluator on this machine: baseline, candidate, held-out.

    The candidate is the task's own editable sources (the noop agent), or `solution`'s copies of
    them. An instruction2triton task usually gives no kernel, so its untouched skeleton only has
    to fail cleanly (a failure kind, not a harness crash); a solution proves the task solvable.
    `heldout_through=2` checks the held-out cases for correctness only (the suite's tests: the
    performance step is the same code on other shapes, and three processes more).
    """
    try:
        task = load_task(root, task_dir)
    except ConfigError as exc:
        return [TaskCheck("config", False, str(exc))]
    checks = [TaskCheck("config", True, f"{task.family}, baseline: {task.config.baseline_source.value}")]
    skeleton = task.family in SKELETON_FAMILIES and solution is None
    with tempfile.TemporaryDirectory() as tmp:
        scratch = Path(tmp)
        try:
            task = materialize(task, scratch / "repos")
        except AkaError as exc:
            return [*checks, TaskCheck("repository", False, str(exc))]
        build_eval_dir(task, scratch / "static", solution)
        absent = missing_kernels(task, scratch / "static")
        if skeleton:
            checks.append(TaskCheck("target kernels defined", True, "skeleton: written by the agent"))
        else:
            checks.append(TaskCheck("target kernels defined", not absent, ", ".join(absent) or "all found"))
        with phase(Phase.BASELINE):
            baseline = measure_baseline(scratch, task, task_identity(task), device, scratch / "baseline")
        skipped = baseline.status is FailureKind.SKIPPED
        checks.append(
            TaskCheck(
                "baseline", baseline.usable or skipped, baseline.message or f"{len(baseline.cases)} case(s) timed"
            )
        )
        candidate = solution or task.directory
        name = "solution" if solution else "noop candidate"
        for heldout in (False, True) if "heldout.py" in task.config.hidden_files else (False,):
            with phase(Phase.HELDOUT) if heldout else contextlib.nullcontext():
                outcomes = evaluate_candidate(
                    task,
                    candidate,
                    scratch / f"candidate{heldout}",
                    device,
                    heldout=heldout,
                    through=heldout_through if heldout else 3,
                )
            failed = next((o for o in outcomes if not o.passed), None)
            label = f"held-out cases ({name})" if heldout else name
            if skeleton:  # a skeleton fails cleanly (a failure kind, not a harness fault); a given kernel passes
                clean = failed is None or failed.skipped or failed.failure is not FailureKind.INFRA_ERROR
                detail = f"skeleton fails cleanly: {failed.failure.value}" if failed else "passes"
                checks.append(TaskCheck(label, clean, detail))
                continue
            ok = failed is None or failed.skipped
            checks.append(TaskCheck(label, ok, failed.message or failed.failure.value if failed else "passes"))
    return checks
