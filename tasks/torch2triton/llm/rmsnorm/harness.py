"""Evaluation steps of the RMSNorm task: `python3 harness.py compile|correctness|performance`."""

import torch

from aka.harness import Case, KernelTask, Tolerance, candidate_function, random_tensor, run_task

EPS = 1e-6  # Llama's rms_norm_eps; fixed by the contract, not an input
CASES = (
    (4096, 4096, "bfloat16"),   # Llama-2-7B / Llama-3-8B hidden size, 4k tokens
    (2048, 8192, "float16"),    # Llama-2/3-70B hidden size
    (8193, 5120, "bfloat16"),   # Llama-2-13B hidden size, odd token count
    (3000, 3001, "float32"),    # odd hidden size (not a multiple of 8 or of a power of two)
    (16384, 2048, "float16"),   # small hidden size, many rows (1B-class models)
)

# fp32 and bf16 use the defaults: the math is float32 like the reference; the only difference is
# the summation order of 2k-8k squares (relative error ~1e-7). fp16 gets 2e-3/2e-3: the reference
# rounds twice (the normalized x to fp16, then x * weight), so a kernel that rounds once is off by
# up to two fp16 ulps (seen on the H200: 2.6855 vs 2.6816, 1 value in 33M, over 1e-3/1e-3).
TOLERANCES = {"float16": Tolerance(atol=2e-3, rtol=2e-3)}


def make_inputs(case: Case, generator: torch.Generator, device: torch.device) -> tuple[torch.Tensor, ...]:
    """Activations with std 2 and weights around 1 (as trained RMSNorm weights are)."""
    rows, hidden, dtype = case.int_param("rows"), case.int_param("hidden"), case.dtype()
    x = random_tensor((rows, hidden), dtype, generator, device, scale=2.0)
    weight = (1.0 + random_tensor((hidden,), torch.float32, generator, device, scale=0.25)).to(dtype)
    return x, weight


def reference(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """LlamaRMSNorm.forward, verbatim in spirit: float32 statistics, cast back, then the weight."""
    input_dtype = x.dtype
    hidden_states = x.to(torch.float32)
    variance = hidden_states.pow(2).mean(-1, keepdim=True)
    hidden_states = hidden_states * torch.rsqrt(variance + EPS)
    return weight * hidden_states.to(input_dtype)


TASK = KernelTask(
    name="torch2triton/llm/rmsnorm",
    cases=[Case.make(rows=r, hidden=h, dtype=d) for r, h, d in CASES],
    ci_cases=[Case.make(rows=4, hidden=1000, dtype="float32"), Case.make(rows=3, hidden=1537, dtype="bfloat16"),
              Case.make(rows=2, hidden=2051, dtype="float16")],
    make_inputs=make_inputs,
    reference=reference,
    load_candidate=candidate_function("kernel", "rmsnorm"),
    tolerances=TOLERANCES,
    # x read once, weight read once, output written once.
    min_bytes=lambda case: (2 * case.int_param("rows") + 1) * case.int_param("hidden") * case.dtype().itemsize,
)

if __name__ == "__main__":
    raise SystemExit(run_task(TASK))
