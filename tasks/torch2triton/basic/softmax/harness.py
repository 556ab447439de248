"""Evaluation steps of the softmax task: `python3 harness.py compile|correctness|performance`."""

import torch

from aka.harness import Case, KernelTask, candidate_function, random_tensor, run_task

SHAPES = ((8192, 1000), (8192, 4093), (2048, 12289))
DTYPES = ("float32", "float16")


def make_inputs(case: Case, generator: torch.Generator, device: torch.device) -> tuple[torch.Tensor, ...]:
    """Normal logits with std 4: large enough that a missing max subtraction overflows in fp16."""
    shape = (case.int_param("rows"), case.int_param("cols"))
    return (random_tensor(shape, case.dtype(), generator, device, scale=4.0),)


def reference(x: torch.Tensor) -> torch.Tensor:
    """PyTorch's own softmax: also the baseline that candidates are timed against."""
    return torch.softmax(x, dim=-1)


TASK = KernelTask(
    name="torch2triton/basic/softmax",
    cases=[Case.make(rows=rows, cols=cols, dtype=dtype) for rows, cols in SHAPES for dtype in DTYPES],
    ci_cases=[Case.make(rows=4, cols=1000, dtype="float32"), Case.make(rows=3, cols=4093, dtype="float16")],
    make_inputs=make_inputs,
    reference=reference,
    load_candidate=candidate_function("kernel", "softmax"),
    min_bytes=lambda case: 2 * case.int_param("rows") * case.int_param("cols") * case.dtype().itemsize,
)

if __name__ == "__main__":
    raise SystemExit(run_task(TASK))
