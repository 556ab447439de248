"""2-D transpose out = x.T (contiguous) in Triton: the starting point to optimise.

`transpose(x)` takes a contiguous (R, C) tensor of float32, float16 or bfloat16 and returns a new
contiguous (C, R) tensor with out[c, r] = x[r, c], bit for bit.
"""

import torch
import triton
import triton.language as tl

BLOCK_SIZE = 128
NUM_WARPS = 4


@triton.jit
def transpose_kernel(x_ptr, out_ptr, R, C, stride_xr, stride_or, BLOCK_SIZE: tl.constexpr):
    # One program per (row, chunk of BLOCK_SIZE columns): it reads a contiguous piece of row r and
    # writes it down column r of the output.
    r = tl.program_id(axis=0)
    cols = tl.program_id(axis=1) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = cols < C
    values = tl.load(x_ptr + r.to(tl.int64) * stride_xr + cols, mask=mask)
    tl.store(out_ptr + cols.to(tl.int64) * stride_or + r, values, mask=mask)


def transpose(x: torch.Tensor) -> torch.Tensor:
    x = x.contiguous()
    R, C = x.shape
    out = torch.empty((C, R), dtype=x.dtype, device=x.device)
    grid = (R, triton.cdiv(C, BLOCK_SIZE))
    transpose_kernel[grid](x, out, R, C, x.stride(0), out.stride(0), BLOCK_SIZE=BLOCK_SIZE, num_warps=NUM_WARPS)
    return out
