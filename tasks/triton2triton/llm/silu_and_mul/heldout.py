"""Held-out cases: hidden from the agent (listed in hidden_files), used to measure generalization."""

from aka.harness import Case

CASES = [
    Case.make(tokens=1500, d=8192, dtype="float16"),
    Case.make(tokens=6000, d=3584, dtype="bfloat16"),
    Case.make(tokens=511, d=18944, dtype="float32"),
    Case.make(tokens=16385, d=1001, dtype="float16"),
]
CI_CASES = [Case.make(tokens=3, d=333, dtype="float16"), Case.make(tokens=7, d=65, dtype="float32")]
