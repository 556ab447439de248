"""Evaluation steps of the long-row softmax task: `python3 harness.py compile|correctness|performance`."""

import torch

from aka.harness import Case, KernelTask, candidate_function, random_tensor, run_task

# (rows, cols, dtype): short rows that fit in registers, attention/vocab-like long rows, all widths odd.
CASES = (
    (16384, 1000, "bfloat16"),
    (8192, 4097, "float32"),
    (4096, 12289, "bfloat16"),
    (2048, 32771, "float16"),
    (1024, 65537, "float32"),
)


def make_inputs(case: Case, generator: torch.Generator, device: torch.device) -> tuple[torch.Tensor, ...]:
    """Normal logits with std 4: without the max subtraction exp overflows (float16 even sooner)."""
    shape = (case.int_param("rows"), case.int_param("cols"))
    return (random_tensor(shape, case.dtype(), generator, device, scale=4.0),)


def reference(x: torch.Tensor) -> torch.Tensor:
    """Softmax over the last dimension in float32, cast back once to the input dtype."""
    return torch.softmax(x.float(), dim=-1).to(x.dtype)


def min_bytes(case: Case) -> int:
    """Read the input once and write the output once."""
    return 2 * case.int_param("rows") * case.int_param("cols") * case.dtype().itemsize


# Default tolerances fit: float32 math with one rounding to the output dtype; the only float32
# differences are exp's few ulps (|x - max| < ~40 here: < 4e-6 relative) and the order of the
# row sum (relative error ~1e-7 * sqrt(cols)), both well inside 1e-5 relative.
TASK = KernelTask(
    name="triton2triton/llm/softmax",
    cases=[Case.make(rows=r, cols=c, dtype=dtype) for r, c, dtype in CASES],
    ci_cases=[Case.make(rows=3, cols=1000, dtype="float32"), Case.make(rows=2, cols=2049, dtype="float16"),
              Case.make(rows=4, cols=257, dtype="bfloat16")],
    make_inputs=make_inputs,
    reference=reference,
    load_candidate=candidate_function("kernel", "softmax"),
    min_bytes=min_bytes,
)

if __name__ == "__main__":
    raise SystemExit(run_task(TASK))
