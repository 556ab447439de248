"""Row-wise log-softmax in Triton: a plain, correct starting point.

`log_softmax(x)` equals `torch.log_softmax(x.float(), dim=-1).to(x.dtype)` for a contiguous 2-D
`x` (rows, cols): y = x - max - log(sum(exp(x - max))), computed in float32, rounded to x.dtype.

One program per row walks the row twice in chunks of BLOCK_SIZE: an online max / sum-of-exp pass,
then the output pass.
"""

import torch
import triton
import triton.language as tl

BLOCK_SIZE = 1024
NUM_WARPS = 4


@triton.jit
def log_softmax_kernel(x_ptr, out_ptr, n_cols, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * n_cols
    out_row = out_ptr + row * n_cols
    m = tl.full([BLOCK_SIZE], -float("inf"), dtype=tl.float32)
    s = tl.zeros([BLOCK_SIZE], dtype=tl.float32)
    for start in range(0, n_cols, BLOCK_SIZE):
        cols = start + tl.arange(0, BLOCK_SIZE)
        x = tl.load(x_row + cols, mask=cols < n_cols, other=-float("inf")).to(tl.float32)
        m_new = tl.maximum(m, x)
        # Lanes that have seen only padding keep m = -inf; guard the rescale against inf - inf.
        m_safe = tl.where(m_new == -float("inf"), 0.0, m_new)
        s = s * tl.exp(m - m_safe) + tl.exp(x - m_safe)
        m = m_new
    row_max = tl.max(m, axis=0)
    row_sum = tl.sum(s * tl.exp(m - row_max), axis=0)
    log_norm = row_max + tl.log(row_sum)
    for start in range(0, n_cols, BLOCK_SIZE):
        cols = start + tl.arange(0, BLOCK_SIZE)
        mask = cols < n_cols
        x = tl.load(x_row + cols, mask=mask, other=0.0).to(tl.float32)
        tl.store(out_row + cols, (x - log_norm).to(out_ptr.dtype.element_ty), mask=mask)


def log_softmax(x: torch.Tensor) -> torch.Tensor:
    x = x.contiguous()
    n_rows, n_cols = x.shape
    out = torch.empty_like(x)
    log_softmax_kernel[(n_rows,)](x, out, n_cols, BLOCK_SIZE=BLOCK_SIZE, num_warps=NUM_WARPS)
    return out
