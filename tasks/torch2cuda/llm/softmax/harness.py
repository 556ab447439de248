"""Evaluation steps of the row-softmax task: `python3 harness.py compile|correctness|performance`.

The baseline is PyTorch's softmax. The compile step builds kernel.cu with nvcc into a private
build folder (no GPU needed); correctness and performance need an NVIDIA GPU and report `skipped`
without one (requires_gpu=True: CUDA C++ has no CPU interpreter).
"""

from collections.abc import Callable
from pathlib import Path

import torch

from aka.harness import (
    Case,
    CudaSource,
    KernelTask,
    call_launcher,
    random_tensor,
    run_task,
)

SOURCE = CudaSource("kernel.cu")
# (rows, cols): short, medium, long and vocabulary-sized rows; most widths are odd.
SHAPES = ((16384, 1000), (4096, 4093), (2048, 12289), (1024, 32003), (65536, 257))


def load_candidate(directory: Path) -> Callable[[torch.Tensor], torch.Tensor]:
    """Build (cached by source hash) and bind `softmax_launch(x, out, rows, cols, stream)`."""
    launch = SOURCE.launcher(directory, "softmax_launch")

    def softmax(x: torch.Tensor) -> torch.Tensor:
        out = torch.empty_like(x)
        rows, cols = x.shape
        call_launcher(launch, x, out, rows, cols)
        return out

    return softmax


def make_inputs(case: Case, generator: torch.Generator, device: torch.device) -> tuple[torch.Tensor, ...]:
    """Normal logits with std 4: without the max subtraction exp overflows on the long rows."""
    shape = (case.int_param("rows"), case.int_param("cols"))
    return (random_tensor(shape, case.dtype(), generator, device, scale=4.0),)


def reference(x: torch.Tensor) -> torch.Tensor:
    """PyTorch's own softmax: also the baseline that candidates are timed against."""
    return torch.softmax(x, dim=-1)


TASK = KernelTask(
    name="torch2cuda/llm/softmax",
    cases=[Case.make(rows=rows, cols=cols, dtype="float32") for rows, cols in SHAPES],
    ci_cases=[Case.make(rows=4, cols=1000, dtype="float32"), Case.make(rows=3, cols=37, dtype="float32")],
    make_inputs=make_inputs,
    reference=reference,
    load_candidate=load_candidate,
    build=SOURCE.build,
    requires_gpu=True,
    # Default float32 tolerances fit: outputs lie in [0, 1], expf/__expf and a different summation
    # order change them by a few ulp (relative ~1e-6), far inside 1e-5 + 1e-5 * |expected|.
    min_bytes=lambda case: 2 * case.int_param("rows") * case.int_param("cols") * 4,
)

if __name__ == "__main__":
    raise SystemExit(run_task(TASK))
