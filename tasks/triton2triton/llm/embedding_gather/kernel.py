"""Embedding lookup out[i] = weight[ids[i]] in Triton: the starting point to optimise.

`embedding_gather(ids, weight)` takes int64 token ids (n_tokens,) and a contiguous embedding table
weight (vocab, hidden) of float32, float16 or bfloat16, and returns a new (n_tokens, hidden) tensor
of weight's dtype whose row i is a bit-exact copy of row ids[i] of the table.
"""

import torch
import triton
import triton.language as tl

BLOCK_SIZE = 128
NUM_WARPS = 4


@triton.jit
def embedding_gather_kernel(ids_ptr, weight_ptr, out_ptr, hidden, stride_w, stride_o,
                            BLOCK_SIZE: tl.constexpr):
    # One program per token, walking its row in BLOCK_SIZE chunks.
    token = tl.program_id(axis=0)
    row = tl.load(ids_ptr + token)
    src = weight_ptr + row * stride_w
    dst = out_ptr + token.to(tl.int64) * stride_o
    for start in range(0, hidden, BLOCK_SIZE):
        cols = start + tl.arange(0, BLOCK_SIZE)
        mask = cols < hidden
        values = tl.load(src + cols, mask=mask)
        tl.store(dst + cols, values, mask=mask)


def embedding_gather(ids: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    ids, weight = ids.contiguous(), weight.contiguous()
    n_tokens = ids.shape[0]
    hidden = weight.shape[1]
    out = torch.empty((n_tokens, hidden), dtype=weight.dtype, device=weight.device)
    embedding_gather_kernel[(n_tokens,)](ids, weight, out, hidden, weight.stride(0), out.stride(0),
                                         BLOCK_SIZE=BLOCK_SIZE, num_warps=NUM_WARPS)
    return out
