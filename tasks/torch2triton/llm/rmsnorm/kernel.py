"""Llama RMSNorm in Triton: a plain, correct starting point.

`rmsnorm(x, weight)` equals LlamaRMSNorm with eps = 1e-6:
    h = x.float(); h = h * rsqrt(mean(h * h, -1) + eps); out = weight * h.to(x.dtype)
for a contiguous 2-D `x` (rows, hidden) and a 1-D `weight` (hidden,) of the same dtype.

One program per row walks the row twice in chunks of BLOCK_SIZE: first the sum of squares, then
the normalised, weighted output.
"""

import torch
import triton
import triton.language as tl

EPS = 1e-6
BLOCK_SIZE = 1024
NUM_WARPS = 4


@triton.jit
def rmsnorm_kernel(x_ptr, w_ptr, out_ptr, n_cols, eps, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * n_cols
    out_row = out_ptr + row * n_cols
    acc = tl.zeros([BLOCK_SIZE], dtype=tl.float32)
    for start in range(0, n_cols, BLOCK_SIZE):
        cols = start + tl.arange(0, BLOCK_SIZE)
        x = tl.load(x_row + cols, mask=cols < n_cols, other=0.0).to(tl.float32)
        acc += x * x
    rstd = tl.rsqrt(tl.sum(acc, axis=0) / n_cols + eps)
    for start in range(0, n_cols, BLOCK_SIZE):
        cols = start + tl.arange(0, BLOCK_SIZE)
        mask = cols < n_cols
        x = tl.load(x_row + cols, mask=mask, other=0.0).to(tl.float32)
        w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
        # Like the reference: round the normalised value to x.dtype before the weight multiply.
        normed = (x * rstd).to(out_ptr.dtype.element_ty).to(tl.float32)
        tl.store(out_row + cols, (normed * w).to(out_ptr.dtype.element_ty), mask=mask)


def rmsnorm(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    x = x.contiguous()
    n_rows, n_cols = x.shape
    out = torch.empty_like(x)
    rmsnorm_kernel[(n_rows,)](x, weight, out, n_cols, EPS, BLOCK_SIZE=BLOCK_SIZE, num_warps=NUM_WARPS)
    return out
