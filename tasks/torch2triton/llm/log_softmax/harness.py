"""Evaluation steps of the log-softmax task: `python3 harness.py compile|correctness|performance`."""

import torch

from aka.harness import Case, KernelTask, candidate_function, random_tensor, run_task

CASES = (
    (4096, 32000, "bfloat16"),   # Llama-2 vocabulary, 4k tokens
    (1024, 128256, "float16"),   # Llama-3 vocabulary
    (2047, 50257, "bfloat16"),   # GPT-2 vocabulary, odd token count
    (8192, 4093, "float32"),     # short odd rows
    (16384, 1000, "float16"),    # classifier-sized rows
)

# Default tolerances fit: the kernel computes x - max - log(sum(exp(x - max))) in float32 like
# PyTorch; only the summation order (and the ex2/lg2-based exp/log) differ, ~1e-6 absolute on
# outputs of magnitude <= ~30, inside fp32's 1e-5 + 1e-5*|y|; 16-bit outputs are rounded once
# (fp16 1e-3/1e-3 and bf16 1e-2/1.6e-2 cover a one-ulp flip).


def make_inputs(case: Case, generator: torch.Generator, device: torch.device) -> tuple[torch.Tensor, ...]:
    """Logits with std 4 (normal, or uniform of the same spread), like a language model's."""
    shape = (case.int_param("rows"), case.int_param("cols"))
    return (random_tensor(shape, case.dtype(), generator, device, scale=4.0),)


def reference(x: torch.Tensor) -> torch.Tensor:
    """As a model's loss or sampling code writes it: upcast, log_softmax, cast back."""
    return torch.log_softmax(x.float(), dim=-1).to(x.dtype)


TASK = KernelTask(
    name="torch2triton/llm/log_softmax",
    cases=[Case.make(rows=r, cols=c, dtype=d) for r, c, d in CASES],
    ci_cases=[Case.make(rows=4, cols=1000, dtype="float32"), Case.make(rows=3, cols=1537, dtype="bfloat16"),
              Case.make(rows=2, cols=2051, dtype="float16")],
    make_inputs=make_inputs,
    reference=reference,
    load_candidate=candidate_function("kernel", "log_softmax"),
    min_bytes=lambda case: 2 * case.int_param("rows") * case.int_param("cols") * case.dtype().itemsize,
)

if __name__ == "__main__":
    raise SystemExit(run_task(TASK))
