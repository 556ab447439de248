"""GeGLU in Triton: a plain, correct starting point.

`geglu(x)` for a contiguous 2-D `x` (tokens, 2 * d) returns, like the model code
    gate, up = x.chunk(2, dim=-1); F.gelu(gate, approximate="tanh") * up
a new (tokens, d) tensor of x's dtype: g = gelu_tanh(gate) in float32, rounded to x.dtype, then
g * up in float32, rounded to x.dtype.

One program handles BLOCK_SIZE consecutive output elements of the flattened (tokens, d) output and
finds each element's row and column with a division.
"""

import torch
import triton
import triton.language as tl

BLOCK_SIZE = 256
NUM_WARPS = 4


@triton.jit
def _tanh(z):
    # tanh(z) = 1 - 2 / (exp(2z) + 1): exact limits at +-inf, no cancellation problem for gelu,
    # which only uses 1 + tanh(z).
    return 1.0 - 2.0 / (tl.exp(2.0 * z) + 1.0)


@triton.jit
def geglu_kernel(x_ptr, out_ptr, n_elements, d, BLOCK_SIZE: tl.constexpr):
    offsets = tl.program_id(0).to(tl.int64) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    row = offsets // d
    col = offsets % d
    gate = tl.load(x_ptr + row * (2 * d) + col, mask=mask, other=0.0).to(tl.float32)
    up = tl.load(x_ptr + row * (2 * d) + d + col, mask=mask, other=0.0).to(tl.float32)
    inner = 0.7978845608028654 * (gate + 0.044715 * gate * gate * gate)  # sqrt(2/pi) * (g + 0.044715 g^3)
    g = 0.5 * gate * (1.0 + _tanh(inner))
    g = g.to(out_ptr.dtype.element_ty).to(tl.float32)  # the reference rounds gelu's output first
    tl.store(out_ptr + offsets, (g * up).to(out_ptr.dtype.element_ty), mask=mask)


def geglu(x: torch.Tensor) -> torch.Tensor:
    x = x.contiguous()
    tokens, two_d = x.shape
    d = two_d // 2
    out = torch.empty((tokens, d), dtype=x.dtype, device=x.device)
    n_elements = tokens * d
    geglu_kernel[(triton.cdiv(n_elements, BLOCK_SIZE),)](x, out, n_elements, d, BLOCK_SIZE=BLOCK_SIZE,
                                                          num_warps=NUM_WARPS)
    return out
