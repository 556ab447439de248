"""Rotary position embedding (GPT-NeoX "rotate half" style) in Triton: the starting point to optimise.

`rotary_embedding(positions, q, k, cos_cache, sin_cache)` returns new tensors (q_out, k_out):
for every token t and head h, with x = q[t, h] (or k[t, h]), half = head_dim // 2,
c = cos_cache[positions[t]] and s = sin_cache[positions[t]] (each of length half):
    out[:half] = x[:half] * c - x[half:] * s
    out[half:] = x[half:] * c + x[:half] * s
computed in float32 and cast back to the dtype of q/k. The inputs are not modified.
"""

import torch
import triton
import triton.language as tl

BLOCK_H = 1      # heads per program
NUM_WARPS = 4


@triton.jit
def rotary_embedding_kernel(x_ptr, out_ptr, pos_ptr, cos_ptr, sin_ptr, num_heads, half,
                            stride_xt, stride_xh, stride_ot, stride_oh, stride_cos,
                            BLOCK_H: tl.constexpr, BLOCK_HALF: tl.constexpr):
    # One token and BLOCK_H heads per program.
    token = tl.program_id(axis=0)
    heads = tl.program_id(axis=1) * BLOCK_H + tl.arange(0, BLOCK_H)
    dims = tl.arange(0, BLOCK_HALF)
    pos = tl.load(pos_ptr + token)
    c = tl.load(cos_ptr + pos * stride_cos + dims, mask=dims < half, other=0.0)
    s = tl.load(sin_ptr + pos * stride_cos + dims, mask=dims < half, other=0.0)
    mask = (heads[:, None] < num_heads) & (dims[None, :] < half)
    x_row = x_ptr + token * stride_xt + heads[:, None] * stride_xh + dims[None, :]
    x1 = tl.load(x_row, mask=mask, other=0.0).to(tl.float32)
    x2 = tl.load(x_row + half, mask=mask, other=0.0).to(tl.float32)
    o1 = x1 * c[None, :] - x2 * s[None, :]
    o2 = x2 * c[None, :] + x1 * s[None, :]
    o_row = out_ptr + token * stride_ot + heads[:, None] * stride_oh + dims[None, :]
    tl.store(o_row, o1.to(out_ptr.dtype.element_ty), mask=mask)
    tl.store(o_row + half, o2.to(out_ptr.dtype.element_ty), mask=mask)


def _apply(x: torch.Tensor, out: torch.Tensor, positions: torch.Tensor,
           cos_cache: torch.Tensor, sin_cache: torch.Tensor) -> None:
    tokens, num_heads, head_dim = x.shape
    half = head_dim // 2
    grid = (tokens, triton.cdiv(num_heads, BLOCK_H))
    rotary_embedding_kernel[grid](x, out, positions, cos_cache, sin_cache, num_heads, half,
                                  x.stride(0), x.stride(1), out.stride(0), out.stride(1), cos_cache.stride(0),
                                  BLOCK_H=BLOCK_H, BLOCK_HALF=triton.next_power_of_2(half), num_warps=NUM_WARPS)


def rotary_embedding(positions: torch.Tensor, q: torch.Tensor, k: torch.Tensor,
                     cos_cache: torch.Tensor, sin_cache: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    positions, q, k = positions.contiguous(), q.contiguous(), k.contiguous()
    cos_cache, sin_cache = cos_cache.contiguous(), sin_cache.contiguous()
    q_out = torch.empty_like(q)
    k_out = torch.empty_like(k)
    _apply(q, q_out, positions, cos_cache, sin_cache)   # one launch for q ...
    _apply(k, k_out, positions, cos_cache, sin_cache)   # ... and another for k
    return q_out, k_out
