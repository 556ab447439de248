"""Evaluation steps of the transpose task: `python3 harness.py compile|correctness|performance`."""

import torch

from aka.harness import EXACT, Case, KernelTask, candidate_function, random_tensor, run_task

CASES = (
    (8192, 4099, "float32"),
    (4096, 12289, "float16"),
    (12345, 3001, "bfloat16"),
    (1000, 50257, "float16"),    # a (tokens, vocab) logits-shaped matrix
    (100003, 96, "float32"),     # tall and skinny
)

# A transpose copies bits: every dtype must match exactly.
TOLERANCES = {"float32": EXACT, "float16": EXACT, "bfloat16": EXACT}


def make_inputs(case: Case, generator: torch.Generator, device: torch.device) -> tuple[torch.Tensor, ...]:
    return (random_tensor((case.int_param("rows"), case.int_param("cols")), case.dtype(), generator, device),)


def reference(x: torch.Tensor) -> torch.Tensor:
    return x.transpose(0, 1).contiguous()


TASK = KernelTask(
    name="triton2triton/llm/transpose",
    cases=[Case.make(rows=r, cols=c, dtype=d) for r, c, d in CASES],
    ci_cases=[Case.make(rows=37, cols=53, dtype="float32"), Case.make(rows=9, cols=200, dtype="bfloat16"),
              Case.make(rows=70, cols=3, dtype="float16")],
    make_inputs=make_inputs,
    reference=reference,
    load_candidate=candidate_function("kernel", "transpose"),
    tolerances=TOLERANCES,
    # x read once, out written once.
    min_bytes=lambda case: 2 * case.int_param("rows") * case.int_param("cols") * case.dtype().itemsize,
    # the copy is the whole work here: torch's copies may not do it beside a kernel that copies
    # their result once more (a red team's `x.t().contiguous()`, session 51)
    forbidden_torch_ops=frozenset({"clone", "copy_", "cat", "stack"}),
)

if __name__ == "__main__":
    raise SystemExit(run_task(TASK))
