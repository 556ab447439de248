"""19_relu: ReLU in one Triton kernel (a template-style solution of `aka import kernelbench`)."""

import torch
import triton
import triton.language as tl
from reference import Model


@triton.jit
def kernel(out_ptr, in_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(in_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, tl.maximum(x, 0.0), mask=mask)


class ModelNew(Model):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        out = torch.empty_like(x)
        n = x.numel()
        kernel[(triton.cdiv(n, 4096),)](out, x, n, BLOCK=4096)
        return out
