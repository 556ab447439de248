"""Held-out cases: hidden from the agent (listed in hidden_files), used to measure generalization."""

from aka.harness import Case


def _case(batch: int, heads: int, seqlen: int, head_dim: int, dtype: str) -> Case:
    return Case.make(batch=batch, heads=heads, seqlen=seqlen, head_dim=head_dim, dtype=dtype)


CASES = [
    _case(3, 12, 1537, 64, "float16"),
    _case(1, 32, 3001, 128, "bfloat16"),
    _case(6, 8, 777, 128, "float16"),
    _case(2, 20, 2500, 64, "bfloat16"),
]
CI_CASES = [_case(1, 1, 23, 16, "bfloat16"), _case(2, 2, 13, 16, "float16")]
