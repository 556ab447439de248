"""Held-out cases: hidden from the agent (listed in hidden_files), used to measure generalization."""

from aka.harness import Case

CASES = [
    Case.make(tokens=2048, d=14336, dtype="bfloat16"),  # Llama-3-8B MLP width
    Case.make(tokens=5000, d=2731, dtype="float16"),
    Case.make(tokens=1500, d=8192, dtype="float32"),
    Case.make(tokens=16384, d=1024, dtype="bfloat16"),
    Case.make(tokens=777, d=28672, dtype="float16"),    # Llama-3-70B MLP width
]
CI_CASES = [Case.make(tokens=5, d=333, dtype="bfloat16"), Case.make(tokens=2, d=1029, dtype="float32")]
