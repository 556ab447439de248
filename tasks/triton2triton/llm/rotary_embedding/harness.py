"""Evaluation steps of the rotary-embedding task: `python3 harness.py compile|correctness|performance`."""

import torch

from aka.harness import Case, KernelTask, candidate_function, random_tensor, run_task

MAX_POS = 8192  # rows of the cos/sin cache; positions are drawn from [0, MAX_POS)
CASES = (
    # (tokens, q heads, kv heads, head_dim, dtype)
    (4096, 32, 8, 128, "bfloat16"),    # Llama-3-8B (GQA)
    (8192, 32, 32, 128, "float16"),    # Llama-2-7B (MHA)
    (3001, 40, 40, 128, "float32"),    # Llama-2-13B, odd token count
    (5000, 32, 32, 96, "bfloat16"),    # Phi-3-mini: head_dim 96, half = 48 (not a power of two)
    (2047, 28, 4, 128, "float16"),     # Qwen2-7B: 28 q heads, 4 kv heads
)

# Default tolerances fit: the math is float32 like the reference (two products and a sum per
# output, ~1e-7 relative, far below fp32's 1e-5); 16-bit outputs differ by at most one rounding
# step, which fp16 1e-3/1e-3 and bf16 1e-2/1.6e-2 cover.


def make_inputs(case: Case, generator: torch.Generator, device: torch.device) -> tuple[torch.Tensor, ...]:
    """Random positions, q/k of std 1, and a cache of cos/sin of random angles (true rotations whose
    angles cannot be recomputed from the position: the kernel must read the cache)."""
    tokens, hq, hkv, head_dim = (case.int_param("tokens"), case.int_param("q_heads"),
                                 case.int_param("kv_heads"), case.int_param("head_dim"))
    dtype = case.dtype()
    positions = torch.randint(0, MAX_POS, (tokens,), generator=generator, device=device, dtype=torch.int64)
    q = random_tensor((tokens, hq, head_dim), dtype, generator, device)
    k = random_tensor((tokens, hkv, head_dim), dtype, generator, device)
    angles = random_tensor((MAX_POS, head_dim // 2), torch.float32, generator, device, scale=3.0)
    return positions, q, k, torch.cos(angles), torch.sin(angles)


def reference(positions: torch.Tensor, q: torch.Tensor, k: torch.Tensor,
              cos_cache: torch.Tensor, sin_cache: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """vLLM's forward_native for is_neox_style=True, in float32."""
    cos = cos_cache[positions].unsqueeze(1)   # (tokens, 1, half)
    sin = sin_cache[positions].unsqueeze(1)

    def rotate(x: torch.Tensor) -> torch.Tensor:
        x1, x2 = x.float().chunk(2, dim=-1)
        return torch.cat((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=-1).to(x.dtype)

    return rotate(q), rotate(k)


def min_bytes(case: Case) -> int:
    """q and k read once and written once, positions read once (cache rows not counted)."""
    tokens = case.int_param("tokens")
    heads = case.int_param("q_heads") + case.int_param("kv_heads")
    return 2 * tokens * heads * case.int_param("head_dim") * case.dtype().itemsize + 8 * tokens


TASK = KernelTask(
    name="triton2triton/llm/rotary_embedding",
    cases=[Case.make(tokens=t, q_heads=hq, kv_heads=hkv, head_dim=d, dtype=dt) for t, hq, hkv, d, dt in CASES],
    ci_cases=[Case.make(tokens=5, q_heads=4, kv_heads=2, head_dim=32, dtype="float32"),
              Case.make(tokens=3, q_heads=6, kv_heads=2, head_dim=96, dtype="bfloat16")],
    make_inputs=make_inputs,
    reference=reference,
    load_candidate=candidate_function("kernel", "rotary_embedding"),
    min_bytes=min_bytes,
)

if __name__ == "__main__":
    raise SystemExit(run_task(TASK))
