"""The SwiGLU activation of an MLP layer, in Triton: 2-D tiles, vectorised, no index division.

Why it is faster than the starting kernel (same results: float32 SiLU, rounded once):
- a 2-D grid over (row blocks, column blocks) instead of a flat range: the row and column come
  from the program ids, so there is no 64-bit division and remainder per element, and every row
  segment is contiguous, so gate, up and out move as 16-byte vectors (inter is a multiple of 16);
- each program moves ROWS x BLOCK_N = 4 x 1024 outputs (24 KB of traffic in 16-bit) instead of
  128 outputs (768 bytes), so the grid is ~32x smaller and the per-program overhead is amortised.

Expected effect (estimate, not yet measured on the H200): the activation moves 6 * tokens * inter
bytes; it should go from ~1.6-2 TB/s to ~3.5 TB/s (about 2x on the kernel). It is ~20% of a layer
at hidden 1024 and ~12% at hidden 2048 in the starting code, so the whole stack gets only about
1.08-1.12x faster at hidden 1024 and 1.04-1.07x at hidden 2048: the GEMMs dominate.
"""

import torch
import triton
import triton.language as tl

BLOCK_N = 1024   # columns (of inter) per program
ROWS = 4         # tokens per program
NUM_WARPS = 4


@triton.jit
def silu_and_mul_kernel(x_ptr, out_ptr, n_rows, inter, ROWS: tl.constexpr, BLOCK_N: tl.constexpr):
    rows = (tl.program_id(0) * ROWS + tl.arange(0, ROWS)).to(tl.int64)
    cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    mask = (rows < n_rows)[:, None] & (cols < inter)[None, :]
    gate_ptrs = x_ptr + rows[:, None] * (2 * inter) + cols[None, :]
    gate = tl.load(gate_ptrs, mask=mask, other=0.0).to(tl.float32)
    up = tl.load(gate_ptrs + inter, mask=mask, other=0.0).to(tl.float32)
    out = gate / (1.0 + tl.exp(-gate)) * up
    tl.store(out_ptr + rows[:, None] * inter + cols[None, :], out.to(out_ptr.dtype.element_ty), mask=mask)


def silu_and_mul(gate_up: torch.Tensor) -> torch.Tensor:
    gate_up = gate_up.contiguous()
    tokens, width = gate_up.shape
    inter = width // 2
    out = torch.empty((tokens, inter), dtype=gate_up.dtype, device=gate_up.device)
    block_n = min(BLOCK_N, triton.next_power_of_2(inter))
    grid = (triton.cdiv(tokens, ROWS), triton.cdiv(inter, block_n))
    silu_and_mul_kernel[grid](gate_up, out, tokens, inter, ROWS=ROWS, BLOCK_N=block_n, num_warps=NUM_WARPS)
    return out
