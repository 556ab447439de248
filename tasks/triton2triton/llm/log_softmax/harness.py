"""Evaluation steps of the log-softmax task: `python3 harness.py compile|correctness|performance`."""

import torch

from aka.harness import Case, KernelTask, candidate_function, random_tensor, run_task

# (rows, cols, dtype): LM-head vocabularies (Llama-2 32000, GPT-2 50257, Llama-3 128256) and a
# shorter odd width; every width is off a power of two.
CASES = (
    (8192, 4097, "float16"),
    (4096, 32000, "bfloat16"),
    (2048, 50257, "float32"),
    (1024, 128256, "bfloat16"),
)


def make_inputs(case: Case, generator: torch.Generator, device: torch.device) -> tuple[torch.Tensor, ...]:
    """Normal logits with std 4: without the max subtraction exp overflows."""
    shape = (case.int_param("rows"), case.int_param("cols"))
    return (random_tensor(shape, case.dtype(), generator, device, scale=4.0),)


def reference(x: torch.Tensor) -> torch.Tensor:
    """Log-softmax over the last dimension in float32, cast back once to the input dtype."""
    return torch.log_softmax(x.float(), dim=-1).to(x.dtype)


def min_bytes(case: Case) -> int:
    """Read the input once and write the output once."""
    return 2 * case.int_param("rows") * case.int_param("cols") * case.dtype().itemsize


# Default tolerances fit: the float32 error of x - max - log(sum exp) is a few 1e-6 absolute at
# these widths (under atol 1e-5 even for outputs near 0); 16-bit outputs differ by one rounding.
TASK = KernelTask(
    name="triton2triton/llm/log_softmax",
    cases=[Case.make(rows=r, cols=c, dtype=dtype) for r, c, dtype in CASES],
    ci_cases=[Case.make(rows=3, cols=1000, dtype="float32"), Case.make(rows=2, cols=2049, dtype="bfloat16"),
              Case.make(rows=4, cols=257, dtype="float16")],
    make_inputs=make_inputs,
    reference=reference,
    load_candidate=candidate_function("kernel", "log_softmax"),
    min_bytes=min_bytes,
)

if __name__ == "__main__":
    raise SystemExit(run_task(TASK))
