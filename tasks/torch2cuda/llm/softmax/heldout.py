"""Held-out cases: hidden from the agent (listed in hidden_files), used to measure generalization."""

from aka.harness import Case

CASES = [
    Case.make(rows=3000, cols=2047, dtype="float32"),
    Case.make(rows=777, cols=50000, dtype="float32"),
    Case.make(rows=40000, cols=100, dtype="float32"),
    Case.make(rows=5000, cols=6001, dtype="float32"),
]
CI_CASES = [Case.make(rows=2, cols=513, dtype="float32"), Case.make(rows=5, cols=9, dtype="float32")]
