"""Held-out cases: hidden from the agent (listed in hidden_files), used to measure generalization."""

from aka.harness import Case

CASES = [
    Case.make(batch=2, seqlen=4097, heads=64, head_dim=128, dtype="float16"),   # Llama-2-70B queries
    Case.make(batch=16, seqlen=500, heads=28, head_dim=128, dtype="bfloat16"),  # Qwen2-7B queries
    Case.make(batch=1, seqlen=6001, heads=24, head_dim=80, dtype="float32"),
    Case.make(batch=6, seqlen=1111, heads=8, head_dim=256, dtype="bfloat16"),   # Gemma head_dim 256
    Case.make(batch=5, seqlen=2000, heads=12, head_dim=32, dtype="float16"),
]
CI_CASES = [Case.make(batch=2, seqlen=3, heads=5, head_dim=80, dtype="bfloat16"),
            Case.make(batch=1, seqlen=4, heads=2, head_dim=256, dtype="float32")]
