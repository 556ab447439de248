"""Evaluation steps of the RMSNorm task: `python3 harness.py compile|correctness|performance`.

The baseline is the PyTorch reference below. The compile step builds kernel.cu with nvcc into a
private build folder (no GPU needed); correctness and performance need an NVIDIA GPU and report
`skipped` without one (requires_gpu=True: CUDA C++ has no CPU interpreter).
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
EPS = 1e-6
DTYPE_CODES = {torch.float32: 0, torch.float16: 1}
# (rows, hidden, dtype): Llama widths and odd ones (hidden not a multiple of 4 or 8).
CASES = (
    (4096, 4096, "float32"),
    (4096, 4096, "float16"),
    (8193, 5120, "float16"),
    (2048, 8192, "float32"),
    (6000, 3077, "float32"),
    (6000, 3077, "float16"),
)


def load_candidate(directory: Path) -> Callable[[torch.Tensor, torch.Tensor], torch.Tensor]:
    """Build (cached by source hash) and bind `rmsnorm_launch(x, weight, out, rows, hidden, dtype, eps, stream)`."""
    launch = SOURCE.launcher(directory, "rmsnorm_launch")

    def rmsnorm(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        out = torch.empty_like(x)
        rows, hidden = x.shape
        call_launcher(launch, x, weight, out, rows, hidden, DTYPE_CODES[x.dtype], EPS)
        return out

    return rmsnorm


def make_inputs(case: Case, generator: torch.Generator, device: torch.device) -> tuple[torch.Tensor, ...]:
    """x: normal activations; weight: positive gains in [0.5, 1.5) like a trained RMSNorm."""
    rows, hidden, dtype = case.int_param("rows"), case.int_param("hidden"), case.dtype()
    x = random_tensor((rows, hidden), dtype, generator, device)
    weight = random_tensor((hidden,), dtype, generator, device, distribution="uniform", low=0.5, high=1.5)
    return x, weight


def reference(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """RMSNorm in float32, cast back once: also the baseline that candidates are timed against."""
    xf = x.float()
    inv_rms = torch.rsqrt(xf.pow(2).mean(dim=-1, keepdim=True) + EPS)
    return (xf * inv_rms * weight.float()).to(x.dtype)


TASK = KernelTask(
    name="torch2cuda/llm/rmsnorm",
    cases=[Case.make(rows=r, hidden=h, dtype=d) for r, h, d in CASES],
    ci_cases=[Case.make(rows=4, hidden=64, dtype="float32"), Case.make(rows=3, hidden=77, dtype="float16")],
    make_inputs=make_inputs,
    reference=reference,
    load_candidate=load_candidate,
    build=SOURCE.build,
    requires_gpu=True,
    # Default tolerances fit: the output is O(1) and the only order-dependent step is a sum of
    # squares (all positive, no cancellation) whose relative error stays far below 1e-5 in
    # float32; float16 is one final rounding of a float32 value (at most 1 ulp <= 2^-10 relative).
    min_bytes=lambda case: (2 * case.int_param("rows") + 1) * case.int_param("hidden") * case.dtype().itemsize,
)

if __name__ == "__main__":
    raise SystemExit(run_task(TASK))
