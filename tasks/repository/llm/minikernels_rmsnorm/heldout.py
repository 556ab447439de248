"""Held-out cases: hidden from the agent (listed in hidden_files), used to measure generalization."""

from aka.harness import Case

CASES = [Case.make(rows=r, hidden=h, dtype=d) for r, h, d in
         ((3000, 4096, "bfloat16"), (1024, 7168, "float16"), (6000, 3000, "bfloat16"), (512, 12288, "float32"))]
CI_CASES = [Case.make(rows=2, hidden=511, dtype="float32"), Case.make(rows=5, hidden=64, dtype="bfloat16")]
