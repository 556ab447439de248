"""LayerNorm forward over the last dimension in Triton, tuned: the whole row in registers.

Same results as the starting kernel (float32 statistics with the two-pass variance, one cast back
to x.dtype). Why it is faster: the baseline reads every row three times in 256-element blocks,
each a dependent load followed by a block-wide reduction, so it is latency-bound and moves x
three times. Here every row (hidden <= 16384) is loaded once into registers with
BLOCK_SIZE = next_power_of_2(hidden) and 4-16 warps, mean and variance are reduced on the
registers, and the output is stored: one HBM read and one write per element. Short rows
(<= 1024 columns) are processed four per program as a [4, BLOCK] tile, so each program still
moves enough bytes and weight/bias are loaded once per four rows.
"""

import torch
import triton
import triton.language as tl

EPS = 1e-5

_launch_cache: dict[tuple[int, torch.dtype], tuple[int, int, int]] = {}


@triton.jit
def layernorm_kernel(x_ptr, w_ptr, b_ptr, out_ptr, x_row_stride, out_row_stride, n_rows, n_cols, eps,
                     BLOCK_SIZE: tl.constexpr, ROWS: tl.constexpr):
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    cols = tl.arange(0, BLOCK_SIZE)
    col_mask = cols < n_cols
    mask = (rows < n_rows)[:, None] & col_mask[None, :]
    rows64 = rows.to(tl.int64)[:, None]
    x = tl.load(x_ptr + rows64 * x_row_stride + cols[None, :], mask=mask, other=0.0).to(tl.float32)
    mean = tl.sum(x, axis=1) / n_cols
    diff = tl.where(mask, x - mean[:, None], 0.0)
    var = tl.sum(diff * diff, axis=1) / n_cols
    rstd = 1.0 / tl.sqrt(var + eps)
    w = tl.load(w_ptr + cols, mask=col_mask, other=0.0).to(tl.float32)
    b = tl.load(b_ptr + cols, mask=col_mask, other=0.0).to(tl.float32)
    y = diff * rstd[:, None] * w[None, :] + b[None, :]
    tl.store(out_ptr + rows64 * out_row_stride + cols[None, :], y.to(out_ptr.dtype.element_ty), mask=mask)


def _launch_params(n_cols: int, dtype: torch.dtype) -> tuple[int, int, int]:
    key = (n_cols, dtype)
    params = _launch_cache.get(key)
    if params is None:
        block = triton.next_power_of_2(n_cols)
        rows = 4 if block <= 1024 else 1
        elements = rows * block
        num_warps = 4 if elements <= 1024 else 8 if elements <= 4096 else 16
        params = _launch_cache[key] = (block, rows, num_warps)
    return params


def layernorm(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    x = x.contiguous()
    n_rows, n_cols = x.shape
    out = torch.empty_like(x)
    block, rows, num_warps = _launch_params(n_cols, x.dtype)
    layernorm_kernel[(triton.cdiv(n_rows, rows),)](x, weight, bias, out, x.stride(0), out.stride(0), n_rows,
                                                   n_cols, EPS, BLOCK_SIZE=block, ROWS=rows, num_warps=num_warps)
    return out
