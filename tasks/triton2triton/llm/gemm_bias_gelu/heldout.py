"""Held-out cases: hidden from the agent (listed in hidden_files), used to measure generalization."""

from aka.harness import Case

CASES = [
    Case.make(m=777, n=3072, k=2048, dtype="float16"),
    Case.make(m=3000, n=1000, k=1536, dtype="bfloat16"),
    Case.make(m=513, n=5120, k=1000, dtype="bfloat16"),   # K not a multiple of 64
    Case.make(m=2048, n=2049, k=4096, dtype="float16"),
]
# float16 only: the Triton interpreter mishandles bfloat16 tl.dot (see harness.py).
CI_CASES = [Case.make(m=9, n=17, k=33, dtype="float16"), Case.make(m=20, n=8, k=16, dtype="float16")]
