"""Evaluation steps of the cross-entropy task: `python3 harness.py compile|correctness|performance`."""

import torch
import torch.nn.functional as F

from aka.harness import Case, KernelTask, Tolerance, candidate_function, random_tensor, run_task

IGNORE_INDEX = -100  # F.cross_entropy's default ignore_index: those rows get loss 0
CASES = (
    (4096, 32000, "bfloat16"),    # Llama-2 vocabulary, 4k tokens
    (2048, 128256, "bfloat16"),   # Llama-3 vocabulary
    (4095, 32000, "float16"),     # odd token count
    (1023, 128256, "float16"),    # few long rows
    (2000, 32000, "float32"),     # float32 logits (no upcast copy in the reference)
)


def make_inputs(case: Case, generator: torch.Generator, device: torch.device) -> tuple[torch.Tensor, ...]:
    """Logits with std 3; int64 targets, about 10% of them (and always the last row, like padding)
    set to ignore_index -100."""
    rows, vocab = case.int_param("rows"), case.int_param("vocab")
    logits = random_tensor((rows, vocab), case.dtype(), generator, device, scale=3.0)
    targets = torch.randint(0, vocab, (rows,), generator=generator, device=device, dtype=torch.int64)
    ignore = torch.rand((rows,), generator=generator, device=device) < 0.1
    ignore[-1] = True
    return logits, targets.masked_fill(ignore, IGNORE_INDEX)


def reference(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Per-token loss as a training loop writes it: upcast the logits, unreduced cross-entropy."""
    return F.cross_entropy(logits.float(), targets, reduction="none", ignore_index=IGNORE_INDEX)


TASK = KernelTask(
    name="torch2triton/llm/cross_entropy",
    cases=[Case.make(rows=r, vocab=v, dtype=d) for r, v, d in CASES],
    ci_cases=[Case.make(rows=4, vocab=1000, dtype="bfloat16"), Case.make(rows=3, vocab=1537, dtype="float16"),
              Case.make(rows=2, vocab=2051, dtype="float32")],
    make_inputs=make_inputs,
    reference=reference,
    load_candidate=candidate_function("kernel", "cross_entropy"),
    # The loss (float32, ~4-20) is a logsumexp over up to 262k logits: summation order and the
    # ex2/lg2-based exp/log shift it by ~1e-6 relative; atol 1e-4 leaves room for that on losses
    # near 10 while any real error (a wrong max, a missed chunk, a wrong target) is >= 1e-2.
    tolerances={"float32": Tolerance(1e-4, 1e-5)},
    # logits read once, targets read once, the float32 loss written once.
    min_bytes=lambda case: case.int_param("rows") * (case.int_param("vocab") * case.dtype().itemsize + 8 + 4),
)

if __name__ == "__main__":
    raise SystemExit(run_task(TASK))
