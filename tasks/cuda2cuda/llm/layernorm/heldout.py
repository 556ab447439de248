"""Held-out cases: hidden from the agent (listed in hidden_files), used to measure generalization."""

from aka.harness import Case

CASES = [
    Case.make(rows=3000, hidden=2048, dtype="float32"),
    Case.make(rows=10000, hidden=1001, dtype="float32"),
    Case.make(rows=1024, hidden=12288, dtype="float32"),
    Case.make(rows=777, hidden=5120, dtype="float32"),
]
CI_CASES = [Case.make(rows=2, hidden=1025, dtype="float32"), Case.make(rows=5, hidden=7, dtype="float32")]
