"""Held-out cases: hidden from the agent (listed in hidden_files), used to measure generalization."""

from aka.harness import Case

CASES = [
    Case.make(rows=1000, vocab=151936, dtype="bfloat16"),  # Qwen2 vocabulary
    Case.make(rows=2500, vocab=50257, dtype="float16"),    # GPT-2 vocabulary
    Case.make(rows=777, vocab=128256, dtype="float32"),
    Case.make(rows=8191, vocab=32000, dtype="bfloat16"),
    Case.make(rows=3000, vocab=49152, dtype="float16"),    # StarCoder vocabulary
]
CI_CASES = [Case.make(rows=5, vocab=1111, dtype="bfloat16"), Case.make(rows=2, vocab=2049, dtype="float32")]
