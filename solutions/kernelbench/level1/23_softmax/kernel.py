"""23_softmax: a row softmax in Triton, three passes over long rows (a template-style solution of
`aka import kernelbench`). At the problem's own size every value is under its 1e-4 tolerance, so
the judge stops on the task as defective whatever the kernel (docs/kernelbench-import.md)."""

import torch
import triton
import triton.language as tl
from reference import Model


@triton.jit
def kernel(out_ptr, in_ptr, C, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64) * C
    top = tl.full((BLOCK,), -float("inf"), tl.float32)
    for start in range(0, C, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        top = tl.maximum(top, tl.load(in_ptr + row + cols, mask=cols < C, other=-float("inf")))
    peak = tl.max(top, 0)
    total = tl.zeros((BLOCK,), tl.float32)
    for start in range(0, C, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        x = tl.load(in_ptr + row + cols, mask=cols < C, other=-float("inf"))
        total += tl.exp(x - peak)
    norm = tl.sum(total, 0)
    for start in range(0, C, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        x = tl.load(in_ptr + row + cols, mask=cols < C, other=-float("inf"))
        tl.store(out_ptr + row + cols, tl.exp(x - peak) / norm, mask=cols < C)


class ModelNew(Model):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        out = torch.empty_like(x)
        kernel[(x.shape[0],)](out, x, x.shape[1], BLOCK=1024)
        return out
