"""Causal depthwise conv1d (Mamba's short convolution, no activation) in Triton: the starting point
to optimise.

`depthwise_conv1d(x, weight, bias)` takes x (batch, channels, seqlen), weight (channels, width) and
bias (channels,), contiguous and of one dtype (float32, float16 or bfloat16), and returns a new
(batch, channels, seqlen) tensor of that dtype with

    out[b, c, t] = bias[c] + sum_{k < width} weight[c, k] * x[b, c, t - (width - 1) + k]

where x at negative times is zero (left padding only: causal). The sum runs in float32 and is
cast once.
"""

import torch
import triton
import triton.language as tl

BLOCK_L = 128
NUM_WARPS = 4


@triton.jit
def depthwise_conv1d_kernel(x_ptr, w_ptr, b_ptr, out_ptr, channels, seqlen,
                            WIDTH: tl.constexpr, BLOCK_L: tl.constexpr):
    # One program per (batch * channel row, chunk of BLOCK_L time steps).
    row = tl.program_id(axis=0)
    c = row % channels
    t = tl.program_id(axis=1) * BLOCK_L + tl.arange(0, BLOCK_L)
    x_row = x_ptr + row.to(tl.int64) * seqlen
    acc = tl.zeros((BLOCK_L,), dtype=tl.float32) + tl.load(b_ptr + c).to(tl.float32)
    for k in tl.static_range(WIDTH):
        w = tl.load(w_ptr + c * WIDTH + k).to(tl.float32)
        src = t - (WIDTH - 1) + k
        xv = tl.load(x_row + src, mask=(src >= 0) & (src < seqlen), other=0.0).to(tl.float32)
        acc += w * xv
    tl.store(out_ptr + row.to(tl.int64) * seqlen + t, acc.to(out_ptr.dtype.element_ty), mask=t < seqlen)


def depthwise_conv1d(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    x, weight, bias = x.contiguous(), weight.contiguous(), bias.contiguous()
    batch, channels, seqlen = x.shape
    out = torch.empty_like(x)
    grid = (batch * channels, triton.cdiv(seqlen, BLOCK_L))
    depthwise_conv1d_kernel[grid](x, weight, bias, out, channels, seqlen,
                                  WIDTH=weight.shape[1], BLOCK_L=BLOCK_L, num_warps=NUM_WARPS)
    return out
