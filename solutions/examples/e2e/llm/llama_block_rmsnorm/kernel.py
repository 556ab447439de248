"""The two RMSNorms of a Llama decoder block, in Triton: fused and single-pass.

Why it is faster than the starting kernel (same results: float32 statistics, LlamaRMSNorm's two
roundings, h rounded before it is normalised):
- one launch per norm instead of two (rmsnorm) or three (add + statistics + apply): the whole row
  (hidden <= 2048, next power of two) sits in registers, so x is read once instead of twice and
  no rstd buffer round-trips through memory;
- the attention residual add is fused into the second norm: x and the residual are read once,
  h and y written once (4 row-passes instead of 8 for add + two-pass norm);
- several rows per program (ROWS = ELEMENTS_PER_PROGRAM / padded hidden) so each program moves
  8-16 KB with 16-byte vector accesses, and the weight is loaded once per program.

Expected effect (estimate, not yet measured on the H200): the norms go from ~12 ns to ~4 ns per
token at hidden 1024 (about 14% -> 5% of the block), so the whole block gets only about
1.08-1.12x faster at hidden 1024 and 1.03-1.06x at hidden 2048, where the GEMMs dominate even more.
"""

import torch
import triton
import triton.language as tl

ELEMENTS_PER_PROGRAM = 4096   # rows per program = this / next_power_of_2(hidden), at least 1
NUM_WARPS = 8


@triton.jit
def rmsnorm_kernel(x_ptr, res_ptr, w_ptr, h_ptr, y_ptr, n_rows, n_cols, eps,
                   HAS_RESIDUAL: tl.constexpr, BLOCK_N: tl.constexpr, ROWS: tl.constexpr):
    """ROWS whole rows per program. With HAS_RESIDUAL: h = x + res (stored, rounded) is normalised."""
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    cols = tl.arange(0, BLOCK_N)
    col_mask = cols < n_cols
    mask = (rows < n_rows)[:, None] & col_mask[None, :]
    offsets = rows.to(tl.int64)[:, None] * n_cols + cols[None, :]
    x = tl.load(x_ptr + offsets, mask=mask, other=0.0)
    if HAS_RESIDUAL:
        res = tl.load(res_ptr + offsets, mask=mask, other=0.0)
        h = (x.to(tl.float32) + res.to(tl.float32)).to(h_ptr.dtype.element_ty)
        tl.store(h_ptr + offsets, h, mask=mask)
        xf = h.to(tl.float32)
    else:
        xf = x.to(tl.float32)
    rstd = tl.rsqrt(tl.sum(xf * xf, axis=1) / n_cols + eps)
    w = tl.load(w_ptr + cols, mask=col_mask, other=0.0).to(tl.float32)
    normed = (xf * rstd[:, None]).to(y_ptr.dtype.element_ty).to(tl.float32)
    tl.store(y_ptr + offsets, (normed * w[None, :]).to(y_ptr.dtype.element_ty), mask=mask)


def _launch(x: torch.Tensor, res: torch.Tensor | None, weight: torch.Tensor, h: torch.Tensor | None,
            y: torch.Tensor, eps: float) -> None:
    n_rows, n_cols = x.shape
    block_n = triton.next_power_of_2(n_cols)
    rows = max(1, ELEMENTS_PER_PROGRAM // block_n)
    grid = (triton.cdiv(n_rows, rows),)
    rmsnorm_kernel[grid](x, x if res is None else res, weight, y if h is None else h, y, n_rows, n_cols, eps,
                         HAS_RESIDUAL=res is not None, BLOCK_N=block_n, ROWS=rows, num_warps=NUM_WARPS)


def rmsnorm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """LlamaRMSNorm of each row of a contiguous (tokens, hidden) tensor: one launch."""
    x = x.contiguous()
    y = torch.empty_like(x)
    _launch(x, None, weight, None, y, eps)
    return y


def add_rmsnorm(x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor,
                eps: float) -> tuple[torch.Tensor, torch.Tensor]:
    """h = x + residual and rmsnorm(h), in one launch that reads x and residual once."""
    x, residual = x.contiguous(), residual.contiguous()
    h = torch.empty_like(x)
    y = torch.empty_like(x)
    _launch(x, residual, weight, h, y, eps)
    return h, y
