"""Held-out cases: hidden from the agent (listed in hidden_files), used to measure generalization."""

from aka.harness import Case

CASES = [
    Case.make(rows=24576, hidden=768, dtype="float32"),
    Case.make(rows=8192, hidden=2048, dtype="float16"),
    Case.make(rows=4000, hidden=7168, dtype="float16"),
    Case.make(rows=2048, hidden=12289, dtype="bfloat16"),
]
CI_CASES = [Case.make(rows=2, hidden=3001, dtype="bfloat16"), Case.make(rows=5, hidden=129, dtype="float32")]
