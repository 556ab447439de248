"""Causal depthwise conv1d (Mamba's short convolution) in Triton, tuned: 8x larger time blocks.

Why it is faster than the starting kernel (128 time steps per program, 4 warps):
- Each program covers 1024 time steps with 8 warps (4 per thread), so the grid is 8x smaller and
  the per-program work (channel index math, 4 weight loads, bias load, scheduling) is amortised
  over 8x more output; each thread keeps several loads in flight, so the kernel runs near memory
  bandwidth instead of being latency-bound (the same change took the GELU example from 84 us to
  38 us on an H200).
- The four shifted taps are loaded by the same program, so the extra reads come from L1.
The float32 math and the single cast are unchanged.
"""

import torch
import triton
import triton.language as tl

BLOCK_L = 1024
NUM_WARPS = 8


@triton.jit
def depthwise_conv1d_kernel(x_ptr, w_ptr, b_ptr, out_ptr, channels, seqlen,
                            WIDTH: tl.constexpr, BLOCK_L: tl.constexpr):
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
    block_l = min(BLOCK_L, max(128, triton.next_power_of_2(seqlen)))
    grid = (batch * channels, triton.cdiv(seqlen, block_l))
    depthwise_conv1d_kernel[grid](x, weight, bias, out, channels, seqlen,
                                  WIDTH=weight.shape[1], BLOCK_L=block_l,
                                  num_warps=NUM_WARPS if block_l >= 1024 else 4)
    return out
