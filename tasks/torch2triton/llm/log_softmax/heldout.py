"""Held-out cases: hidden from the agent (listed in hidden_files), used to measure generalization."""

from aka.harness import Case

CASES = [
    Case.make(rows=2000, cols=32000, dtype="float16"),
    Case.make(rows=513, cols=151936, dtype="bfloat16"),   # Qwen2 vocabulary
    Case.make(rows=3000, cols=30522, dtype="float32"),    # BERT vocabulary
    Case.make(rows=30000, cols=777, dtype="bfloat16"),
    Case.make(rows=4096, cols=8191, dtype="float16"),
]
CI_CASES = [Case.make(rows=5, cols=777, dtype="bfloat16"), Case.make(rows=2, cols=2049, dtype="float32")]
