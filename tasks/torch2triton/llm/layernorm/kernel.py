"""LayerNorm with weight and bias in Triton: a plain, correct starting point.

`layernorm(x, weight, bias)` equals `torch.nn.functional.layer_norm(x, (hidden,), weight, bias,
eps=1e-5)` for a contiguous 2-D `x` (rows, hidden) and 1-D `weight`, `bias` (hidden,) of x's
dtype: mean and biased variance in float32, y = (x - mean) * rstd * weight + bias, rounded once.

One program per row walks the row three times in chunks of BLOCK_SIZE (mean, variance, output),
like the forward kernel of Triton's layer-norm tutorial.
"""

import torch
import triton
import triton.language as tl

EPS = 1e-5
BLOCK_SIZE = 1024
NUM_WARPS = 4


@triton.jit
def layernorm_kernel(x_ptr, w_ptr, b_ptr, out_ptr, n_cols, eps, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * n_cols
    out_row = out_ptr + row * n_cols
    acc = tl.zeros([BLOCK_SIZE], dtype=tl.float32)
    for start in range(0, n_cols, BLOCK_SIZE):
        cols = start + tl.arange(0, BLOCK_SIZE)
        acc += tl.load(x_row + cols, mask=cols < n_cols, other=0.0).to(tl.float32)
    mean = tl.sum(acc, axis=0) / n_cols
    acc = tl.zeros([BLOCK_SIZE], dtype=tl.float32)
    for start in range(0, n_cols, BLOCK_SIZE):
        cols = start + tl.arange(0, BLOCK_SIZE)
        mask = cols < n_cols
        x = tl.load(x_row + cols, mask=mask, other=0.0).to(tl.float32)
        diff = tl.where(mask, x - mean, 0.0)
        acc += diff * diff
    rstd = tl.rsqrt(tl.sum(acc, axis=0) / n_cols + eps)
    for start in range(0, n_cols, BLOCK_SIZE):
        cols = start + tl.arange(0, BLOCK_SIZE)
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
    layernorm_kernel[(n_rows,)](x, weight, bias, out, n_cols, EPS, BLOCK_SIZE=BLOCK_SIZE, num_warps=NUM_WARPS)
    return out
