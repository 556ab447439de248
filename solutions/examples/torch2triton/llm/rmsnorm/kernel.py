"""Llama RMSNorm in Triton, tuned: one read of x, the whole row held in registers.

Why it is faster than the starting kernel (and far faster than the PyTorch reference, which
launches ~7 kernels and moves ~36 bytes per 16-bit element instead of 4):
- each row is loaded once (BLOCK = next power of two of hidden) and kept in float32 registers for
  both the reduction and the output, instead of a second pass over x in 1024-element chunks;
- short rows are packed ROWS to a program (a [ROWS, BLOCK] tile), so every program moves at least
  ~8 KB and the weight vector is loaded once per program rather than once per row;
- num_warps grows with the tile (4 / 8 / 16), so a thread holds at most ~32 float32 values of x.
The expected time is close to the memory floor (read x + write out), versus the starter's extra
L2/HBM traffic and serialised 1024-element chunks with 4 warps.
"""

import torch
import triton
import triton.language as tl

EPS = 1e-6

_CONFIGS: dict[int, tuple[int, int, int]] = {}


@triton.jit
def rmsnorm_kernel(x_ptr, w_ptr, out_ptr, n_rows, n_cols, eps, ROWS: tl.constexpr, BLOCK_SIZE: tl.constexpr):
    rows = tl.program_id(0).to(tl.int64) * ROWS + tl.arange(0, ROWS)
    cols = tl.arange(0, BLOCK_SIZE)
    col_mask = cols < n_cols
    mask = (rows < n_rows)[:, None] & col_mask[None, :]
    offsets = rows[:, None] * n_cols + cols[None, :]
    x = tl.load(x_ptr + offsets, mask=mask, other=0.0).to(tl.float32)
    w = tl.load(w_ptr + cols, mask=col_mask, other=0.0).to(tl.float32)
    rstd = tl.rsqrt(tl.sum(x * x, axis=1) / n_cols + eps)
    normed = (x * rstd[:, None]).to(out_ptr.dtype.element_ty).to(tl.float32)
    tl.store(out_ptr + offsets, (normed * w[None, :]).to(out_ptr.dtype.element_ty), mask=mask)


def _launch_config(n_cols: int) -> tuple[int, int, int]:
    config = _CONFIGS.get(n_cols)
    if config is None:
        block = triton.next_power_of_2(n_cols)
        rows = max(1, 4096 // block)          # at least 4096 elements per program
        tile = rows * block
        num_warps = 4 if tile <= 2048 else 8 if tile <= 8192 else 16
        config = _CONFIGS[n_cols] = (block, rows, num_warps)
    return config


def rmsnorm(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    x = x.contiguous()
    n_rows, n_cols = x.shape
    out = torch.empty_like(x)
    block, rows, num_warps = _launch_config(n_cols)
    rmsnorm_kernel[(triton.cdiv(n_rows, rows),)](x, weight, out, n_rows, n_cols, EPS, ROWS=rows,
                                                 BLOCK_SIZE=block, num_warps=num_warps)
    return out
