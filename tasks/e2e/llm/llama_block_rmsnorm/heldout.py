"""Held-out cases of the Llama-block task (hidden from the agent): other token counts and sizes."""

from aka.harness import Case

CASES = [
    Case.make(hidden=1024, inter=2816, batch=2, seq=3001, dtype="float16"),
    Case.make(hidden=1280, inter=3584, batch=3, seq=1500, dtype="bfloat16"),
    Case.make(hidden=2048, inter=5632, batch=2, seq=1537, dtype="bfloat16"),
    Case.make(hidden=1536, inter=4096, batch=1, seq=4095, dtype="float16"),
]
CI_CASES = [
    Case.make(hidden=32, inter=96, batch=1, seq=5, dtype="bfloat16"),
    Case.make(hidden=64, inter=176, batch=2, seq=4, dtype="float16"),
]
