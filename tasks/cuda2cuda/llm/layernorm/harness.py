"""Evaluation steps of the LayerNorm task: `python3 harness.py compile|correctness|performance`.

The baseline is the original kernel.cu. The compile step builds kernel.cu with nvcc into a
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
EPS = 1e-5
# (rows, hidden): BERT/GPT widths and an odd one (hidden % 4 != 0: misaligned rows).
SHAPES = ((16384, 768), (8192, 1024), (4096, 4096), (2048, 8192), (6000, 3079))


def load_candidate(directory: Path) -> Callable[..., torch.Tensor]:
    """Build (cached by source hash) and bind `layernorm_launch(x, weight, bias, out, rows, hidden, eps, stream)`."""
    launch = SOURCE.launcher(directory, "layernorm_launch")

    def layernorm(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
        out = torch.empty_like(x)
        rows, hidden = x.shape
        call_launcher(launch, x, weight, bias, out, rows, hidden, EPS)
        return out

    return layernorm


def make_inputs(case: Case, generator: torch.Generator, device: torch.device) -> tuple[torch.Tensor, ...]:
    """x: activations with a nonzero mean (normal + 1); weight in [0.5, 1.5); bias with std 0.5."""
    rows, hidden = case.int_param("rows"), case.int_param("hidden")
    x = random_tensor((rows, hidden), torch.float32, generator, device) + 1.0
    weight = random_tensor((hidden,), torch.float32, generator, device, distribution="uniform", low=0.5, high=1.5)
    bias = random_tensor((hidden,), torch.float32, generator, device, scale=0.5)
    return x, weight, bias


def reference(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    """PyTorch's LayerNorm in float32 (biased variance, eps inside the square root)."""
    return torch.nn.functional.layer_norm(x, (x.shape[-1],), weight, bias, eps=EPS)


TASK = KernelTask(
    name="cuda2cuda/llm/layernorm",
    cases=[Case.make(rows=rows, hidden=hidden, dtype="float32") for rows, hidden in SHAPES],
    ci_cases=[Case.make(rows=4, hidden=64, dtype="float32"), Case.make(rows=3, hidden=77, dtype="float32")],
    make_inputs=make_inputs,
    reference=reference,
    load_candidate=load_candidate,
    build=SOURCE.build,
    requires_gpu=True,
    # Default float32 tolerances fit: outputs are O(1); mean and variance over <= 16384 values in
    # any float32 order (two-pass, Welford, or sum/sum-of-squares with mean ~1 and std ~1) shift
    # them by ~1e-6 relative, inside 1e-5 + 1e-5 * |expected|.
    min_bytes=lambda case: 4 * (2 * case.int_param("rows") + 2) * case.int_param("hidden"),
)

if __name__ == "__main__":
    raise SystemExit(run_task(TASK))
