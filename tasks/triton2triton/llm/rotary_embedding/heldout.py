"""Held-out cases: hidden from the agent (listed in hidden_files), used to measure generalization."""

from aka.harness import Case

CASES = [
    Case.make(tokens=6000, q_heads=64, kv_heads=8, head_dim=128, dtype="bfloat16"),   # Llama-3-70B
    Case.make(tokens=4097, q_heads=16, kv_heads=16, head_dim=64, dtype="float16"),
    Case.make(tokens=2500, q_heads=32, kv_heads=8, head_dim=80, dtype="float32"),     # half = 40
    Case.make(tokens=1999, q_heads=16, kv_heads=1, head_dim=256, dtype="bfloat16"),   # Gemma-style 256
]
CI_CASES = [Case.make(tokens=4, q_heads=5, kv_heads=1, head_dim=80, dtype="float16"),
            Case.make(tokens=2, q_heads=2, kv_heads=2, head_dim=256, dtype="float32")]
