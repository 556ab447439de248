"""Fused residual add + RMSNorm (vLLM's `fused_add_rms_norm`) in Triton: a plain starting point.

`fused_add_rms_norm(x, residual, weight)` returns two new tensors of x's shape and dtype:
new_residual = x + residual (rounded to the input dtype) and
normed = new_residual * rsqrt(mean(new_residual^2) + EPS) * weight (float32 math, one cast back).
Nothing is written in place. Two kernels: an elementwise add, then a row norm that walks each row
in fixed blocks twice (sum of squares, then the output).
"""

import torch
import triton
import triton.language as tl

EPS = 1e-6
ADD_BLOCK_SIZE = 256
BLOCK_SIZE = 256
NUM_WARPS = 4


@triton.jit
def residual_add_kernel(x_ptr, residual_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask, other=0.0).to(tl.float32)
    r = tl.load(residual_ptr + offsets, mask=mask, other=0.0).to(tl.float32)
    tl.store(out_ptr + offsets, (x + r).to(out_ptr.dtype.element_ty), mask=mask)


@triton.jit
def rms_norm_kernel(h_ptr, w_ptr, out_ptr, row_stride, n_cols, eps, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    h_row = h_ptr + row * row_stride
    out_row = out_ptr + row * row_stride
    offsets = tl.arange(0, BLOCK_SIZE)

    squares = 0.0
    for start in range(0, n_cols, BLOCK_SIZE):
        cols = start + offsets
        h = tl.load(h_row + cols, mask=cols < n_cols, other=0.0).to(tl.float32)
        squares += tl.sum(h * h, axis=0)
    rstd = 1.0 / tl.sqrt(squares / n_cols + eps)

    for start in range(0, n_cols, BLOCK_SIZE):
        cols = start + offsets
        mask = cols < n_cols
        h = tl.load(h_row + cols, mask=mask, other=0.0).to(tl.float32)
        w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
        tl.store(out_row + cols, (h * rstd * w).to(out_ptr.dtype.element_ty), mask=mask)


def fused_add_rms_norm(x: torch.Tensor, residual: torch.Tensor,
                       weight: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    x = x.contiguous()
    residual = residual.contiguous()
    n_rows, n_cols = x.shape
    new_residual = torch.empty_like(x)
    normed = torch.empty_like(x)
    n_elements = x.numel()
    residual_add_kernel[(triton.cdiv(n_elements, ADD_BLOCK_SIZE),)](x, residual, new_residual, n_elements,
                                                                    BLOCK_SIZE=ADD_BLOCK_SIZE, num_warps=NUM_WARPS)
    rms_norm_kernel[(n_rows,)](new_residual, weight, normed, new_residual.stride(0), n_cols, EPS,
                               BLOCK_SIZE=BLOCK_SIZE, num_warps=NUM_WARPS)
    return normed, new_residual
