"""Held-out cases: hidden from the agent (listed in hidden_files), used to measure generalization."""

from aka.harness import Case

CASES = [Case.make(n=n, dtype="float32") for n in (777, 65_537, 8_388_609, 33_554_431)]
CI_CASES = [Case.make(n=n, dtype="float32") for n in (777, 2051)]
