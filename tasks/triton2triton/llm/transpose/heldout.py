"""Held-out cases: hidden from the agent (listed in hidden_files), used to measure generalization."""

from aka.harness import Case

CASES = [
    Case.make(rows=4096, cols=4096, dtype="bfloat16"),   # square power of two (bank/partition conflicts)
    Case.make(rows=3001, cols=7777, dtype="float32"),
    Case.make(rows=64, cols=400009, dtype="float16"),    # short and wide
    Case.make(rows=20000, cols=1537, dtype="float16"),
]
CI_CASES = [Case.make(rows=33, cols=65, dtype="float16"), Case.make(rows=5, cols=129, dtype="float32")]
