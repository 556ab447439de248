"""Per-row cross-entropy loss from logits in Triton: one online log-sum-exp pass.

Same results as the starting kernel (float32 math, 0 for ignored rows). Why it is faster: the
baseline reads each row twice (maximum, then sum of exponentials) in 256-element blocks, each a
dependent load plus a block-wide reduction, so it is latency-bound and moves the logits twice
(rows of 64-256 KB do not survive in L2 between the passes). Here each row is read once in
4096-element chunks with 8 warps: every lane keeps its own running maximum and rescaled running
sum (online softmax), so there is no cross-warp reduction inside the loop, and the lanes are
combined once at the end. Rows whose target is ignore_index (-100) are not read at all.
"""

import torch
import triton
import triton.language as tl

IGNORE_INDEX = -100
BLOCK_SIZE = 4096
NUM_WARPS = 8


@triton.jit
def cross_entropy_kernel(logits_ptr, targets_ptr, loss_ptr, row_stride, n_cols, ignore_index,
                         BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    row_ptr = logits_ptr + row * row_stride
    offsets = tl.arange(0, BLOCK_SIZE)
    target = tl.load(targets_ptr + row)
    loss = 0.0
    if target != ignore_index:
        lane_max = tl.full([BLOCK_SIZE], -float("inf"), tl.float32)
        lane_sum = tl.zeros([BLOCK_SIZE], tl.float32)
        for start in range(0, n_cols, BLOCK_SIZE):
            cols = start + offsets
            x = tl.load(row_ptr + cols, mask=cols < n_cols, other=-float("inf")).to(tl.float32)
            new_max = tl.maximum(lane_max, x)
            # lanes that have seen only masked (-inf) values keep max -inf and sum 0
            safe_max = tl.where(new_max == -float("inf"), 0.0, new_max)
            lane_sum = lane_sum * tl.exp(lane_max - safe_max) + tl.exp(x - safe_max)
            lane_max = new_max
        row_max = tl.max(lane_max, axis=0)
        scaled = tl.where(lane_max == -float("inf"), 0.0, lane_sum * tl.exp(lane_max - row_max))
        target_logit = tl.load(row_ptr + target).to(tl.float32)
        loss = row_max + tl.log(tl.sum(scaled, axis=0)) - target_logit
    tl.store(loss_ptr + row, loss)


def cross_entropy(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    logits = logits.contiguous()
    targets = targets.contiguous()
    n_rows, n_cols = logits.shape
    loss = torch.empty(n_rows, dtype=torch.float32, device=logits.device)
    cross_entropy_kernel[(n_rows,)](logits, targets, loss, logits.stride(0), n_cols, IGNORE_INDEX,
                                    BLOCK_SIZE=BLOCK_SIZE, num_warps=NUM_WARPS)
    return loss
