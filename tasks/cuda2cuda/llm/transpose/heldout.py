"""Held-out cases: hidden from the agent (listed in hidden_files), used to measure generalization."""

from aka.harness import Case

CASES = [
    Case.make(rows=3001, cols=7001, dtype="float32"),
    Case.make(rows=65537, cols=129, dtype="float32"),
    Case.make(rows=2500, cols=2501, dtype="float32"),
    Case.make(rows=257, cols=65535, dtype="float32"),
]
CI_CASES = [Case.make(rows=97, cols=1, dtype="float32"), Case.make(rows=31, cols=40, dtype="float32")]
