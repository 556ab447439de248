"""Held-out cases: hidden from the agent (listed in hidden_files), used to measure generalization."""

from aka.harness import Case

CASES = [
    Case.make(tokens=2048, hidden=8192, dtype="bfloat16"),    # 70B-class hidden size
    Case.make(tokens=5000, hidden=11008, dtype="float16"),    # Llama-2-7B MLP intermediate
    Case.make(tokens=12289, hidden=1537, dtype="float32"),
    Case.make(tokens=1000, hidden=28672, dtype="bfloat16"),   # Llama-3-70B MLP intermediate
]
CI_CASES = [Case.make(tokens=2, hidden=2049, dtype="float16"), Case.make(tokens=6, hidden=77, dtype="float32")]
