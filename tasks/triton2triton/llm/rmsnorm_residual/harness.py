"""Evaluation steps of the fused residual-add + RMSNorm task: `python3 harness.py compile|correctness|performance`."""

import torch

from aka.harness import Case, KernelTask, candidate_function, random_tensor, run_task

EPS = 1e-6
# (tokens, hidden, dtype): Llama-2/3 (4096), Llama-13B (5120), Llama-70B (8192), gpt-oss (2880) and
# DeepSeek-V3 (7168) hidden sizes, with odd token counts.
CASES = (
    (8192, 4096, "bfloat16"),
    (4096, 5120, "float16"),
    (2053, 8192, "float32"),
    (16383, 2880, "bfloat16"),
    (3001, 7168, "bfloat16"),
)


def make_inputs(case: Case, generator: torch.Generator, device: torch.device) -> tuple[torch.Tensor, ...]:
    """x (a layer's output, std 1), the residual stream (std 4) and a weight around 1 (std 0.25)."""
    tokens, hidden, dtype = case.int_param("tokens"), case.int_param("hidden"), case.dtype()
    x = random_tensor((tokens, hidden), dtype, generator, device)
    residual = random_tensor((tokens, hidden), dtype, generator, device, scale=4.0)
    weight = random_tensor((hidden,), torch.float32, generator, device, scale=0.25) + 1.0
    return x, residual, weight.to(dtype)


def reference(x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """new_residual = x + residual in the input dtype; normed = RMSNorm(new_residual) * weight in
    float32, cast back once."""
    new_residual = x + residual
    h = new_residual.float()
    normed = h * torch.rsqrt(h.pow(2).mean(dim=-1, keepdim=True) + EPS) * weight.float()
    return normed.to(x.dtype), new_residual


def min_bytes(case: Case) -> int:
    """Read x and residual once, write normed and new_residual once (the weight stays in L2)."""
    return 4 * case.int_param("tokens") * case.int_param("hidden") * case.dtype().itemsize


# Default tolerances fit: new_residual is one rounding of an exact float32 sum (bit-identical to
# PyTorch's add); normed is a product with a float32 rsqrt of a mean of <= 16k squares (relative
# error a few 1e-7, no cancellation), so one rounding to the output dtype is all that differs.
TASK = KernelTask(
    name="triton2triton/llm/rmsnorm_residual",
    cases=[Case.make(tokens=t, hidden=h, dtype=dtype) for t, h, dtype in CASES],
    ci_cases=[Case.make(tokens=3, hidden=1000, dtype="float32"), Case.make(tokens=4, hidden=257, dtype="bfloat16"),
              Case.make(tokens=2, hidden=1025, dtype="float16")],
    make_inputs=make_inputs,
    reference=reference,
    load_candidate=candidate_function("kernel", "fused_add_rms_norm"),
    min_bytes=min_bytes,
)

if __name__ == "__main__":
    raise SystemExit(run_task(TASK))
