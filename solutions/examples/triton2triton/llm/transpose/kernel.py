"""2-D transpose out = x.T (contiguous) in Triton, tuned: square tiles, coalesced loads AND stores.

Why it is faster than the starting kernel (one row piece per program, stored down a column):
- The starting kernel's stores hit addresses R elements apart, so each 2-4 byte store is its own
  32-byte memory transaction (8-16x the traffic through L2 of a coalesced store).
- Here each program loads a [BLOCK_R x BLOCK_C] tile row by row (coalesced), transposes it in
  registers/shared memory (`tl.trans`; Triton converts the layout through shared memory) and
  stores it row by row of the output (coalesced too), so both directions move full sectors.
- 64x64 tiles (16 KB in float32) with 4 warps give each thread 32 elements: enough bytes in flight
  to run at memory bandwidth.
Values are copied without casts, so the output is bit-identical to the baseline's.
"""

import torch
import triton
import triton.language as tl

BLOCK_R = 64
BLOCK_C = 64
NUM_WARPS = 4


@triton.jit
def transpose_kernel(x_ptr, out_ptr, R, C, stride_xr, stride_or,
                     BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr):
    rows = tl.program_id(axis=0) * BLOCK_R + tl.arange(0, BLOCK_R)
    cols = tl.program_id(axis=1) * BLOCK_C + tl.arange(0, BLOCK_C)
    load_mask = (rows[:, None] < R) & (cols[None, :] < C)
    tile = tl.load(x_ptr + rows[:, None].to(tl.int64) * stride_xr + cols[None, :], mask=load_mask)
    tile_t = tl.trans(tile)   # [BLOCK_C, BLOCK_R]
    store_mask = (cols[:, None] < C) & (rows[None, :] < R)
    tl.store(out_ptr + cols[:, None].to(tl.int64) * stride_or + rows[None, :], tile_t, mask=store_mask)


def transpose(x: torch.Tensor) -> torch.Tensor:
    x = x.contiguous()
    R, C = x.shape
    out = torch.empty((C, R), dtype=x.dtype, device=x.device)
    grid = (triton.cdiv(R, BLOCK_R), triton.cdiv(C, BLOCK_C))
    transpose_kernel[grid](x, out, R, C, x.stride(0), out.stride(0),
                           BLOCK_R=BLOCK_R, BLOCK_C=BLOCK_C, num_warps=NUM_WARPS)
    return out
