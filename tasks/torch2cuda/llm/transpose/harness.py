"""Evaluation steps of the transpose task (CUDA vs PyTorch): `python3 harness.py compile|correctness|performance`.

The baseline is PyTorch's `x.t().contiguous()`. The compile step builds kernel.cu with nvcc into
a private build folder (no GPU needed); correctness and performance need an NVIDIA GPU and report
`skipped` without one (requires_gpu=True: CUDA C++ has no CPU interpreter).
"""

from collections.abc import Callable
from pathlib import Path

import torch

from aka.harness import (
    EXACT,
    Case,
    CudaSource,
    KernelTask,
    call_launcher,
    random_tensor,
    run_task,
)

SOURCE = CudaSource("kernel.cu")
# (rows, cols): odd sizes in both dimensions, square-ish, wide and very wide-and-short.
SHAPES = ((4097, 4099), (8191, 2049), (1000, 30011), (12345, 777), (77, 200003))


def load_candidate(directory: Path) -> Callable[[torch.Tensor], torch.Tensor]:
    """Build (cached by source hash) and bind `transpose_launch(x, out, rows, cols, stream)`."""
    launch = SOURCE.launcher(directory, "transpose_launch")

    def transpose(x: torch.Tensor) -> torch.Tensor:
        rows, cols = x.shape
        out = torch.empty((cols, rows), dtype=x.dtype, device=x.device)
        call_launcher(launch, x, out, rows, cols)
        return out

    return transpose


def make_inputs(case: Case, generator: torch.Generator, device: torch.device) -> tuple[torch.Tensor, ...]:
    """A random float32 matrix (random values, so a misplaced element is always caught)."""
    shape = (case.int_param("rows"), case.int_param("cols"))
    return (random_tensor(shape, case.dtype(), generator, device),)


def reference(x: torch.Tensor) -> torch.Tensor:
    """A contiguous transpose: also the baseline that candidates are timed against."""
    return x.t().contiguous()


TASK = KernelTask(
    name="torch2cuda/llm/transpose",
    cases=[Case.make(rows=rows, cols=cols, dtype="float32") for rows, cols in SHAPES],
    ci_cases=[Case.make(rows=5, cols=7, dtype="float32"), Case.make(rows=33, cols=65, dtype="float32")],
    make_inputs=make_inputs,
    reference=reference,
    load_candidate=load_candidate,
    build=SOURCE.build,
    requires_gpu=True,
    # A transpose only moves values, so the result must match bit for bit.
    tolerances={torch.float32: EXACT},
    min_bytes=lambda case: 2 * case.int_param("rows") * case.int_param("cols") * 4,
    # the copy is the whole work here: torch's copies may not do it beside a kernel that copies
    # their result once more (a red team's `x.t().contiguous()`, session 51)
    forbidden_torch_ops=frozenset({"clone", "copy_", "cat", "stack"}),
)

if __name__ == "__main__":
    raise SystemExit(run_task(TASK))
