"""Held-out cases: hidden from the agent (listed in hidden_files), used to measure generalization."""

from aka.harness import Case

CASES = [
    Case.make(tokens=1000, hidden=4096, dtype="float16"),
    Case.make(tokens=8192, hidden=2048, dtype="float32"),
    Case.make(tokens=3000, hidden=6144, dtype="bfloat16"),
    Case.make(tokens=1024, hidden=12289, dtype="bfloat16"),
]
CI_CASES = [Case.make(tokens=2, hidden=3001, dtype="bfloat16"), Case.make(tokens=5, hidden=129, dtype="float16")]
