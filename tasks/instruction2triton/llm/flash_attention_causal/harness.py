"""Evaluation steps of the causal flash-attention task: `python3 harness.py compile|correctness|performance`.

The reference (and the timed baseline) is PyTorch's fused `scaled_dot_product_attention` with
`is_causal=True` on the inputs' own dtype: on an H200 that is the FlashAttention-2 backend, the
production path a Triton kernel has to beat.
"""


import torch

from aka.harness import Case, KernelTask, candidate_function, random_tensor, run_task

# (batch, heads, seqlen, head_dim, dtype): odd and non-power-of-two sequence lengths, both head dims.
SHAPES = (
    (4, 16, 2048, 128, "float16"),
    (8, 16, 1000, 128, "bfloat16"),
    (2, 16, 4097, 64, "bfloat16"),
    (16, 16, 511, 64, "float16"),
)
CI_SHAPES = ((1, 2, 17, 16, "float16"), (2, 1, 32, 16, "bfloat16"))


def make_inputs(case: Case, generator: torch.Generator, device: torch.device) -> tuple[torch.Tensor, ...]:
    """q, k, v: contiguous (batch, heads, seqlen, head_dim), std 1, so the scores q.k/sqrt(d) have std 1."""
    shape = tuple(case.int_param(key) for key in ("batch", "heads", "seqlen", "head_dim"))
    return tuple(random_tensor(shape, case.dtype(), generator, device) for _ in range(3))


def reference(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """PyTorch's fused causal attention, scale 1/sqrt(head_dim), fp32 accumulation inside."""
    return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)


def case_of(batch: int, heads: int, seqlen: int, head_dim: int, dtype: str) -> Case:
    return Case.make(batch=batch, heads=heads, seqlen=seqlen, head_dim=head_dim, dtype=dtype)


def min_bytes(case: Case) -> int:
    """q, k, v read once and the output written once."""
    elements = case.int_param("batch") * case.int_param("heads") * case.int_param("seqlen") * case.int_param("head_dim")
    return 4 * elements * case.dtype().itemsize


def min_flops(case: Case) -> int:
    """QK^T and PV over the causal triangle only (query i sees keys 0..i): 2 x 2 x s(s+1)/2 x d
    per (batch, head)."""
    seqlen = case.int_param("seqlen")
    return 2 * case.int_param("batch") * case.int_param("heads") * seqlen * (seqlen + 1) * case.int_param("head_dim")


# Tolerances: the per-dtype defaults fit (fp16 1e-3/1e-3, bf16 1e-2/1.6e-2). Kernel and reference
# both accumulate in fp32 and round P to the input dtype before the P.V product, so they differ by
# the output's final rounding (at most 1 ulp: 2^-10 |o| in fp16, 2^-7 |o| in bf16, inside atol +
# rtol*|o|) plus P-rounding noise that averages out over the keys (~1e-4 in fp16).
TASK = KernelTask(
    name="instruction2triton/llm/flash_attention_causal",
    cases=[case_of(*shape) for shape in SHAPES],
    ci_cases=[case_of(*shape) for shape in CI_SHAPES],
    make_inputs=make_inputs,
    reference=reference,
    load_candidate=candidate_function("kernel", "flash_attention_causal"),
    min_bytes=min_bytes,
    min_flops=min_flops,
)

if __name__ == "__main__":
    raise SystemExit(run_task(TASK))
