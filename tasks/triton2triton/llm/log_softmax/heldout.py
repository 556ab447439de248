"""Held-out cases: hidden from the agent (listed in hidden_files), used to measure generalization."""

from aka.harness import Case

CASES = [
    Case.make(rows=16384, cols=1000, dtype="float32"),
    Case.make(rows=4096, cols=12289, dtype="float16"),
    Case.make(rows=2000, cols=65536, dtype="bfloat16"),
    Case.make(rows=777, cols=151936, dtype="float32"),
]
CI_CASES = [Case.make(rows=2, cols=3001, dtype="float16"), Case.make(rows=5, cols=129, dtype="bfloat16")]
