"""Evaluation steps of the silu_and_mul task: `python3 harness.py compile|correctness|performance`."""

import torch

from aka.harness import Case, KernelTask, candidate_function, random_tensor, run_task

# (tokens, d, dtype): Llama-3-8B (d=14336), Llama-2-7B (11008), Llama-2-13B (13824), gpt-oss (2880)
# MLP widths, and an odd d whose second half starts at an unaligned offset; odd token counts too.
CASES = (
    (4096, 14336, "bfloat16"),
    (2048, 11008, "float16"),
    (1027, 13824, "float32"),
    (8191, 2880, "bfloat16"),
    (4093, 5461, "float32"),
)


def make_inputs(case: Case, generator: torch.Generator, device: torch.device) -> tuple[torch.Tensor, ...]:
    """Gate and up projections side by side; std 2 covers both the flat and the linear part of silu."""
    shape = (case.int_param("tokens"), 2 * case.int_param("d"))
    return (random_tensor(shape, case.dtype(), generator, device, scale=2.0),)


def reference(x: torch.Tensor) -> torch.Tensor:
    """silu(gate) * up in float32, cast back once to the input dtype."""
    d = x.shape[-1] // 2
    xf = x.float()
    return (torch.nn.functional.silu(xf[:, :d]) * xf[:, d:]).to(x.dtype)


def min_bytes(case: Case) -> int:
    """Read (tokens, 2d) once, write (tokens, d) once."""
    return 3 * case.int_param("tokens") * case.int_param("d") * case.dtype().itemsize


# Default tolerances fit: the math is elementwise in float32 (no accumulation), so the only
# difference from PyTorch is a few float32 ulps in exp plus one rounding to the output dtype.
TASK = KernelTask(
    name="triton2triton/llm/silu_and_mul",
    cases=[Case.make(tokens=t, d=d, dtype=dtype) for t, d, dtype in CASES],
    ci_cases=[Case.make(tokens=2, d=1000, dtype="float32"), Case.make(tokens=5, d=257, dtype="bfloat16"),
              Case.make(tokens=4, d=129, dtype="float16")],
    make_inputs=make_inputs,
    reference=reference,
    load_candidate=candidate_function("kernel", "silu_and_mul"),
    min_bytes=min_bytes,
)

if __name__ == "__main__":
    raise SystemExit(run_task(TASK))
