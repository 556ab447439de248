"""Held-out cases: hidden from the agent (listed in hidden_files), used to measure generalization."""

from aka.harness import Case

CASES = [
    Case.make(batch=16, m=640, n=640, k=64, dtype="bfloat16"),     # head_dim 64
    Case.make(batch=5, m=1536, n=1200, k=999, dtype="float16"),    # odd K
    Case.make(batch=1, m=4096, n=3000, k=2048, dtype="bfloat16"),  # batch of one
    Case.make(batch=48, m=257, n=511, k=320, dtype="float16"),
]
# float16 only: the Triton interpreter mishandles bfloat16 tl.dot (see harness.py).
CI_CASES = [Case.make(batch=1, m=9, n=17, k=33, dtype="float16"),
            Case.make(batch=4, m=20, n=8, k=16, dtype="float16")]
