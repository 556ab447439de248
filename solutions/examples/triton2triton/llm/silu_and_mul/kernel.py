"""SwiGLU activation (vLLM's `silu_and_mul`) in Triton, tuned: bigger blocks, wide loads.

Same results as the starting kernel (float32 math, one cast back to x.dtype). Why it is faster:
each program now covers 1024 columns with 4 warps, so every thread owns 8 contiguous elements
(one 16-byte load per half in 16-bit dtypes, two in float32) instead of a single element, and the
grid shrinks 8x (57k instead of 458k programs for the (4096, 14336) case), which removes most of
the per-program overhead that keeps the 128-element baseline well below HBM bandwidth (the same
change took the GELU example from 84 us to 38 us on an H200). Row offsets are int64.
"""

import torch
import triton
import triton.language as tl

BLOCK_SIZE = 1024
NUM_WARPS = 4


@triton.jit
def silu_and_mul_kernel(x_ptr, out_ptr, d, x_row_stride, out_row_stride, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = cols < d
    x_row = x_ptr + row * x_row_stride
    gate = tl.load(x_row + cols, mask=mask, other=0.0).to(tl.float32)
    up = tl.load(x_row + d + cols, mask=mask, other=0.0).to(tl.float32)
    y = gate / (1.0 + tl.exp(-gate)) * up
    tl.store(out_ptr + row * out_row_stride + cols, y.to(out_ptr.dtype.element_ty), mask=mask)


def silu_and_mul(x: torch.Tensor) -> torch.Tensor:
    x = x.contiguous()
    tokens, two_d = x.shape
    d = two_d // 2
    out = torch.empty((tokens, d), dtype=x.dtype, device=x.device)
    grid = (tokens, triton.cdiv(d, BLOCK_SIZE))
    silu_and_mul_kernel[grid](x, out, d, x.stride(0), out.stride(0), BLOCK_SIZE=BLOCK_SIZE, num_warps=NUM_WARPS)
    return out
