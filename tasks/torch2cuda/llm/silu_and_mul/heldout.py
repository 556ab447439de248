"""Held-out cases: hidden from the agent (listed in hidden_files), used to measure generalization."""

from aka.harness import Case

CASES = [
    Case.make(tokens=512, d=13824, dtype="float16"),
    Case.make(tokens=2000, d=5000, dtype="float32"),
    Case.make(tokens=7777, d=1375, dtype="float16"),
    Case.make(tokens=333, d=28672, dtype="float32"),
]
CI_CASES = [Case.make(tokens=2, d=129, dtype="float32"), Case.make(tokens=5, d=40, dtype="float16")]
