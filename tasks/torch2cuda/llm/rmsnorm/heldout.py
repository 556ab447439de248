"""Held-out cases: hidden from the agent (listed in hidden_files), used to measure generalization."""

from aka.harness import Case

CASES = [
    Case.make(rows=1537, hidden=2048, dtype="float32"),
    Case.make(rows=3000, hidden=6144, dtype="float16"),
    Case.make(rows=5003, hidden=1025, dtype="float16"),
    Case.make(rows=777, hidden=12288, dtype="float32"),
    Case.make(rows=2500, hidden=14336, dtype="float16"),
]
CI_CASES = [Case.make(rows=5, hidden=33, dtype="float32"), Case.make(rows=2, hidden=136, dtype="float16")]
