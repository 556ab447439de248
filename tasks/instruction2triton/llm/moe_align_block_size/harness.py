"""Evaluation steps of the MoE align-block-size task: `python3 harness.py compile|correctness|performance`.

As vLLM's `moe_align_block_size`: the (token, slot) pairs routed to each expert are laid out
expert by expert, each expert's run padded to a multiple of block_size, so that a grouped GEMM can
take whole blocks of one expert. The order inside an expert is fixed (ascending flat index) and
the output sizes depend only on the shapes, so all three int32 outputs are compared exactly.
"""


import torch

from aka.harness import Case, KernelTask, candidate_function, random_tensor, run_task

# (num_tokens, topk, num_experts, block_size): Mixtral (8 experts, top-2), Qwen3-MoE (128, top-8),
# DeepSeek-V3 (256, top-8), an odd token count and block sizes 16-128.
SHAPES = (
    (4096, 8, 128, 64),
    (16384, 8, 256, 64),
    (3001, 2, 8, 128),
    (8191, 8, 64, 16),
)
CI_SHAPES = ((37, 2, 8, 16), (100, 4, 20, 32))


def output_sizes(numel: int, num_experts: int, block_size: int) -> tuple[int, int]:
    """(len(sorted_token_ids), len(expert_ids)): the worst case over all routings, as in vLLM."""
    max_padded = numel + num_experts * (block_size - 1)
    return max_padded, -(-max_padded // block_size)


def make_inputs(case: Case, generator: torch.Generator, device: torch.device) -> tuple[torch.Tensor, ...]:
    """topk_ids: each token picks `topk` distinct experts from a skewed (softmax of normal logits,
    std 1.5) popularity, so some experts get many tokens and, with few tokens, some get none."""
    num_tokens, topk, num_experts, block_size = (
        case.int_param(key) for key in ("num_tokens", "topk", "num_experts", "block_size"))
    popularity = torch.softmax(random_tensor((num_experts,), torch.float32, generator, device, scale=1.5), dim=0)
    topk_ids = torch.multinomial(popularity.expand(num_tokens, num_experts), topk, replacement=False,
                                 generator=generator)
    return (topk_ids.to(torch.int32).contiguous(), torch.tensor(num_experts, dtype=torch.int64),
            torch.tensor(block_size, dtype=torch.int64))


def reference(topk_ids: torch.Tensor, num_experts: torch.Tensor,
              block_size: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Stable sort by expert, scatter into padded per-expert runs, expert of every block (-1 past
    the end), total padded length. No host sync."""
    experts, size = int(num_experts), int(block_size)
    flat = topk_ids.reshape(-1).long()
    numel = flat.numel()
    max_padded, num_blocks = output_sizes(numel, experts, size)
    counts = torch.zeros(experts, dtype=torch.int64, device=flat.device).scatter_add_(0, flat, torch.ones_like(flat))
    padded = (counts + size - 1) // size * size
    ends = torch.cumsum(padded, 0)
    starts = ends - padded
    order = torch.argsort(flat, stable=True)
    by_expert = flat[order]
    rank = torch.arange(numel, device=flat.device) - (torch.cumsum(counts, 0) - counts)[by_expert]
    sorted_token_ids = torch.full((max_padded,), numel, dtype=torch.int32, device=flat.device)
    sorted_token_ids[starts[by_expert] + rank] = order.to(torch.int32)
    block_starts = torch.arange(num_blocks, device=flat.device) * size
    owner = torch.searchsorted(ends, block_starts, right=True)
    expert_ids = torch.where(owner < experts, owner, -1).to(torch.int32)
    return sorted_token_ids, expert_ids, ends[-1:].to(torch.int32)


def case_of(num_tokens: int, topk: int, num_experts: int, block_size: int) -> Case:
    return Case.make(num_tokens=num_tokens, topk=topk, num_experts=num_experts, block_size=block_size)


def min_bytes(case: Case) -> int:
    """topk_ids read once; sorted_token_ids, expert_ids and the total written once (int32)."""
    numel = case.int_param("num_tokens") * case.int_param("topk")
    max_padded, num_blocks = output_sizes(numel, case.int_param("num_experts"), case.int_param("block_size"))
    return 4 * (numel + max_padded + num_blocks + 1)


# Tolerances: all outputs are int32 and compared exactly (the harness's default for integers).
TASK = KernelTask(
    name="instruction2triton/llm/moe_align_block_size",
    cases=[case_of(*shape) for shape in SHAPES],
    ci_cases=[case_of(*shape) for shape in CI_SHAPES],
    make_inputs=make_inputs,
    reference=reference,
    load_candidate=candidate_function("kernel", "moe_align_block_size"),
    min_bytes=min_bytes,
)

if __name__ == "__main__":
    raise SystemExit(run_task(TASK))
