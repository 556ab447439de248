"""Evaluation steps of the GELU task: `python3 harness.py compile|correctness|performance`."""

import torch

from aka.harness import Case, KernelTask, candidate_function, random_tensor, run_task

SIZES = (1_000_003, 4_194_304, 16_777_259)
DTYPES = ("float32", "float16", "bfloat16")


def make_inputs(case: Case, generator: torch.Generator, device: torch.device) -> tuple[torch.Tensor, ...]:
    """Normal values with std 3, so both tails of the erf curve are exercised."""
    return (random_tensor((case.int_param("n"),), case.dtype(), generator, device, scale=3.0),)


def reference(x: torch.Tensor) -> torch.Tensor:
    """Exact (erf) GELU computed in float32 and cast back, like the kernel."""
    return torch.nn.functional.gelu(x.float()).to(x.dtype)


TASK = KernelTask(
    name="triton2triton/basic/gelu",
    cases=[Case.make(n=n, dtype=dtype) for n in SIZES for dtype in DTYPES],
    ci_cases=[Case.make(n=1000, dtype="float32"), Case.make(n=4099, dtype="float16"),
              Case.make(n=4099, dtype="bfloat16")],
    make_inputs=make_inputs,
    reference=reference,
    load_candidate=candidate_function("kernel", "gelu"),
    min_bytes=lambda case: 2 * case.int_param("n") * case.dtype().itemsize,
)

if __name__ == "__main__":
    raise SystemExit(run_task(TASK))
