"""Held-out cases: hidden from the agent (listed in hidden_files), used to measure generalization."""

from aka.harness import Case

CASES = [
    Case.make(rows=3333, cols=3335, dtype="float32"),
    Case.make(rows=100003, cols=65, dtype="float32"),
    Case.make(rows=513, cols=16385, dtype="float32"),
    Case.make(rows=2048, cols=6144, dtype="float32"),
]
CI_CASES = [Case.make(rows=1, cols=97, dtype="float32"), Case.make(rows=40, cols=31, dtype="float32")]
