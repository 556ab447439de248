"""Held-out cases of the SwiGLU-MLP task (hidden from the agent): other token counts and sizes."""

from aka.harness import Case

CASES = [
    Case.make(hidden=1024, inter=2816, tokens=1280, layers=4, dtype="float16"),
    Case.make(hidden=1280, inter=3584, tokens=999, layers=4, dtype="bfloat16"),
    Case.make(hidden=1536, inter=4096, tokens=1500, layers=4, dtype="bfloat16"),
    Case.make(hidden=2048, inter=5632, tokens=640, layers=4, dtype="float16"),
]
CI_CASES = [
    Case.make(hidden=48, inter=128, tokens=3, layers=2, dtype="float16"),
    Case.make(hidden=64, inter=160, tokens=9, layers=1, dtype="bfloat16"),
]
