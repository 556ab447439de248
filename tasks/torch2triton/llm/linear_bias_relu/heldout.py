"""Held-out cases: hidden from the agent (listed in hidden_files), used to measure generalization."""

from aka.harness import Case

CASES = [
    Case.make(m=2047, k=1024, n=4096, dtype="bfloat16"),   # T5-large / BERT-large FFN
    Case.make(m=5000, k=512, n=2048, dtype="float16"),     # T5-small FFN
    Case.make(m=1500, k=4096, n=4097, dtype="float16"),    # odd N
    Case.make(m=8192, k=2560, n=10240, dtype="bfloat16"),  # OPT-2.7B FFN
    Case.make(m=777, k=1336, n=3333, dtype="bfloat16"),
]
# float16 only: the Triton interpreter's tl.dot is wrong for bfloat16 (see harness.py).
CI_CASES = [Case.make(m=9, k=16, n=31, dtype="float16"), Case.make(m=20, k=40, n=17, dtype="float16")]
