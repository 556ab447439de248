"""Evaluation steps of the MoE router top-k softmax task: `python3 harness.py compile|correctness|performance`.

As vLLM's `topk_softmax` (renormalize=False): softmax over all experts of every token's gating
logits in float32, then the k largest probabilities (descending) and their expert ids (int32).
The logits of a row are pairwise distinct (at least 1/16 apart), so the ids are unique and are
compared exactly; the weights are float32.
"""


import torch

from aka.harness import Case, KernelTask, candidate_function, run_task

# (tokens, num_experts, k, dtype): Qwen3-MoE (128, top-8), DeepSeek-V3 size (256, top-8), Mixtral
# (8, top-2), DeepSeek-V2-Lite (64, top-6) and Qwen1.5-MoE (60 experts, top-4: not a power of two).
SHAPES = (
    (16384, 128, 8, "float32"),
    (8192, 256, 8, "bfloat16"),
    (65536, 8, 2, "bfloat16"),
    (4093, 64, 6, "float32"),
    (30000, 60, 4, "bfloat16"),
)
CI_SHAPES = ((5, 8, 2, "float32"), (7, 60, 4, "bfloat16"))


def make_inputs(case: Case, generator: torch.Generator, device: torch.device) -> tuple[torch.Tensor, ...]:
    """Logits (tokens, E): every row E distinct points of the grid (j - G/2) / 16, j = 0..G-1
    (G = 512 for 16-bit rows, exact in bfloat16 for E <= 512; G = 2E for float32), drawn from a
    random window of 2E consecutive grid points (the whole grid where it is shorter), in random
    order; float32 rows also get a random offset in {-96, -64, ..., 96} (a kernel without the max
    subtraction overflows exp). Random gaps: with a whole permutation of an evenly spaced grid
    the top-k weights were the same closed-form constants in every row, and a red team's kernel
    wrote them without computing a softmax (session 51). k: a 0-dim int64 CPU tensor."""
    tokens, experts, k = case.int_param("tokens"), case.int_param("num_experts"), case.int_param("k")
    grid = 2 * experts if case.dtype() == torch.float32 else 512
    if experts > grid:
        raise ValueError(f"{experts} experts need more distinct values than {case.dtype()} holds exactly here")
    window = min(2 * experts, grid)
    start = torch.randint(0, grid - window + 1, (tokens, 1), generator=generator, device=device)
    picks = start + torch.rand((tokens, window), generator=generator, device=device).argsort(dim=1)[:, :experts]
    logits = (picks - grid // 2).to(torch.float32) / 16.0
    if case.dtype() == torch.float32:
        logits += 32.0 * torch.randint(-3, 4, (tokens, 1), generator=generator, device=device)
    return logits.to(case.dtype()).contiguous(), torch.tensor(k, dtype=torch.int64)


def reference(gating_logits: torch.Tensor, k: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Float32 softmax over the experts, then torch.topk (largest first); ids as int32."""
    probs = torch.softmax(gating_logits.float(), dim=-1)
    weights, ids = torch.topk(probs, int(k), dim=-1, largest=True, sorted=True)
    return weights, ids.to(torch.int32)


def case_of(tokens: int, num_experts: int, k: int, dtype: str) -> Case:
    return Case.make(tokens=tokens, num_experts=num_experts, k=k, dtype=dtype)


def min_bytes(case: Case) -> int:
    """Logits read once; float32 weights and int32 ids written once."""
    tokens = case.int_param("tokens")
    return tokens * case.int_param("num_experts") * case.dtype().itemsize + tokens * case.int_param("k") * 8


# Tolerances: the weights are float32 and the float32 default (1e-5/1e-5) fits: a float32 softmax
# (max subtraction, exp or exp2, one sum) differs from PyTorch's by a few float32 ulps (< 1e-6 on
# weights <= 1). The int32 ids are compared exactly (distinct logits make them unique).
TASK = KernelTask(
    name="instruction2triton/llm/moe_router_topk_softmax",
    cases=[case_of(*shape) for shape in SHAPES],
    ci_cases=[case_of(*shape) for shape in CI_SHAPES],
    make_inputs=make_inputs,
    reference=reference,
    load_candidate=candidate_function("kernel", "moe_router_topk_softmax"),
    min_bytes=min_bytes,
)

if __name__ == "__main__":
    raise SystemExit(run_task(TASK))
