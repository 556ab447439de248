"""MoE router: float32 softmax over the experts + top-k (vLLM `topk_softmax`, no renormalisation), in Triton.

Why it is fast (vs. the PyTorch reference: an upcast, a softmax, a topk and an int32 cast, each a
separate launch with its own pass over memory):
- one fused launch: every program loads BLOCK_T tokens' logits once, keeps them in registers and
  writes only the k weights and ids per token;
- the selection runs on the logits (softmax is monotone), so only the max, one exp pass for the
  denominator and k exponentials of the winners are computed; k rounds of a row max + first
  argmax + knock-out select the winners in order (k <= 16, E <= 512: a few register reductions);
- exp2 with log2(e) folded in.
"""

import torch
import triton
import triton.language as tl

# Launch knobs (an autotuner edits these lines).
BLOCK_T = 16
NUM_WARPS = 4


@triton.jit
def moe_router_topk_softmax_kernel(logits_ptr, weights_ptr, ids_ptr, tokens, num_experts,
                                   K: tl.constexpr, K_PAD: tl.constexpr, E_PAD: tl.constexpr,
                                   BLOCK_T: tl.constexpr):
    LOG2E: tl.constexpr = 1.4426950408889634
    rows = tl.program_id(0) * BLOCK_T + tl.arange(0, BLOCK_T)
    cols = tl.arange(0, E_PAD)
    row_ok = rows < tokens
    live = row_ok[:, None] & (cols[None, :] < num_experts)
    x = tl.load(logits_ptr + rows[:, None].to(tl.int64) * num_experts + cols[None, :], mask=live,
                other=0.0).to(tl.float32)
    x = tl.where(cols[None, :] < num_experts, x, float("-inf"))  # padded rows stay finite (no NaN)
    row_max = tl.max(x, axis=1)
    # Subtract the max first (exact for nearby values), then scale: no large-argument rounding.
    x = (x - row_max[:, None]) * LOG2E
    denom = tl.sum(tl.math.exp2(x), axis=1)
    slots = tl.arange(0, K_PAD)
    out_w = tl.zeros([BLOCK_T, K_PAD], dtype=tl.float32)
    out_i = tl.zeros([BLOCK_T, K_PAD], dtype=tl.int32)
    for j in tl.static_range(K):
        best = tl.max(x, axis=1)
        best_id = tl.argmax(x, axis=1)  # first index of the maximum
        out_w = tl.where(slots[None, :] == j, (tl.math.exp2(best) / denom)[:, None], out_w)
        out_i = tl.where(slots[None, :] == j, best_id[:, None].to(tl.int32), out_i)
        x = tl.where(cols[None, :] == best_id[:, None], float("-inf"), x)
    out_mask = row_ok[:, None] & (slots[None, :] < K)
    offs = rows[:, None] * K + slots[None, :]
    tl.store(weights_ptr + offs, out_w, mask=out_mask)
    tl.store(ids_ptr + offs, out_i, mask=out_mask)


def moe_router_topk_softmax(gating_logits: torch.Tensor, k: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    kk = int(k)
    tokens, experts = gating_logits.shape
    weights = torch.empty((tokens, kk), dtype=torch.float32, device=gating_logits.device)
    ids = torch.empty((tokens, kk), dtype=torch.int32, device=gating_logits.device)
    moe_router_topk_softmax_kernel[(triton.cdiv(tokens, BLOCK_T),)](
        gating_logits, weights, ids, tokens, experts, K=kk, K_PAD=triton.next_power_of_2(kk),
        E_PAD=triton.next_power_of_2(experts), BLOCK_T=BLOCK_T, num_warps=NUM_WARPS)
    return weights, ids
