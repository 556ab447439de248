"""Evaluation steps of the CUDA vector-add task: `python3 harness.py compile|correctness|performance`.

The compile step builds vector_add.cu with nvcc into build/ (needs no GPU); correctness and
performance need an NVIDIA GPU and report `skipped` without one.
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

SOURCE = CudaSource("vector_add.cu")
SIZES = (1_000_003, 4_194_305, 16_777_216, 50_331_653)


def load_candidate(directory: Path) -> Callable[[torch.Tensor, torch.Tensor], torch.Tensor]:
    """Build (cached by source hash) and bind `vector_add_launch(a, b, out, n, stream)`."""
    launch = SOURCE.launcher(directory, "vector_add_launch")

    def vector_add(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        out = torch.empty_like(a)
        call_launcher(launch, a, b, out, a.numel())
        return out

    return vector_add


def make_inputs(case: Case, generator: torch.Generator, device: torch.device) -> tuple[torch.Tensor, ...]:
    """Two independent normal vectors of n float32 values."""
    n = case.int_param("n")
    return (random_tensor((n,), torch.float32, generator, device),
            random_tensor((n,), torch.float32, generator, device))


def reference(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return a + b


TASK = KernelTask(
    name="cuda2cuda/basic/vector_add",
    cases=[Case.make(n=n, dtype="float32") for n in SIZES],
    ci_cases=[Case.make(n=n, dtype="float32") for n in (1000, 4099)],
    make_inputs=make_inputs,
    reference=reference,
    load_candidate=load_candidate,
    build=SOURCE.build,
    requires_gpu=True,
    min_bytes=lambda case: 3 * case.int_param("n") * 4,
)

if __name__ == "__main__":
    raise SystemExit(run_task(TASK))
