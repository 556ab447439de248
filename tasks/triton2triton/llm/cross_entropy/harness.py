"""Evaluation steps of the cross-entropy task: `python3 harness.py compile|correctness|performance`."""

import torch

from aka.harness import Case, KernelTask, candidate_function, random_tensor, run_task

IGNORE_INDEX = -100
# (rows, vocab, dtype): Llama-2 (32000), GPT-2 (50257) and Llama-3 (128256) vocabularies, with an
# odd row count in float32.
CASES = (
    (4096, 32000, "bfloat16"),
    (2047, 32000, "float32"),
    (2048, 50257, "float16"),
    (1024, 128256, "bfloat16"),
)


def make_inputs(case: Case, generator: torch.Generator, device: torch.device) -> tuple[torch.Tensor, ...]:
    """Normal logits with std 3; int64 targets in [0, vocab), about 1 in 8 set to IGNORE_INDEX."""
    rows, vocab = case.int_param("rows"), case.int_param("vocab")
    logits = random_tensor((rows, vocab), case.dtype(), generator, device, scale=3.0)
    targets = torch.randint(0, vocab, (rows,), generator=generator, device=device, dtype=torch.int64)
    ignored = torch.randint(0, 8, (rows,), generator=generator, device=device) == 0
    targets = torch.where(ignored, torch.full_like(targets, IGNORE_INDEX), targets)
    return logits, targets


def reference(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Per-row loss in float32 (0 for ignored rows), like the training loss before the mean."""
    return torch.nn.functional.cross_entropy(logits.float(), targets, reduction="none", ignore_index=IGNORE_INDEX)


def min_bytes(case: Case) -> int:
    """At least 3/4 of the logits must be read: ignored rows (about 1/8, binomially spread; never
    1/4 at these row counts) need not be."""
    return 3 * case.int_param("rows") * case.int_param("vocab") * case.dtype().itemsize // 4


# Default (float32) tolerances fit every input dtype: the loss is float32 math on the upcast
# logits; log-sum-exp over <= 128k terms has an absolute error of a few 1e-6 (summation order,
# exp/log ulps) against a loss of about 10-25, where atol + rtol * |loss| is above 1e-4.
TASK = KernelTask(
    name="triton2triton/llm/cross_entropy",
    cases=[Case.make(rows=r, vocab=v, dtype=dtype) for r, v, dtype in CASES],
    ci_cases=[Case.make(rows=8, vocab=1000, dtype="float32"), Case.make(rows=6, vocab=700, dtype="bfloat16"),
              Case.make(rows=4, vocab=257, dtype="float16")],
    make_inputs=make_inputs,
    reference=reference,
    load_candidate=candidate_function("kernel", "cross_entropy"),
    min_bytes=min_bytes,
)

if __name__ == "__main__":
    raise SystemExit(run_task(TASK))
