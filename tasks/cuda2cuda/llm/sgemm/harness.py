"""Evaluation steps of the SGEMM task: `python3 harness.py compile|correctness|performance`.

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
# (M, N, K): every case has sizes that are not multiples of 64/128 or of 8 (tile edges and the
# k-loop tail are exercised); baseline times are roughly 0.2-1 ms on an H200.
SHAPES = ((1000, 1000, 1000), (2048, 1536, 777), (1537, 2049, 1023), (4096, 1024, 513), (333, 4099, 2050))


def load_candidate(directory: Path) -> Callable[[torch.Tensor, torch.Tensor], torch.Tensor]:
    """Build (cached by source hash) and bind `sgemm_launch(A, B, C, M, N, K, stream)`."""
    launch = SOURCE.launcher(directory, "sgemm_launch")

    def sgemm(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        m, k = a.shape
        n = b.shape[1]
        c = torch.empty((m, n), dtype=torch.float32, device=a.device)
        call_launcher(launch, a, b, c, m, n, k)
        return c

    return sgemm


def make_inputs(case: Case, generator: torch.Generator, device: torch.device) -> tuple[torch.Tensor, ...]:
    """A (M, K) and B (K, N), independent standard normal float32 (|C| is about sqrt(K))."""
    m, n, k = case.int_param("m"), case.int_param("n"), case.int_param("k")
    return (random_tensor((m, k), torch.float32, generator, device),
            random_tensor((k, n), torch.float32, generator, device))


def reference(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """The exact product (float64, rounded to float32 once): no TF32, no order dependence."""
    return (a.double() @ b.double()).float()


TASK = KernelTask(
    name="cuda2cuda/llm/sgemm",
    cases=[Case.make(m=m, n=n, k=k, dtype="float32") for m, n, k in SHAPES],
    ci_cases=[Case.make(m=32, n=32, k=32, dtype="float32"), Case.make(m=17, n=29, k=23, dtype="float32")],
    make_inputs=make_inputs,
    reference=reference,
    load_candidate=load_candidate,
    build=SOURCE.build,
    requires_gpu=True,
    # float32 accumulation over K <= 4096 in any order (even one sequential non-FMA sum per output,
    # the worst plausible) stays within 3.2e-4 of the exact product for these N(0, 1) inputs
    # (|C| ~ sqrt(K), up to ~300): atol 1e-3 + rtol 1e-4 leaves a 3x margin, while TF32 tensor
    # cores (10-bit mantissa, errors ~1e-2 here) fail on most outputs.
    tolerances={torch.float32: Tolerance(atol=1e-3, rtol=1e-4)},
    min_bytes=lambda case: 4 * (case.int_param("m") * case.int_param("k") + case.int_param("k") * case.int_param("n")
                                + case.int_param("m") * case.int_param("n")),
    min_flops=lambda case: 2 * case.int_param("m") * case.int_param("n") * case.int_param("k"),
)

if __name__ == "__main__":
    raise SystemExit(run_task(TASK))
