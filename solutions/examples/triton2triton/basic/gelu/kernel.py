"""GELU (exact erf form) in Triton, tuned: larger blocks and more warps per program.

Same results as the starting kernel (float32 math, cast back to x.dtype). Each program now moves
1024 elements with 8 warps and the grid is 8x smaller than with 128-element blocks. On an H200
(CUDA events, L2 flushed) 16.7M float32 elements took 38 us against the baseline's 84 us; blocks
of 4096 or 8192 were slower again (52 and 107 us with 8 warps).
"""

import torch
import triton
import triton.language as tl

BLOCK_SIZE = 1024
NUM_WARPS = 8


@triton.jit
def gelu_kernel(x_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(axis=0)
    offsets = pid.to(tl.int64) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask, other=0.0).to(tl.float32)
    y = 0.5 * x * (1.0 + tl.math.erf(x * 0.7071067811865476))
    tl.store(out_ptr + offsets, y.to(out_ptr.dtype.element_ty), mask=mask)


def gelu(x: torch.Tensor) -> torch.Tensor:
    x = x.contiguous()
    out = torch.empty_like(x)
    n_elements = x.numel()
    grid = (triton.cdiv(n_elements, BLOCK_SIZE),)
    gelu_kernel[grid](x, out, n_elements, BLOCK_SIZE=BLOCK_SIZE, num_warps=NUM_WARPS)
    return out
