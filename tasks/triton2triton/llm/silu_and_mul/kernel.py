"""SwiGLU activation (vLLM's `silu_and_mul`) in Triton: the starting point to optimise.

`silu_and_mul(x)` takes x of shape (tokens, 2 * d) and returns a new (tokens, d) tensor of x's dtype:
out = silu(x[:, :d]) * x[:, d:], with silu(a) = a / (1 + exp(-a)), computed in float32 and cast back.
"""

import torch
import triton
import triton.language as tl

BLOCK_SIZE = 128
NUM_WARPS = 4


@triton.jit
def silu_and_mul_kernel(x_ptr, out_ptr, d, x_row_stride, out_row_stride, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.program_id(1) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = cols < d
    gate = tl.load(x_ptr + row * x_row_stride + cols, mask=mask, other=0.0).to(tl.float32)
    up = tl.load(x_ptr + row * x_row_stride + d + cols, mask=mask, other=0.0).to(tl.float32)
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
