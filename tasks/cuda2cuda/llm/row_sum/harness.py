"""Evaluation steps of the row-sum task: `python3 harness.py compile|correctness|performance`.

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
    Tolerance,
    call_launcher,
    random_tensor,
    run_task,
)

SOURCE = CudaSource("kernel.cu")
# (rows, n): many short rows, medium rows, and a few very long ones; most n are odd.
SHAPES = ((16384, 1000), (8192, 4096), (2048, 16411), (65536, 257), (1024, 65537))


def load_candidate(directory: Path) -> Callable[[torch.Tensor], torch.Tensor]:
    """Build (cached by source hash) and bind `row_sum_launch(x, out, rows, n, stream)`."""
    launch = SOURCE.launcher(directory, "row_sum_launch")

    def row_sum(x: torch.Tensor) -> torch.Tensor:
        rows, n = x.shape
        out = torch.empty((rows,), dtype=torch.float32, device=x.device)
        call_launcher(launch, x, out, rows, n)
        return out

    return row_sum


def make_inputs(case: Case, generator: torch.Generator, device: torch.device) -> tuple[torch.Tensor, ...]:
    """A standard normal float32 matrix (row sums ~ N(0, n), with cancellation)."""
    shape = (case.int_param("rows"), case.int_param("n"))
    return (random_tensor(shape, torch.float32, generator, device),)


def reference(x: torch.Tensor) -> torch.Tensor:
    """The exact row sums (float64, rounded to float32 once)."""
    return x.double().sum(dim=-1).float()


TASK = KernelTask(
    name="cuda2cuda/llm/row_sum",
    cases=[Case.make(rows=rows, n=n, dtype="float32") for rows, n in SHAPES],
    ci_cases=[Case.make(rows=4, n=1000, dtype="float32"), Case.make(rows=7, n=33, dtype="float32")],
    make_inputs=make_inputs,
    reference=reference,
    load_candidate=load_candidate,
    build=SOURCE.build,
    requires_gpu=True,
    # Summation order: a float32 sum of n <= 70,000 N(0, 1) values summed sequentially (the worst
    # plausible order) misses the exact sum by up to ~4e-3 beyond rtol over 1024 rows of 65,537
    # (strided/tree orders stay under ~5e-4), and sums near 0 get no help from rtol: atol 1e-2
    # covers it, while dropping or double-counting elements (|x| ~ 1) still fails.
    tolerances={torch.float32: Tolerance(atol=1e-2, rtol=1e-5)},
    min_bytes=lambda case: 4 * case.int_param("rows") * (case.int_param("n") + 1),
)

if __name__ == "__main__":
    raise SystemExit(run_task(TASK))
