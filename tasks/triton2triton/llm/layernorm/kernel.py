"""LayerNorm forward over the last dimension in Triton: a plain, correct starting point.

`layernorm(x, weight, bias)` returns a new tensor of x's shape and dtype:
y = (x - mean) / sqrt(var + EPS) * weight + bias per row, with the biased variance, computed in
float32 and cast back. One program per row walks the row in fixed blocks three times: the mean,
the variance, then the normalised output.
"""

import torch
import triton
import triton.language as tl

EPS = 1e-5
BLOCK_SIZE = 256
NUM_WARPS = 4


@triton.jit
def layernorm_kernel(x_ptr, w_ptr, b_ptr, out_ptr, x_row_stride, out_row_stride, n_cols, eps,
                     BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    x_row = x_ptr + row * x_row_stride
    out_row = out_ptr + row * out_row_stride
    offsets = tl.arange(0, BLOCK_SIZE)

    total = 0.0
    for start in range(0, n_cols, BLOCK_SIZE):
        cols = start + offsets
        x = tl.load(x_row + cols, mask=cols < n_cols, other=0.0).to(tl.float32)
        total += tl.sum(x, axis=0)
    mean = total / n_cols

    squares = 0.0
    for start in range(0, n_cols, BLOCK_SIZE):
        cols = start + offsets
        mask = cols < n_cols
        x = tl.load(x_row + cols, mask=mask, other=0.0).to(tl.float32)
        diff = tl.where(mask, x - mean, 0.0)
        squares += tl.sum(diff * diff, axis=0)
    rstd = 1.0 / tl.sqrt(squares / n_cols + eps)

    for start in range(0, n_cols, BLOCK_SIZE):
        cols = start + offsets
        mask = cols < n_cols
        x = tl.load(x_row + cols, mask=mask, other=0.0).to(tl.float32)
        w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
        b = tl.load(b_ptr + cols, mask=mask, other=0.0).to(tl.float32)
        y = (x - mean) * rstd * w + b
        tl.store(out_row + cols, y.to(out_ptr.dtype.element_ty), mask=mask)


def layernorm(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    x = x.contiguous()
    n_rows, n_cols = x.shape
    out = torch.empty_like(x)
    layernorm_kernel[(n_rows,)](x, weight, bias, out, x.stride(0), out.stride(0), n_cols, EPS,
                                BLOCK_SIZE=BLOCK_SIZE, num_warps=NUM_WARPS)
    return out
