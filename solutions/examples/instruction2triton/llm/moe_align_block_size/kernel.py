"""MoE align-block-size (vLLM `moe_align_block_size`) in Triton: two launches, no host sync.

Why it is fast (vs. the PyTorch reference: scatter_add histogram, cumsums, a stable argsort of
all (token, slot) pairs, index arithmetic, a scatter, a fill and a searchsorted, ~12 launches):
- pass 1 (`_chunk_histogram_kernel`): one program per CHUNK of flat indices counts its experts
  with tl.histogram and fills its share of sorted_token_ids with the padding value;
- pass 2 (`moe_align_block_size_kernel`): every program rebuilds the per-expert totals and the
  counts of the chunks before it from the tiny (chunks x experts) count table (L2-resident), so
  no third launch is needed for the prefix sums; it then sorts its chunk by (expert, index) with
  one bitonic tl.sort, which gives each element its rank inside its expert run directly, and
  scatters the indices to their final slots. It also writes its share of expert_ids (a
  vectorised count of run ends <= block start) and program 0 the padded total.
"""

import torch
import triton
import triton.language as tl

# Launch knobs (an autotuner edits these lines).
CHUNK = 1024
NUM_WARPS = 4


@triton.jit
def _chunk_histogram_kernel(ids_ptr, counts_ptr, sorted_ptr, numel, max_padded, fill_per_program,
                            E_PAD: tl.constexpr, CHUNK: tl.constexpr):
    chunk = tl.program_id(0)
    offs = chunk * CHUNK + tl.arange(0, CHUNK)
    live = offs < numel
    ids = tl.load(ids_ptr + offs, mask=live, other=0)
    tl.store(counts_ptr + chunk * E_PAD + tl.arange(0, E_PAD), tl.histogram(ids, E_PAD, mask=live))
    lo = chunk * fill_per_program
    hi = tl.minimum(lo + fill_per_program, max_padded)
    for start in tl.range(lo, hi, CHUNK):
        slots = start + tl.arange(0, CHUNK)
        tl.store(sorted_ptr + slots, tl.full([CHUNK], 0, tl.int32) + numel, mask=slots < hi)


@triton.jit
def moe_align_block_size_kernel(ids_ptr, counts_ptr, sorted_ptr, expert_ids_ptr, total_ptr, numel, num_chunks,
                                num_experts, block_size, num_blocks, blocks_per_program,
                                E_PAD: tl.constexpr, CHUNK: tl.constexpr, ROWS: tl.constexpr,
                                BLOCK_TILE: tl.constexpr):
    chunk = tl.program_id(0)
    experts = tl.arange(0, E_PAD)
    totals = tl.zeros([E_PAD], dtype=tl.int32)
    before = tl.zeros([E_PAD], dtype=tl.int32)
    for r0 in tl.range(0, num_chunks, ROWS):
        rows = r0 + tl.arange(0, ROWS)
        counts = tl.load(counts_ptr + rows[:, None] * E_PAD + experts[None, :], mask=rows[:, None] < num_chunks,
                         other=0)
        totals += tl.sum(counts, axis=0)
        before += tl.sum(tl.where(rows[:, None] < chunk, counts, 0), axis=0)
    padded = (totals + block_size - 1) // block_size * block_size
    ends = tl.cumsum(padded, axis=0)
    starts = ends - padded

    # This chunk: sort (expert, local index) keys; an element's rank in the sorted chunk minus the
    # number of chunk elements with a smaller expert is its rank inside its expert's run here.
    offs = chunk * CHUNK + tl.arange(0, CHUNK)
    live = offs < numel
    ids = tl.load(ids_ptr + offs, mask=live, other=0)
    mine = tl.load(counts_ptr + chunk * E_PAD + experts)
    offset = starts + before - (tl.cumsum(mine, axis=0) - mine)  # per expert: slot of rank 0 in this chunk
    keys = tl.where(live, ids * CHUNK + tl.arange(0, CHUNK), E_PAD * CHUNK)
    keys = tl.sort(keys)
    expert = keys // CHUNK
    ok = expert < num_experts
    slot = tl.gather(offset, tl.where(ok, expert, 0), axis=0) + tl.arange(0, CHUNK)
    tl.store(sorted_ptr + slot, chunk * CHUNK + keys % CHUNK, mask=ok)

    # expert_ids for this program's share of blocks: the owner of block b is the number of runs
    # that end at or before b * block_size (-1 past the padded total).
    total = tl.sum(padded, axis=0)
    ends = tl.where(experts < num_experts, ends, total + 1)
    b_lo = chunk * blocks_per_program
    b_hi = tl.minimum(b_lo + blocks_per_program, num_blocks)
    for b0 in tl.range(b_lo, b_hi, BLOCK_TILE):
        blocks = b0 + tl.arange(0, BLOCK_TILE)
        owner = tl.sum((ends[None, :] <= blocks[:, None] * block_size).to(tl.int32), axis=1)
        owner = tl.where(blocks * block_size < total, owner, -1)
        tl.store(expert_ids_ptr + blocks, owner, mask=blocks < b_hi)
    if chunk == 0:
        tl.store(total_ptr + tl.arange(0, 1), tl.zeros([1], dtype=tl.int32) + total)


def moe_align_block_size(topk_ids: torch.Tensor, num_experts: torch.Tensor,
                         block_size: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    experts, size = int(num_experts), int(block_size)
    numel = topk_ids.numel()
    max_padded = numel + experts * (size - 1)
    num_blocks = triton.cdiv(max_padded, size)
    device = topk_ids.device
    sorted_token_ids = torch.empty(max_padded, dtype=torch.int32, device=device)
    expert_ids = torch.empty(num_blocks, dtype=torch.int32, device=device)
    total = torch.empty(1, dtype=torch.int32, device=device)
    chunk = min(CHUNK, max(16, triton.next_power_of_2(numel)))  # tiny inputs: one small chunk
    num_chunks = triton.cdiv(numel, chunk)
    e_pad = triton.next_power_of_2(experts)
    counts = torch.empty((num_chunks, e_pad), dtype=torch.int32, device=device)
    _chunk_histogram_kernel[(num_chunks,)](topk_ids, counts, sorted_token_ids, numel, max_padded,
                                           triton.cdiv(max_padded, num_chunks), E_PAD=e_pad, CHUNK=chunk,
                                           num_warps=NUM_WARPS)
    moe_align_block_size_kernel[(num_chunks,)](
        topk_ids, counts, sorted_token_ids, expert_ids, total, numel, num_chunks, experts, size, num_blocks,
        triton.cdiv(num_blocks, num_chunks), E_PAD=e_pad, CHUNK=chunk, ROWS=max(1, min(16, 4096 // e_pad)),
        BLOCK_TILE=max(1, min(64, 4096 // e_pad)), num_warps=NUM_WARPS)
    return sorted_token_ids, expert_ids, total
