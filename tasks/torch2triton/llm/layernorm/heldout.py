"""Held-out cases: hidden from the agent (listed in hidden_files), used to measure generalization."""

from aka.harness import Case

CASES = [
    Case.make(rows=20000, hidden=768, dtype="bfloat16"),   # BERT-base / GPT-2 width
    Case.make(rows=4097, hidden=2560, dtype="float16"),
    Case.make(rows=1234, hidden=5120, dtype="float32"),
    Case.make(rows=3000, hidden=12288, dtype="bfloat16"),  # GPT-3 175B width
    Case.make(rows=10000, hidden=1281, dtype="float16"),
]
CI_CASES = [Case.make(rows=5, hidden=777, dtype="bfloat16"), Case.make(rows=2, hidden=2049, dtype="float32")]
