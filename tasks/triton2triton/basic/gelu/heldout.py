"""Held-out cases: hidden from the agent (listed in hidden_files), used to measure generalization."""

from aka.harness import Case

CASES = [Case.make(n=n, dtype=d) for n, d in
         ((777, "float32"), (65_537, "float16"), (3_000_017, "bfloat16"), (9_999_991, "float32"),
          (33_554_433, "float16"))]
CI_CASES = [Case.make(n=777, dtype="float32"), Case.make(n=2051, dtype="bfloat16")]
