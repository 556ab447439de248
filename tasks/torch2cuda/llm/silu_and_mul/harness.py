"""Evaluation steps of the SwiGLU (silu-and-mul) task: `python3 harness.py compile|correctness|performance`.

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
DTYPE_CODES = {torch.float32: 0, torch.float16: 1}
# (tokens, d, dtype): Llama/Mistral MLP widths (11008, 14336) and odd ones.
CASES = (
    (4096, 11008, "float16"),
    (2048, 14336, "float16"),
    (8192, 2731, "float16"),
    (1000, 11008, "float32"),
    (3001, 4097, "float32"),
)


def load_candidate(directory: Path) -> Callable[[torch.Tensor], torch.Tensor]:
    """Build (cached by source hash) and bind `silu_and_mul_launch(x, out, tokens, d, dtype, stream)`."""
    launch = SOURCE.launcher(directory, "silu_and_mul_launch")

    def silu_and_mul(x: torch.Tensor) -> torch.Tensor:
        tokens, two_d = x.shape
        out = torch.empty((tokens, two_d // 2), dtype=x.dtype, device=x.device)
        call_launcher(launch, x, out, tokens, two_d // 2, DTYPE_CODES[x.dtype])
        return out

    return silu_and_mul


def make_inputs(case: Case, generator: torch.Generator, device: torch.device) -> tuple[torch.Tensor, ...]:
    """Normal gate and up projections with std 2, so silu's curved region and both tails are hit."""
    shape = (case.int_param("tokens"), 2 * case.int_param("d"))
    return (random_tensor(shape, case.dtype(), generator, device, scale=2.0),)


def reference(x: torch.Tensor) -> torch.Tensor:
    """silu(gate) * up in float32, cast back once: also the baseline candidates are timed against."""
    d = x.shape[-1] // 2
    return (torch.nn.functional.silu(x[:, :d].float()) * x[:, d:].float()).to(x.dtype)


TASK = KernelTask(
    name="torch2cuda/llm/silu_and_mul",
    cases=[Case.make(tokens=t, d=d, dtype=dtype) for t, d, dtype in CASES],
    ci_cases=[Case.make(tokens=4, d=64, dtype="float32"), Case.make(tokens=3, d=77, dtype="float16")],
    make_inputs=make_inputs,
    reference=reference,
    load_candidate=load_candidate,
    build=SOURCE.build,
    requires_gpu=True,
    # Default tolerances fit: each output is a few float32 operations (expf or __expf differ by a
    # few ulp, ~1e-6 relative), and float16 is one final rounding (at most 1 ulp <= 2^-10 relative).
    min_bytes=lambda case: 3 * case.int_param("tokens") * case.int_param("d") * case.dtype().itemsize,
)

if __name__ == "__main__":
    raise SystemExit(run_task(TASK))
