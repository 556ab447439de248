"""Held-out cases: hidden from the agent (listed in hidden_files), used to measure generalization."""

from aka.harness import Case

CASES = [
    Case.make(rows=32768, cols=513, dtype="float16"),
    Case.make(rows=4096, cols=8191, dtype="float16"),
    Case.make(rows=3000, cols=16384, dtype="float32"),
    Case.make(rows=512, cols=50257, dtype="bfloat16"),
]
CI_CASES = [Case.make(rows=2, cols=3001, dtype="bfloat16"), Case.make(rows=5, cols=129, dtype="float32")]
