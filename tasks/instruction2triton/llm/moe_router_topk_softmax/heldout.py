"""Held-out cases: hidden from the agent (listed in hidden_files), used to measure generalization."""

from aka.harness import Case


def _case(tokens: int, num_experts: int, k: int, dtype: str) -> Case:
    return Case.make(tokens=tokens, num_experts=num_experts, k=k, dtype=dtype)


CASES = [
    _case(2048, 160, 6, "bfloat16"),
    _case(50000, 16, 4, "float32"),
    _case(7777, 32, 8, "bfloat16"),
    _case(1000, 512, 16, "float32"),
]
CI_CASES = [_case(3, 16, 1, "bfloat16"), _case(9, 33, 3, "float32")]
