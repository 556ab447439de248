"""Held-out cases: hidden from the agent (listed in hidden_files), used to measure generalization."""

from aka.harness import Case


def _case(num_seqs: int, num_heads: int, num_kv_heads: int, head_dim: int, max_len: int, dtype: str) -> Case:
    return Case.make(num_seqs=num_seqs, num_heads=num_heads, num_kv_heads=num_kv_heads, head_dim=head_dim,
                     max_len=max_len, dtype=dtype)


CASES = [
    _case(48, 32, 8, 128, 1500, "bfloat16"),
    _case(8, 64, 8, 128, 8191, "float16"),
    _case(100, 28, 4, 128, 777, "bfloat16"),
    _case(40, 16, 8, 64, 2049, "float16"),
]
CI_CASES = [_case(2, 8, 1, 16, 45, "bfloat16"), _case(4, 2, 1, 32, 17, "float16")]
