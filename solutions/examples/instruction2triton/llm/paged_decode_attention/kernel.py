"""Paged decode attention (vLLM style) in Triton: flash-decoding over a paged KV cache.

Why it is fast (vs. the PyTorch reference, which gathers every table entry of every sequence into
float32 copies, pads to max_len and runs two einsums and a softmax):
- every K/V row of a sequence's live tokens is read exactly once, straight from the paged cache
  (no gathered copy, nothing past seq_len): the kernel moves about the minimum bytes;
- all g query heads that share a kv head are handled by one program (q padded to 16 rows), so
  q.K^T and p.V are tl.dot tensor-core products and K/V are never re-read per query head;
- sequences are split into PARTITION_SIZE-token partitions (flash-decoding) so that even 256
  (sequence, kv head) pairs fill 132 SMs; a tiny second kernel merges the partial softmax states.
  Partitions past a sequence's length exit at once (the grid uses max_blocks: no host sync).
"""

import os

import torch
import triton
import triton.language as tl

# Launch knobs (an autotuner edits these lines).
PARTITION_SIZE = 512
BLOCK_N = 64
NUM_WARPS = 4

# Triton's CPU interpreter multiplies bfloat16 tl.dot operands as raw uint16 bits (wrong results);
# under TRITON_INTERPRET=1 the operands are upcast to float32 first. No effect on the GPU.
INTERPRET = os.environ.get("TRITON_INTERPRET", "0") == "1"


@triton.jit
def _dot(a, b, UPCAST: tl.constexpr):
    if UPCAST:
        return tl.dot(a.to(tl.float32), b.to(tl.float32))
    return tl.dot(a, b)


@triton.jit
def paged_decode_attention_kernel(q_ptr, k_cache_ptr, v_cache_ptr, block_tables_ptr, seq_lens_ptr, out_ptr,
                                  m_ptr, l_ptr, acc_ptr, qk_scale, max_blocks, num_splits,
                                  NUM_HEADS: tl.constexpr, NUM_KV_HEADS: tl.constexpr, GROUP: tl.constexpr,
                                  G_PAD: tl.constexpr, HEAD_DIM: tl.constexpr, BLOCK_SIZE: tl.constexpr,
                                  BLOCK_N: tl.constexpr, PARTITION: tl.constexpr, SPLIT: tl.constexpr,
                                  UPCAST: tl.constexpr):
    seq = tl.program_id(0)
    kv = tl.program_id(1)
    split = tl.program_id(2)
    seq_len = tl.load(seq_lens_ptr + seq)
    start = split * PARTITION
    end = tl.minimum(start + PARTITION, seq_len)

    offs_g = tl.arange(0, G_PAD)
    offs_d = tl.arange(0, HEAD_DIM)
    g_mask = offs_g < GROUP
    heads = kv * GROUP + offs_g
    q = tl.load(q_ptr + (seq * NUM_HEADS + heads)[:, None] * HEAD_DIM + offs_d[None, :], mask=g_mask[:, None],
                other=0.0)

    m_i = tl.full([G_PAD], float("-inf"), dtype=tl.float32)
    l_i = tl.zeros([G_PAD], dtype=tl.float32)
    acc = tl.zeros([G_PAD, HEAD_DIM], dtype=tl.float32)
    table = block_tables_ptr + seq.to(tl.int64) * max_blocks
    for t0 in tl.range(start, end, BLOCK_N):
        toks = t0 + tl.arange(0, BLOCK_N)
        t_mask = toks < end
        blocks = tl.load(table + toks // BLOCK_SIZE, mask=t_mask, other=0).to(tl.int64)
        rows = (blocks * BLOCK_SIZE + toks % BLOCK_SIZE) * NUM_KV_HEADS + kv
        offsets = rows[:, None] * HEAD_DIM + offs_d[None, :]
        k = tl.load(k_cache_ptr + offsets, mask=t_mask[:, None], other=0.0)
        s = _dot(q, tl.trans(k), UPCAST) * qk_scale
        s = tl.where(t_mask[None, :], s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, 1))
        p = tl.math.exp2(s - m_new[:, None])
        alpha = tl.math.exp2(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, 1)
        v = tl.load(v_cache_ptr + offsets, mask=t_mask[:, None], other=0.0)
        acc = acc * alpha[:, None] + _dot(p.to(v.dtype), v, UPCAST)
        m_i = m_new

    if SPLIT:
        live = g_mask & (start + offs_g * 0 < seq_len)  # (a tensor compare: the interpreter rejects scalar masks)
        state = (seq * NUM_HEADS + heads) * num_splits + split
        tl.store(m_ptr + state, m_i, mask=live)
        tl.store(l_ptr + state, l_i, mask=live)
        tl.store(acc_ptr + state[:, None] * HEAD_DIM + offs_d[None, :], acc, mask=live[:, None])
    else:
        out = acc / l_i[:, None]
        tl.store(out_ptr + (seq * NUM_HEADS + heads)[:, None] * HEAD_DIM + offs_d[None, :],
                 out.to(out_ptr.dtype.element_ty), mask=g_mask[:, None])


@triton.jit
def _merge_partitions_kernel(m_ptr, l_ptr, acc_ptr, seq_lens_ptr, out_ptr, num_splits,
                             NUM_HEADS: tl.constexpr, HEAD_DIM: tl.constexpr, PARTITION: tl.constexpr,
                             SPLITS_PAD: tl.constexpr):
    seq = tl.program_id(0)
    head = tl.program_id(1)
    live_splits = tl.cdiv(tl.load(seq_lens_ptr + seq), PARTITION)
    offs_s = tl.arange(0, SPLITS_PAD)
    offs_d = tl.arange(0, HEAD_DIM)
    s_mask = offs_s < live_splits
    state = (seq * NUM_HEADS + head) * num_splits + offs_s
    m = tl.load(m_ptr + state, mask=s_mask, other=float("-inf"))
    l_part = tl.load(l_ptr + state, mask=s_mask, other=0.0)
    acc = tl.load(acc_ptr + state[:, None] * HEAD_DIM + offs_d[None, :], mask=s_mask[:, None], other=0.0)
    weight = tl.where(s_mask, tl.math.exp2(m - tl.max(m, 0)), 0.0)
    out = tl.sum(acc * weight[:, None], 0) / tl.sum(l_part * weight, 0)
    tl.store(out_ptr + (seq * NUM_HEADS + head) * HEAD_DIM + offs_d, out.to(out_ptr.dtype.element_ty))


def paged_decode_attention(q: torch.Tensor, key_cache: torch.Tensor, value_cache: torch.Tensor,
                           block_tables: torch.Tensor, seq_lens: torch.Tensor) -> torch.Tensor:
    num_seqs, num_heads, head_dim = q.shape
    _, block_size, num_kv_heads, _ = key_cache.shape
    max_blocks = block_tables.shape[1]
    group = num_heads // num_kv_heads
    num_splits = triton.cdiv(max_blocks * block_size, PARTITION_SIZE)
    split = num_splits > 1
    out = torch.empty_like(q)
    if split:
        m = torch.empty((num_seqs, num_heads, num_splits), dtype=torch.float32, device=q.device)
        l_part = torch.empty_like(m)
        acc = torch.empty((num_seqs, num_heads, num_splits, head_dim), dtype=torch.float32, device=q.device)
    else:
        m = l_part = acc = out  # unused
    qk_scale = 1.4426950408889634 / (head_dim ** 0.5)
    paged_decode_attention_kernel[(num_seqs, num_kv_heads, num_splits)](
        q, key_cache, value_cache, block_tables, seq_lens, out, m, l_part, acc, qk_scale, max_blocks, num_splits,
        NUM_HEADS=num_heads, NUM_KV_HEADS=num_kv_heads, GROUP=group, G_PAD=max(16, triton.next_power_of_2(group)),
        HEAD_DIM=head_dim, BLOCK_SIZE=block_size, BLOCK_N=BLOCK_N, PARTITION=PARTITION_SIZE, SPLIT=split,
        UPCAST=INTERPRET, num_warps=NUM_WARPS)
    if split:
        _merge_partitions_kernel[(num_seqs, num_heads)](
            m, l_part, acc, seq_lens, out, num_splits, NUM_HEADS=num_heads, HEAD_DIM=head_dim,
            PARTITION=PARTITION_SIZE, SPLITS_PAD=triton.next_power_of_2(num_splits), num_warps=4)
    return out
