"""Held-out cases: hidden from the agent (listed in hidden_files), used to measure generalization."""

from aka.harness import Case

CASES = [Case.make(rows=r, cols=c, dtype=d) for r, c, d in
         ((4096, 777, "float32"), (16384, 2048, "float16"), (1000, 8191, "float32"), (3000, 6000, "float16"))]
CI_CASES = [Case.make(rows=3, cols=77, dtype="float32"), Case.make(rows=5, cols=300, dtype="float16")]
