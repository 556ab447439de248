"""RMSNorm in Triton, one pass: each program loads its whole row once (rows up to 16k elements fit
in registers), reduces in float32 and writes the normalized row. Faster than the original because
x is read once instead of twice and the loads are full-row vectors instead of 128-wide pieces.
"""

import torch
import triton
import triton.language as tl

BLOCK_SIZE = 128  # unused: the block covers the whole row (kept for the declared tunable)
NUM_WARPS = 8


@triton.jit
def rmsnorm_kernel(x_ptr, w_ptr, out_ptr, hidden, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < hidden
    x = tl.load(x_ptr + row * hidden + cols, mask=mask, other=0.0).to(tl.float32)
    rstd = 1.0 / tl.sqrt(tl.sum(x * x, axis=0) / hidden + eps)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    tl.store(out_ptr + row * hidden + cols, (x * rstd * w).to(out_ptr.dtype.element_ty), mask=mask)


def rmsnorm(x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    x = x.contiguous()
    out = torch.empty_like(x)
    rows, hidden = x.shape
    block = triton.next_power_of_2(hidden)
    warps = 16 if block >= 8192 else NUM_WARPS
    rmsnorm_kernel[(rows,)](x, weight, out, hidden, eps, BLOCK=block, num_warps=warps)
    return out
