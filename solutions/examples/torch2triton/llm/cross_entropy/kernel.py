"""Per-token cross-entropy loss in Triton, one pass with an online logsumexp.

Why it is faster than the starting kernel (and than the reference, which upcasts the logits to a
float32 copy and runs log_softmax over it, ~16 bytes per logit):
- each logit is read exactly once: a running max m and sum s per lane are updated chunk by chunk
  (s = s * 2^(m - m_new) + 2^(x - m_new)), instead of a max pass followed by a sum pass. For
  128256-element rows (256 KB) the starter's second pass misses the L2 and doubles HBM traffic;
- chunks of 4096 elements with 8 warps (16 elements, two 16-byte loads per thread for 16-bit
  logits) put more bytes in flight per iteration than 1024 with 4 warps;
- the exponentials run in base 2 (`tl.exp2`, `tl.log2`) on logits pre-scaled by log2(e).
Its traffic is ~2 bytes per 16-bit logit, close to the floor; the reference moves ~16.
"""

import torch
import triton
import triton.language as tl

IGNORE_INDEX = -100
BLOCK_SIZE = 4096
NUM_WARPS = 8
LOG2E = tl.constexpr(1.4426950408889634)
LN2 = tl.constexpr(0.6931471805599453)


@triton.jit
def cross_entropy_kernel(logits_ptr, targets_ptr, loss_ptr, n_cols, ignore_index, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    row_ptr = logits_ptr + row * n_cols
    m = tl.full([BLOCK_SIZE], -float("inf"), dtype=tl.float32)  # running max, in log2 units
    s = tl.zeros([BLOCK_SIZE], dtype=tl.float32)                 # running sum of 2^(x - m)
    for start in range(0, n_cols, BLOCK_SIZE):
        cols = start + tl.arange(0, BLOCK_SIZE)
        x = tl.load(row_ptr + cols, mask=cols < n_cols, other=-float("inf")).to(tl.float32) * LOG2E
        m_new = tl.maximum(m, x)
        m_safe = tl.where(m_new == -float("inf"), 0.0, m_new)  # lanes that saw only padding
        s = s * tl.exp2(m - m_safe) + tl.exp2(x - m_safe)
        m = m_new
    row_max = tl.max(m, axis=0)
    row_sum = tl.sum(s * tl.exp2(m - row_max), axis=0)
    lse = (row_max + tl.log2(row_sum)) * LN2
    target = tl.load(targets_ptr + row)
    valid = target != ignore_index
    target_logit = tl.load(row_ptr + target, mask=valid, other=0.0).to(tl.float32)
    tl.store(loss_ptr + row, tl.where(valid, lse - target_logit, 0.0))


def cross_entropy(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    logits = logits.contiguous()
    n_rows, n_cols = logits.shape
    loss = torch.empty((n_rows,), dtype=torch.float32, device=logits.device)
    cross_entropy_kernel[(n_rows,)](logits, targets, loss, n_cols, IGNORE_INDEX, BLOCK_SIZE=BLOCK_SIZE,
                                    num_warps=NUM_WARPS)
    return loss
