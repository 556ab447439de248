"""Held-out cases: hidden from the agent (listed in hidden_files), used to measure generalization."""

from aka.harness import Case

CASES = [
    Case.make(rows=30000, n=513, dtype="float32"),
    Case.make(rows=4096, n=8191, dtype="float32"),
    Case.make(rows=500, n=40000, dtype="float32"),
    Case.make(rows=100000, n=63, dtype="float32"),
]
CI_CASES = [Case.make(rows=3, n=2051, dtype="float32"), Case.make(rows=9, n=5, dtype="float32")]
