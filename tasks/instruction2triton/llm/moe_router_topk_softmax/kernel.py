"""MoE router top-k softmax (as vLLM's `topk_softmax`, renormalize=False): write it in Triton.

`moe_router_topk_softmax(gating_logits, k)`: gating_logits is a contiguous (tokens, num_experts)
CUDA tensor (float32 or bfloat16); k is a 0-dim int64 CPU tensor (read it with int(k)). Returns a
tuple of two new contiguous (tokens, k) tensors:
- topk_weights, float32: the k largest of softmax(gating_logits[t].float()) over ALL experts, in
  descending order (not renormalised over the k);
- topk_ids, int32: the expert index of each weight.
The logits of a row are pairwise distinct. The work must be done by a @triton.jit kernel named
`moe_router_topk_softmax_kernel`, launched on every call. The full contract is in the task's
instructions.
"""

import torch
import triton  # noqa: F401  (for the kernel you write)
import triton.language as tl  # noqa: F401

# Launch knobs: keep these module-level names and use them (an autotuner edits the lines):
# tokens per program, warps.
BLOCK_T = 4
NUM_WARPS = 4

# Required: @triton.jit def moe_router_topk_softmax_kernel(...): computes both outputs, launched below.


def moe_router_topk_softmax(gating_logits: torch.Tensor, k: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    raise NotImplementedError("write the Triton kernel moe_router_topk_softmax_kernel")
