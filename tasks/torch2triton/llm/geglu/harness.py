"""Evaluation steps of the GeGLU task: `python3 harness.py compile|correctness|performance`."""

import torch
import torch.nn.functional as F

from aka.harness import Case, KernelTask, candidate_function, random_tensor, run_task

CASES = (
    (4096, 16384, "bfloat16"),   # Gemma-2B MLP width, 4k tokens
    (2048, 24576, "float16"),    # Gemma-7B MLP width
    (8191, 5461, "bfloat16"),    # odd token count and odd width
    (3000, 3001, "float32"),     # odd width in float32
    (1023, 11008, "float16"),    # Llama-2-7B MLP width, odd token count
)

# Default tolerances fit: the reference rounds gelu(gate) to x.dtype, then rounds gelu * up; a
# kernel doing the same in float32 differs only by the tanh implementation (~1e-7 relative,
# inside fp32's 1e-5); one extra 16-bit rounding flip is within fp16 1e-3/1e-3 and bf16
# 1e-2/1.6e-2.


def make_inputs(case: Case, generator: torch.Generator, device: torch.device) -> tuple[torch.Tensor, ...]:
    """The fused gate/up projection output: std 2, so gelu's negative tail and its linear part
    are both exercised."""
    shape = (case.int_param("tokens"), 2 * case.int_param("d"))
    return (random_tensor(shape, case.dtype(), generator, device, scale=2.0),)


def reference(x: torch.Tensor) -> torch.Tensor:
    """GeGLU as a model's MLP writes it, on the output of a fused gate/up projection."""
    gate, up = x.chunk(2, dim=-1)
    return F.gelu(gate, approximate="tanh") * up


TASK = KernelTask(
    name="torch2triton/llm/geglu",
    cases=[Case.make(tokens=t, d=d, dtype=dt) for t, d, dt in CASES],
    ci_cases=[Case.make(tokens=4, d=500, dtype="float32"), Case.make(tokens=3, d=769, dtype="bfloat16"),
              Case.make(tokens=2, d=1025, dtype="float16")],
    make_inputs=make_inputs,
    reference=reference,
    load_candidate=candidate_function("kernel", "geglu"),
    # x (tokens, 2d) read once, the output (tokens, d) written once.
    min_bytes=lambda case: 3 * case.int_param("tokens") * case.int_param("d") * case.dtype().itemsize,
)

if __name__ == "__main__":
    raise SystemExit(run_task(TASK))
