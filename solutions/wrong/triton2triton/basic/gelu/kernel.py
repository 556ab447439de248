"""A wrong GELU on purpose: the sigmoid approximation x * sigmoid(1.702 x) instead of the exact erf form.

It compiles and runs, but differs from the exact GELU by up to about 0.02, far beyond the
tolerances, so the correctness step must fail it.
"""

import torch
import triton
import triton.language as tl

BLOCK_SIZE = 1024


@triton.jit
def gelu_kernel(x_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(axis=0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask, other=0.0).to(tl.float32)
    y = x * tl.sigmoid(1.702 * x)
    tl.store(out_ptr + offsets, y.to(out_ptr.dtype.element_ty), mask=mask)


def gelu(x: torch.Tensor) -> torch.Tensor:
    x = x.contiguous()
    out = torch.empty_like(x)
    n_elements = x.numel()
    gelu_kernel[(triton.cdiv(n_elements, BLOCK_SIZE),)](x, out, n_elements, BLOCK_SIZE=BLOCK_SIZE)
    return out
