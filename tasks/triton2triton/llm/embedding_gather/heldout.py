"""Held-out cases: hidden from the agent (listed in hidden_files), used to measure generalization."""

from aka.harness import Case

CASES = [
    Case.make(n_tokens=6000, vocab=32000, hidden=3072, dtype="float16"),    # Llama-3.2-3B hidden size
    Case.make(n_tokens=2500, vocab=16384, hidden=8192, dtype="bfloat16"),   # 70B-class rows
    Case.make(n_tokens=12289, vocab=4096, hidden=777, dtype="float32"),
    Case.make(n_tokens=4097, vocab=50000, hidden=1601, dtype="bfloat16"),
]
CI_CASES = [Case.make(n_tokens=3, vocab=20, hidden=777, dtype="float16"),
            Case.make(n_tokens=6, vocab=9, hidden=130, dtype="float32")]
