"""MoE align-block-size (as vLLM's `moe_align_block_size`): write it in Triton (no kernel is given).

`moe_align_block_size(topk_ids, num_experts, block_size)`: topk_ids is a contiguous
(num_tokens, topk) int32 CUDA tensor of expert ids in [0, num_experts); num_experts and
block_size are 0-dim int64 CPU tensors (read them with int()). With numel = topk_ids.numel() and
the flat index i = token * topk + slot, return three new int32 tensors:
- sorted_token_ids, length numel + num_experts * (block_size - 1): for expert 0, 1, ... in turn,
  the flat indices routed to it in ascending order, each expert's run padded with the value numel
  to a multiple of block_size (an expert with no tokens gets no run); all slots after the last
  run hold numel too;
- expert_ids, length ceil(len(sorted_token_ids) / block_size): the expert owning each block of
  block_size slots, -1 for blocks past the padded total;
- num_tokens_post_padded, shape (1,): the padded total (sum of the padded run lengths).
The work must be done by a @triton.jit kernel named `moe_align_block_size_kernel`, launched on
every call (more kernels are allowed). The full contract is in the task's instructions.
"""

import torch
import triton  # noqa: F401  (for the kernel you write)
import triton.language as tl  # noqa: F401

# Launch knobs: keep these module-level names and use them (an autotuner edits the lines):
# CHUNK: flat indices per program, NUM_WARPS.
CHUNK = 1024
NUM_WARPS = 4

# Required: @triton.jit def moe_align_block_size_kernel(...): builds the outputs, launched below.


def moe_align_block_size(topk_ids: torch.Tensor, num_experts: torch.Tensor,
                         block_size: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    raise NotImplementedError("write the Triton kernel moe_align_block_size_kernel")
