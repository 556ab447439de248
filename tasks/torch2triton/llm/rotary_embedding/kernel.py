"""Rotary position embedding (HF Llama's rotate-half form) in Triton: a plain, correct start.

`rotary_embedding(q, cos, sin)` for q (batch, seqlen, heads, head_dim) and cos, sin
(seqlen, head_dim) returns, like `(q * cos) + (rotate_half(q) * sin)` with
rotate_half(x) = cat(-x[..., half:], x[..., :half]):
    out[..., :half] = r(x1 * c1) + r(-x2 * s1)      (x1 = q[..., :half], x2 = q[..., half:],
    out[..., half:] = r(x2 * c2) + r(x1 * s2)       c1 = cos[:, :half], c2 = cos[:, half:], ...)
where r() rounds to q's dtype and the sums are rounded to q's dtype, as PyTorch's
elementwise ops do.

One program handles BLOCK_H heads of one token (batch, position).
"""

import torch
import triton
import triton.language as tl

BLOCK_H = 1
NUM_WARPS = 4


@triton.jit
def rotary_kernel(q_ptr, cos_ptr, sin_ptr, out_ptr, seqlen, n_heads, HALF: tl.constexpr,
                  BLOCK_HALF: tl.constexpr, BLOCK_H: tl.constexpr):
    token = tl.program_id(0)  # batch * seqlen + position
    pos = token % seqlen
    heads = tl.program_id(1) * BLOCK_H + tl.arange(0, BLOCK_H)
    cols = tl.arange(0, BLOCK_HALF)
    col_mask = cols < HALF
    mask = (heads < n_heads)[:, None] & col_mask[None, :]
    offsets = token.to(tl.int64) * n_heads * (2 * HALF) + heads[:, None] * (2 * HALF) + cols[None, :]
    x1 = tl.load(q_ptr + offsets, mask=mask, other=0.0).to(tl.float32)
    x2 = tl.load(q_ptr + offsets + HALF, mask=mask, other=0.0).to(tl.float32)
    trig = pos * (2 * HALF) + cols
    c1 = tl.load(cos_ptr + trig, mask=col_mask, other=0.0).to(tl.float32)[None, :]
    c2 = tl.load(cos_ptr + trig + HALF, mask=col_mask, other=0.0).to(tl.float32)[None, :]
    s1 = tl.load(sin_ptr + trig, mask=col_mask, other=0.0).to(tl.float32)[None, :]
    s2 = tl.load(sin_ptr + trig + HALF, mask=col_mask, other=0.0).to(tl.float32)[None, :]
    dtype = out_ptr.dtype.element_ty
    # Round each product to q's dtype before the sum, exactly as the PyTorch ops do.
    out1 = (x1 * c1).to(dtype).to(tl.float32) - (x2 * s1).to(dtype).to(tl.float32)
    out2 = (x2 * c2).to(dtype).to(tl.float32) + (x1 * s2).to(dtype).to(tl.float32)
    tl.store(out_ptr + offsets, out1.to(dtype), mask=mask)
    tl.store(out_ptr + offsets + HALF, out2.to(dtype), mask=mask)


def rotary_embedding(q: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    q, cos, sin = q.contiguous(), cos.contiguous(), sin.contiguous()
    batch, seqlen, n_heads, head_dim = q.shape
    out = torch.empty_like(q)
    half = head_dim // 2
    grid = (batch * seqlen, triton.cdiv(n_heads, BLOCK_H))
    rotary_kernel[grid](q, cos, sin, out, seqlen, n_heads, HALF=half, BLOCK_HALF=triton.next_power_of_2(half),
                        BLOCK_H=BLOCK_H, num_warps=NUM_WARPS)
    return out
