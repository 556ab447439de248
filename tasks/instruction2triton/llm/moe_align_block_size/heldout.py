"""Held-out cases: hidden from the agent (listed in hidden_files), used to measure generalization."""

from aka.harness import Case


def _case(num_tokens: int, topk: int, num_experts: int, block_size: int) -> Case:
    return Case.make(num_tokens=num_tokens, topk=topk, num_experts=num_experts, block_size=block_size)


CASES = [
    _case(2048, 6, 160, 64),
    _case(32768, 2, 8, 128),
    _case(777, 8, 256, 32),
    _case(12000, 4, 60, 256),
]
CI_CASES = [_case(13, 6, 64, 16), _case(64, 1, 3, 64)]
