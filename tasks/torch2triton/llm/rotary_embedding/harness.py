"""Evaluation steps of the rotary-embedding task: `python3 harness.py compile|correctness|performance`."""

import torch

from aka.harness import Case, KernelTask, candidate_function, random_tensor, run_task

ROPE_THETA = 10000.0
CASES = (
    (4, 4096, 32, 128, "bfloat16"),  # Llama-2-7B queries, 4 x 4k tokens
    (1, 8192, 32, 128, "float16"),   # Llama-3-8B queries, one 8k sequence
    (3, 2047, 40, 128, "bfloat16"),  # Llama-2-13B, odd sequence length
    (4, 3000, 16, 64, "float32"),    # head_dim 64 (GPT-NeoX / Pythia style), float32
    (8, 1023, 32, 96, "float16"),    # head_dim 96 (Phi-3-mini): half a head is not a power of two
)

# Default tolerances fit: the contract fixes the reference's roundings (each product rounded to
# q's dtype, then the sum), which a kernel reproduces exactly in 16-bit; in float32 an FMA
# contraction differs by ~1 ulp of |q| <= ~6, far inside 1e-5.


def make_inputs(case: Case, generator: torch.Generator, device: torch.device) -> tuple[torch.Tensor, ...]:
    """q normal (std 1) or uniform; cos/sin built as HF Llama builds them, for positions starting
    at a seeded offset (a prefix already in the KV cache)."""
    batch, seqlen, heads, head_dim = (case.int_param(k) for k in ("batch", "seqlen", "heads", "head_dim"))
    dtype = case.dtype()
    q = random_tensor((batch, seqlen, heads, head_dim), dtype, generator, device)
    offset = torch.randint(0, 4096, (1,), generator=generator, device=device).to(torch.float32)
    inv_freq = 1.0 / (ROPE_THETA ** (torch.arange(0, head_dim, 2, device=device, dtype=torch.float32) / head_dim))
    positions = offset + torch.arange(seqlen, device=device, dtype=torch.float32)
    freqs = torch.outer(positions, inv_freq)
    emb = torch.cat((freqs, freqs), dim=-1)
    return q, emb.cos().to(dtype), emb.sin().to(dtype)


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    """Rotates half the hidden dims of the input (HF transformers' Llama)."""
    x1 = x[..., : x.shape[-1] // 2]
    x2 = x[..., x.shape[-1] // 2 :]
    return torch.cat((-x2, x1), dim=-1)


def reference(q: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """apply_rotary_pos_emb for q laid out (batch, seqlen, heads, head_dim)."""
    cos = cos.unsqueeze(1)  # (seqlen, 1, head_dim): broadcast over batch and heads
    sin = sin.unsqueeze(1)
    return (q * cos) + (rotate_half(q) * sin)


def _elements(case: Case) -> int:
    return case.int_param("batch") * case.int_param("seqlen") * case.int_param("heads") * case.int_param("head_dim")


TASK = KernelTask(
    name="torch2triton/llm/rotary_embedding",
    cases=[Case.make(batch=b, seqlen=s, heads=h, head_dim=d, dtype=dt) for b, s, h, d, dt in CASES],
    ci_cases=[Case.make(batch=1, seqlen=5, heads=3, head_dim=64, dtype="float32"),
              Case.make(batch=2, seqlen=3, heads=2, head_dim=128, dtype="bfloat16"),
              Case.make(batch=1, seqlen=7, heads=4, head_dim=96, dtype="float16")],
    make_inputs=make_inputs,
    reference=reference,
    load_candidate=candidate_function("kernel", "rotary_embedding"),
    # q read once, the output written once (cos/sin are small and ignored).
    min_bytes=lambda case: 2 * _elements(case) * case.dtype().itemsize,
)

if __name__ == "__main__":
    raise SystemExit(run_task(TASK))
