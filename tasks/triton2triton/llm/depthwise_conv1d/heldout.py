"""Held-out cases: hidden from the agent (listed in hidden_files), used to measure generalization."""

from aka.harness import Case

CASES = [
    Case.make(batch=1, channels=8192, seqlen=8191, dtype="bfloat16"),   # one long sequence
    Case.make(batch=32, channels=2048, seqlen=512, dtype="float16"),    # many short ones
    Case.make(batch=3, channels=1999, seqlen=3001, dtype="float32"),
    Case.make(batch=6, channels=4096, seqlen=1537, dtype="float16"),
]
CI_CASES = [Case.make(batch=1, channels=7, seqlen=65, dtype="float16"),
            Case.make(batch=2, channels=2, seqlen=3, dtype="float32")]
