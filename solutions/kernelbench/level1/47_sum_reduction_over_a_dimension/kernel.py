"""47_sum_reduction_over_a_dimension: the sum over the middle dimension of a (B, R, C) tensor, in
Triton (a template-style solution of `aka import kernelbench`)."""

import torch
import triton
import triton.language as tl
from reference import Model


@triton.jit
def kernel(out_ptr, in_ptr, R, C, BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr):
    batch = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1) * BLOCK_C + tl.arange(0, BLOCK_C)
    acc = tl.zeros((BLOCK_C,), dtype=tl.float32)
    for start in range(0, R, BLOCK_R):
        rows = start + tl.arange(0, BLOCK_R)
        mask = (rows[:, None] < R) & (cols[None, :] < C)
        block = tl.load(in_ptr + batch * R * C + rows[:, None] * C + cols[None, :], mask=mask, other=0.0)
        acc += tl.sum(block, axis=0)
    tl.store(out_ptr + batch * C + cols, acc, mask=cols < C)


class ModelNew(Model):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        dim = self.dim % x.dim()
        before = 1
        for size in x.shape[:dim]:
            before *= size
        after = x.numel() // (before * x.shape[dim]) if x.numel() else 0
        x = x.contiguous()
        out = torch.empty((*x.shape[:dim], 1, *x.shape[dim + 1 :]), device=x.device, dtype=x.dtype)
        grid = (before, triton.cdiv(after, 128))
        kernel[grid](out, x, x.shape[dim], after, BLOCK_R=32, BLOCK_C=128)
        return out
