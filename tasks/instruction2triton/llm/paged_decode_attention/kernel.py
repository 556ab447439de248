"""Paged decode attention (vLLM style): write it in Triton (no kernel is given).

`paged_decode_attention(q, key_cache, value_cache, block_tables, seq_lens)`:
- q: (num_seqs, num_heads, head_dim), one query token per sequence, float16 or bfloat16;
- key_cache, value_cache: (num_blocks, 16, num_kv_heads, head_dim), same dtype; token t of a
  sequence lives in block block_tables[s, t // 16] at row t % 16;
- block_tables: (num_seqs, max_blocks) int32; seq_lens: (num_seqs,) int32, 1 <= seq_len <=
  16 * max_blocks;
- query head h reads kv head h // (num_heads // num_kv_heads) (grouped-query attention).
Returns a new (num_seqs, num_heads, head_dim) tensor of q's dtype:
    o[s, h] = softmax_j(q[s, h] . k_j / sqrt(head_dim)) @ v_j over the tokens j < seq_lens[s].
The work must be done by a @triton.jit kernel named `paged_decode_attention_kernel`, launched on
every call (more kernels, e.g. a reduction over sequence splits, are allowed). The full contract is
in the task's instructions.
"""

import torch
import triton  # noqa: F401  (for the kernel you write)
import triton.language as tl  # noqa: F401

# Launch knobs: keep these module-level names and use them (an autotuner edits the lines):
# tokens per program (sequence split), tokens per inner step, warps.
PARTITION_SIZE = 512
BLOCK_N = 32
NUM_WARPS = 4

# Required: @triton.jit def paged_decode_attention_kernel(...): computes o, launched below.


def paged_decode_attention(q: torch.Tensor, key_cache: torch.Tensor, value_cache: torch.Tensor,
                           block_tables: torch.Tensor, seq_lens: torch.Tensor) -> torch.Tensor:
    raise NotImplementedError("write the Triton kernel paged_decode_attention_kernel")
