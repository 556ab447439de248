"""Evaluation steps of the prefix-sum task: `python3 harness.py compile|correctness|performance`."""

import torch

from aka.harness import Case, KernelTask, Tolerance, candidate_function, random_tensor, run_task

# (rows, n, dtype): short and long odd rows; the last is a vocabulary-wide scan as in top-p sampling.
CASES = (
    (16384, 2000, "bfloat16"),
    (4096, 4097, "float32"),
    (2048, 12289, "float16"),
    (1024, 32771, "float32"),
    (512, 128256, "float32"),
)


def make_inputs(case: Case, generator: torch.Generator, device: torch.device) -> tuple[torch.Tensor, ...]:
    """Zero-mean values with std 1: the running sums wander like a random walk (|sum| ~ sqrt(i))."""
    return (random_tensor((case.int_param("rows"), case.int_param("n")), case.dtype(), generator, device),)


def reference(x: torch.Tensor) -> torch.Tensor:
    """The exact prefix sum (accumulated in float64), rounded once to the float32 output."""
    return torch.cumsum(x.double(), dim=-1).float()


def min_bytes(case: Case) -> int:
    """Read the input once, write the float32 output once."""
    return case.int_param("rows") * case.int_param("n") * (case.dtype().itemsize + 4)


TASK = KernelTask(
    name="triton2triton/llm/cumsum",
    cases=[Case.make(rows=r, n=n, dtype=dtype) for r, n, dtype in CASES],
    ci_cases=[Case.make(rows=3, n=1000, dtype="float32"), Case.make(rows=2, n=2049, dtype="bfloat16"),
              Case.make(rows=4, n=257, dtype="float16")],
    make_inputs=make_inputs,
    reference=reference,
    load_candidate=candidate_function("kernel", "cumsum"),
    # The output is always float32. Float32 accumulation drifts with n whatever the order: a fully
    # sequential scan of 131072 std-1 values was measured up to 1.5e-2 off the exact sum (1536
    # rows), blocked/tree scans ~1e-3, while partial sums reach ~1e3 and pass through 0 (so rtol
    # cannot cover it). atol 5e-2 keeps a 3x margin for any float32 order up to n = 131072; 16-bit
    # accumulation or a lost/duplicated element is off by O(1) and still fails.
    tolerances={torch.float32: Tolerance(atol=5e-2, rtol=1e-5)},
    min_bytes=min_bytes,
)

if __name__ == "__main__":
    raise SystemExit(run_task(TASK))
