"""Evaluation steps of the paged decode-attention task: `python3 harness.py compile|correctness|performance`.

One query token per sequence attends over that sequence's keys and values, which live in a paged
KV cache (vLLM layout: fixed blocks of 16 tokens, a block table per sequence). The reference (and
the timed baseline) gathers each sequence's blocks with PyTorch and computes in float32.
"""


import torch

from aka.harness import Case, KernelTask, candidate_function, random_tensor, run_task

BLOCK_SIZE = 16
# (num_seqs, num_heads, num_kv_heads, head_dim, max_len, dtype): GQA groups 4, 8, 1 and 8.
SHAPES = (
    (32, 32, 8, 128, 2048, "float16"),
    (64, 64, 8, 128, 1023, "bfloat16"),
    (16, 32, 32, 128, 4001, "bfloat16"),
    (128, 16, 2, 64, 517, "float16"),
)
CI_SHAPES = ((3, 4, 2, 16, 37, "float16"), (2, 6, 2, 32, 600, "bfloat16"))


def seq_len_range(max_len: int) -> tuple[int, int]:
    """Sequence lengths are drawn from [max_len // 4, max_len]; the first sequence is max_len long."""
    return max(1, max_len // 4), max_len


def make_inputs(case: Case, generator: torch.Generator, device: torch.device) -> tuple[torch.Tensor, ...]:
    """q, key_cache, value_cache (std 1), block_tables (every entry a distinct random block), seq_lens."""
    num_seqs, num_heads, num_kv_heads, head_dim, max_len = (
        case.int_param(key) for key in ("num_seqs", "num_heads", "num_kv_heads", "head_dim", "max_len"))
    dtype = case.dtype()
    max_blocks = -(-max_len // BLOCK_SIZE)
    num_blocks = num_seqs * max_blocks + 7  # a few blocks no table points to
    q = random_tensor((num_seqs, num_heads, head_dim), dtype, generator, device)
    cache_shape = (num_blocks, BLOCK_SIZE, num_kv_heads, head_dim)
    key_cache = random_tensor(cache_shape, dtype, generator, device)
    value_cache = random_tensor(cache_shape, dtype, generator, device)
    order = torch.randperm(num_blocks, generator=generator, device=device)
    block_tables = order[: num_seqs * max_blocks].view(num_seqs, max_blocks).to(torch.int32).contiguous()
    low, high = seq_len_range(max_len)
    seq_lens = torch.randint(low, high + 1, (num_seqs,), generator=generator, device=device, dtype=torch.int32)
    seq_lens[0] = max_len
    return q, key_cache, value_cache, block_tables, seq_lens


def reference(q: torch.Tensor, key_cache: torch.Tensor, value_cache: torch.Tensor, block_tables: torch.Tensor,
              seq_lens: torch.Tensor) -> torch.Tensor:
    """Gather every sequence's blocks, mask positions >= seq_len, softmax and weighted sum in float32."""
    num_seqs, num_heads, head_dim = q.shape
    _, block_size, num_kv_heads, _ = key_cache.shape
    group = num_heads // num_kv_heads
    length = block_tables.shape[1] * block_size
    keys = key_cache[block_tables.long()].reshape(num_seqs, length, num_kv_heads, head_dim).float()
    values = value_cache[block_tables.long()].reshape(num_seqs, length, num_kv_heads, head_dim).float()
    queries = q.float().view(num_seqs, num_kv_heads, group, head_dim)
    scores = torch.einsum("skgd,sjkd->skgj", queries, keys) / head_dim ** 0.5
    past_end = torch.arange(length, device=q.device)[None, :] >= seq_lens[:, None]
    scores = scores.masked_fill(past_end[:, None, None, :], float("-inf"))
    out = torch.einsum("skgj,sjkd->skgd", torch.softmax(scores, dim=-1), values)
    return out.reshape(num_seqs, num_heads, head_dim).to(q.dtype)


def case_of(num_seqs: int, num_heads: int, num_kv_heads: int, head_dim: int, max_len: int, dtype: str) -> Case:
    return Case.make(num_seqs=num_seqs, num_heads=num_heads, num_kv_heads=num_kv_heads, head_dim=head_dim,
                     max_len=max_len, dtype=dtype)


def min_bytes(case: Case) -> int:
    """Keys and values of at least num_seqs * (max_len // 4) tokens read once (shorter sequences
    never occur), plus q read and the output written."""
    num_seqs, num_heads, num_kv_heads, head_dim = (
        case.int_param(key) for key in ("num_seqs", "num_heads", "num_kv_heads", "head_dim"))
    itemsize = case.dtype().itemsize
    low, _ = seq_len_range(case.int_param("max_len"))
    return (2 * num_seqs * low * num_kv_heads * head_dim + 2 * num_seqs * num_heads * head_dim) * itemsize


# Tolerances: the per-dtype defaults fit (fp16 1e-3/1e-3, bf16 1e-2/1.6e-2). The reference computes
# in float32 and rounds once; a kernel that accumulates in float32 (and may round p to the input
# dtype before p.v, as FlashAttention does) differs by the output's rounding (half an ulp) plus
# p-rounding noise averaged over >= max_len/4 keys, well inside atol + rtol*|o|.
TASK = KernelTask(
    name="instruction2triton/llm/paged_decode_attention",
    cases=[case_of(*shape) for shape in SHAPES],
    ci_cases=[case_of(*shape) for shape in CI_SHAPES],
    make_inputs=make_inputs,
    reference=reference,
    load_candidate=candidate_function("kernel", "paged_decode_attention"),
    min_bytes=min_bytes,
)

if __name__ == "__main__":
    raise SystemExit(run_task(TASK))
