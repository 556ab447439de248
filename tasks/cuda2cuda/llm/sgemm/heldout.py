"""Held-out cases: hidden from the agent (listed in hidden_files), used to measure generalization."""

from aka.harness import Case

CASES = [
    Case.make(m=777, n=1333, k=1999, dtype="float32"),
    Case.make(m=3001, n=513, k=1024, dtype="float32"),
    Case.make(m=2500, n=2500, k=300, dtype="float32"),
    Case.make(m=1024, n=1024, k=3001, dtype="float32"),
]
CI_CASES = [Case.make(m=31, n=9, k=17, dtype="float32"), Case.make(m=5, n=33, k=32, dtype="float32")]
