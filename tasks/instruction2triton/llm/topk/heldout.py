"""Held-out cases: hidden from the agent (listed in hidden_files), used to measure generalization."""

from aka.harness import Case


def _case(rows: int, n: int, k: int, dtype: str) -> Case:
    return Case.make(rows=rows, n=n, k=k, dtype=dtype)


CASES = [
    _case(32, 151936, 50, "float32"),
    _case(2000, 2047, 16, "float16"),
    _case(3000, 5000, 4, "bfloat16"),
    _case(256, 65537, 1, "float32"),
]
CI_CASES = [_case(2, 513, 16, "float16"), _case(3, 40, 2, "float32")]
