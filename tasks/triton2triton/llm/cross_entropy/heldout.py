"""Held-out cases: hidden from the agent (listed in hidden_files), used to measure generalization."""

from aka.harness import Case

CASES = [
    Case.make(rows=8192, vocab=32064, dtype="float16"),
    Case.make(rows=1500, vocab=50257, dtype="float32"),
    Case.make(rows=777, vocab=151936, dtype="bfloat16"),
    Case.make(rows=4096, vocab=49152, dtype="bfloat16"),
]
CI_CASES = [Case.make(rows=5, vocab=3001, dtype="float16"), Case.make(rows=7, vocab=129, dtype="float32")]
