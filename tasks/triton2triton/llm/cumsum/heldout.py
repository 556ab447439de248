"""Held-out cases: hidden from the agent (listed in hidden_files), used to measure generalization."""

from aka.harness import Case

CASES = [
    Case.make(rows=32768, n=1000, dtype="float32"),
    Case.make(rows=4096, n=8191, dtype="bfloat16"),
    Case.make(rows=1500, n=20000, dtype="float16"),
    Case.make(rows=300, n=131072, dtype="bfloat16"),
]
CI_CASES = [Case.make(rows=2, n=3001, dtype="float16"), Case.make(rows=5, n=129, dtype="float32")]
