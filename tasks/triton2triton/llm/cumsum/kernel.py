"""Inclusive prefix sum along the last dimension in Triton: a plain, correct starting point.

`cumsum(x)` takes a 2-D tensor (rows, n) of float32, float16 or bfloat16 and returns a new float32
tensor of the same shape: out[r, i] = x[r, 0] + ... + x[r, i], accumulated in float32
(torch.cumsum(x, dim=-1, dtype=torch.float32)). One program per row scans the row in small
blocks, carrying the running total from block to block.
"""

import torch
import triton
import triton.language as tl

BLOCK_SIZE = 128
NUM_WARPS = 4


@triton.jit
def cumsum_kernel(x_ptr, out_ptr, x_row_stride, out_row_stride, n_cols, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    x_row = x_ptr + row * x_row_stride
    out_row = out_ptr + row * out_row_stride
    offsets = tl.arange(0, BLOCK_SIZE)
    carry = 0.0
    for start in range(0, n_cols, BLOCK_SIZE):
        cols = start + offsets
        mask = cols < n_cols
        x = tl.load(x_row + cols, mask=mask, other=0.0).to(tl.float32)
        tl.store(out_row + cols, tl.cumsum(x, axis=0) + carry, mask=mask)
        carry += tl.sum(x, axis=0)


def cumsum(x: torch.Tensor) -> torch.Tensor:
    x = x.contiguous()
    n_rows, n_cols = x.shape
    out = torch.empty((n_rows, n_cols), dtype=torch.float32, device=x.device)
    cumsum_kernel[(n_rows,)](x, out, x.stride(0), out.stride(0), n_cols, BLOCK_SIZE=BLOCK_SIZE, num_warps=NUM_WARPS)
    return out
