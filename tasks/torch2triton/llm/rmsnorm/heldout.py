"""Held-out cases: hidden from the agent (listed in hidden_files), used to measure generalization."""

from aka.harness import Case

CASES = [
    Case.make(rows=1024, hidden=3072, dtype="float16"),    # Llama-3.2-3B
    Case.make(rows=5000, hidden=2560, dtype="bfloat16"),
    Case.make(rows=777, hidden=6144, dtype="float32"),
    Case.make(rows=2047, hidden=16384, dtype="bfloat16"),  # Llama-3.1-405B hidden size
    Case.make(rows=6000, hidden=1031, dtype="float16"),
]
CI_CASES = [Case.make(rows=5, hidden=777, dtype="bfloat16"), Case.make(rows=2, hidden=2049, dtype="float16")]
