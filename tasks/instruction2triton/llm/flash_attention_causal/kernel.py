"""Causal scaled-dot-product attention, forward pass: write it in Triton (no kernel is given).

`flash_attention_causal(q, k, v)` takes three contiguous CUDA tensors of shape
(batch, heads, seqlen, head_dim), all float16 or all bfloat16, head_dim a power of two in
{16, 32, 64, 128}, any seqlen >= 1, and returns a new contiguous tensor `o` of the same shape and
dtype:

    s[i, j] = (q[i] . k[j]) / sqrt(head_dim)       for j <= i (causal), masked out for j > i
    p[i, :] = softmax(s[i, :])                     (over the keys j <= i, in float32)
    o[i]    = sum_j p[i, j] * v[j]

per (batch, head). The work must be done by a @triton.jit kernel named
`flash_attention_causal_kernel`, launched on every call; `flash_attention_causal` may only
allocate the output and launch kernels (no torch math). The full contract is in the task's
instructions.
"""

import torch
import triton  # noqa: F401  (for the kernel you write)
import triton.language as tl  # noqa: F401

# Launch knobs: keep these module-level names and use them for the launch (an autotuner edits
# the `NAME = value` lines): query rows per program, key columns per inner step, warps, stages.
BLOCK_M = 64
BLOCK_N = 64
NUM_WARPS = 4
NUM_STAGES = 2

# Required: @triton.jit def flash_attention_causal_kernel(...): computes o, launched below.


def flash_attention_causal(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    raise NotImplementedError("write the Triton kernel flash_attention_causal_kernel")
