"""Embedding lookup out[i] = weight[ids[i]] in Triton, tuned: wide 2-D tiles, one shot per program.

Why it is faster than the starting kernel (one program per token, 128-element loop steps):
- Each program copies a [BLOCK_T rows x BLOCK_H columns] tile (~16 KB) with no loop, so every
  thread has several independent 16-byte loads in flight instead of one 2-4 byte load per loop
  step; the copy becomes bandwidth-bound instead of latency-bound.
- The ids of the tile's rows are loaded once as a vector, and the program count drops by
  BLOCK_T (and the per-program overhead with it).
The values are copied without casts, so the output is bit-identical to the baseline's.
"""

import torch
import triton
import triton.language as tl

TILE_BYTES = 16384
NUM_WARPS = 8


@triton.jit
def embedding_gather_kernel(ids_ptr, weight_ptr, out_ptr, n_tokens, hidden, stride_w, stride_o,
                            BLOCK_T: tl.constexpr, BLOCK_H: tl.constexpr):
    tokens = tl.program_id(axis=0) * BLOCK_T + tl.arange(0, BLOCK_T)
    cols = tl.program_id(axis=1) * BLOCK_H + tl.arange(0, BLOCK_H)
    token_mask = tokens < n_tokens
    rows = tl.load(ids_ptr + tokens, mask=token_mask, other=0)
    mask = token_mask[:, None] & (cols[None, :] < hidden)
    values = tl.load(weight_ptr + rows[:, None] * stride_w + cols[None, :], mask=mask)
    tl.store(out_ptr + tokens[:, None].to(tl.int64) * stride_o + cols[None, :], values, mask=mask)


def embedding_gather(ids: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    ids, weight = ids.contiguous(), weight.contiguous()
    n_tokens = ids.shape[0]
    hidden = weight.shape[1]
    out = torch.empty((n_tokens, hidden), dtype=weight.dtype, device=weight.device)
    tile_elems = TILE_BYTES // weight.element_size()
    block_h = min(triton.next_power_of_2(hidden), tile_elems // 2)
    block_t = max(1, min(16, tile_elems // block_h))
    grid = (triton.cdiv(n_tokens, block_t), triton.cdiv(hidden, block_h))
    embedding_gather_kernel[grid](ids, weight, out, n_tokens, hidden, weight.stride(0), out.stride(0),
                                  BLOCK_T=block_t, BLOCK_H=block_h, num_warps=NUM_WARPS)
    return out
