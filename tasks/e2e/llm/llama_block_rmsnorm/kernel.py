"""The two RMSNorms of a Llama decoder block, in Triton: the starting point to optimise.

`rmsnorm(x, weight, eps)` -> y and `add_rmsnorm(x, residual, weight, eps)` -> (h, y), where
x and residual are contiguous (tokens, hidden) tensors, weight is (hidden,), all of one dtype
(float16 or bfloat16), and

    h = x + residual                                        (rounded to the dtype)
    y = weight * (h_f32 * rsqrt(mean(h_f32 ** 2) + eps)).to(dtype)   (LlamaRMSNorm)

with the statistics in float32. Each norm runs as two launches (a per-row loop for 1/rms, then a
2-D grid of small blocks that applies it), and the residual add is a third kernel of its own.
"""

import torch
import triton
import triton.language as tl

BLOCK_SIZE = 128       # columns per program in the statistics loop and the apply kernel
ADD_BLOCK_SIZE = 128   # elements per program of the residual add
NUM_WARPS = 4


@triton.jit
def rms_rstd_kernel(x_ptr, rstd_ptr, n_cols, eps, BLOCK_SIZE: tl.constexpr):
    """One program per row: rstd[row] = 1 / sqrt(mean(x[row] ** 2) + eps), in float32."""
    row = tl.program_id(0)
    base = x_ptr + row.to(tl.int64) * n_cols
    acc = tl.zeros([BLOCK_SIZE], dtype=tl.float32)
    for start in range(0, n_cols, BLOCK_SIZE):
        cols = start + tl.arange(0, BLOCK_SIZE)
        x = tl.load(base + cols, mask=cols < n_cols, other=0.0).to(tl.float32)
        acc += x * x
    mean = tl.sum(acc, axis=0) / n_cols
    tl.store(rstd_ptr + row, tl.rsqrt(mean + eps))


@triton.jit
def rmsnorm_kernel(x_ptr, w_ptr, rstd_ptr, y_ptr, n_cols, BLOCK_SIZE: tl.constexpr):
    """Program (row, block): y = weight * (x * rstd[row]).to(dtype) for BLOCK_SIZE columns."""
    row = tl.program_id(0)
    cols = tl.program_id(1) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = cols < n_cols
    offsets = row.to(tl.int64) * n_cols + cols
    x = tl.load(x_ptr + offsets, mask=mask, other=0.0).to(tl.float32)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    rstd = tl.load(rstd_ptr + row)
    normed = (x * rstd).to(y_ptr.dtype.element_ty).to(tl.float32)
    tl.store(y_ptr + offsets, (normed * w).to(y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def add_kernel(a_ptr, b_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    """out = a + b over a flat range, computed in float32 and rounded to the output dtype."""
    offsets = tl.program_id(0).to(tl.int64) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    a = tl.load(a_ptr + offsets, mask=mask, other=0.0).to(tl.float32)
    b = tl.load(b_ptr + offsets, mask=mask, other=0.0).to(tl.float32)
    tl.store(out_ptr + offsets, (a + b).to(out_ptr.dtype.element_ty), mask=mask)


def rmsnorm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """LlamaRMSNorm of each row of a contiguous (tokens, hidden) tensor."""
    x = x.contiguous()
    rows, n_cols = x.shape
    rstd = torch.empty(rows, dtype=torch.float32, device=x.device)
    y = torch.empty_like(x)
    rms_rstd_kernel[(rows,)](x, rstd, n_cols, eps, BLOCK_SIZE=BLOCK_SIZE, num_warps=NUM_WARPS)
    grid = (rows, triton.cdiv(n_cols, BLOCK_SIZE))
    rmsnorm_kernel[grid](x, weight, rstd, y, n_cols, BLOCK_SIZE=BLOCK_SIZE, num_warps=NUM_WARPS)
    return y


def add_rmsnorm(x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor,
                eps: float) -> tuple[torch.Tensor, torch.Tensor]:
    """h = x + residual (the block's residual stream) and rmsnorm(h)."""
    x, residual = x.contiguous(), residual.contiguous()
    h = torch.empty_like(x)
    n_elements = x.numel()
    add_kernel[(triton.cdiv(n_elements, ADD_BLOCK_SIZE),)](x, residual, h, n_elements,
                                                            BLOCK_SIZE=ADD_BLOCK_SIZE, num_warps=NUM_WARPS)
    return h, rmsnorm(h, weight, eps)
