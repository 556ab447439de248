"""The SwiGLU activation of an MLP layer, in Triton: the starting point to optimise.

`silu_and_mul(gate_up)` takes the fused gate/up projection, a contiguous (tokens, 2 * inter)
tensor whose first `inter` columns are the gate and the last `inter` the up values, and returns a
new contiguous (tokens, inter) tensor of the same dtype (float16 or bfloat16):

    out = (silu(gate_f32) * up_f32).to(dtype),   silu(g) = g / (1 + exp(-g)),

computed in float32 and rounded once. The kernel walks the flat output in blocks of BLOCK_SIZE
elements and recovers each element's row and column with a division and a remainder.
"""

import torch
import triton
import triton.language as tl

BLOCK_SIZE = 128
NUM_WARPS = 4


@triton.jit
def silu_and_mul_kernel(x_ptr, out_ptr, n_elements, inter, BLOCK_SIZE: tl.constexpr):
    offsets = tl.program_id(0).to(tl.int64) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    row = offsets // inter
    col = offsets % inter
    gate_offsets = row * (2 * inter) + col
    gate = tl.load(x_ptr + gate_offsets, mask=mask, other=0.0).to(tl.float32)
    up = tl.load(x_ptr + gate_offsets + inter, mask=mask, other=0.0).to(tl.float32)
    out = gate / (1.0 + tl.exp(-gate)) * up
    tl.store(out_ptr + offsets, out.to(out_ptr.dtype.element_ty), mask=mask)


def silu_and_mul(gate_up: torch.Tensor) -> torch.Tensor:
    gate_up = gate_up.contiguous()
    tokens, width = gate_up.shape
    inter = width // 2
    out = torch.empty((tokens, inter), dtype=gate_up.dtype, device=gate_up.device)
    n_elements = out.numel()
    grid = (triton.cdiv(n_elements, BLOCK_SIZE),)
    silu_and_mul_kernel[grid](gate_up, out, n_elements, inter, BLOCK_SIZE=BLOCK_SIZE, num_warps=NUM_WARPS)
    return out
