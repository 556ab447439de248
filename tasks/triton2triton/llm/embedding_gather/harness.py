"""Evaluation steps of the embedding-gather task: `python3 harness.py compile|correctness|performance`."""

import torch

from aka.harness import EXACT, Case, KernelTask, candidate_function, random_tensor, run_task

CASES = (
    # (n_tokens, vocab, hidden, dtype)
    (8192, 32000, 4096, "bfloat16"),    # Llama-2-7B
    (4096, 50304, 2560, "float32"),     # Pythia-2.8B / Phi-2 hidden size
    (16383, 32000, 2049, "float16"),    # odd hidden size: rows are not 16-byte aligned
    (3000, 32768, 5120, "bfloat16"),    # Llama-2-13B / Mistral-Nemo sized rows
    (20000, 8192, 1000, "float32"),     # many short rows
)

# A gather copies bits: every dtype must match exactly.
TOLERANCES = {"float32": EXACT, "float16": EXACT, "bfloat16": EXACT}


def make_inputs(case: Case, generator: torch.Generator, device: torch.device) -> tuple[torch.Tensor, ...]:
    """Uniformly random ids (repeats included) and a random table."""
    n_tokens, vocab, hidden = case.int_param("n_tokens"), case.int_param("vocab"), case.int_param("hidden")
    ids = torch.randint(0, vocab, (n_tokens,), generator=generator, device=device, dtype=torch.int64)
    weight = random_tensor((vocab, hidden), case.dtype(), generator, device)
    return ids, weight


def reference(ids: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    return torch.nn.functional.embedding(ids, weight)


def min_bytes(case: Case) -> int:
    """ids read, output written, and at least half as many table rows read as tokens (repeated ids
    may be served once; with these vocab sizes most ids are distinct)."""
    n_tokens, hidden = case.int_param("n_tokens"), case.int_param("hidden")
    return 8 * n_tokens + (n_tokens + n_tokens // 2) * hidden * case.dtype().itemsize


TASK = KernelTask(
    name="triton2triton/llm/embedding_gather",
    cases=[Case.make(n_tokens=t, vocab=v, hidden=h, dtype=d) for t, v, h, d in CASES],
    ci_cases=[Case.make(n_tokens=7, vocab=50, hidden=300, dtype="float32"),
              Case.make(n_tokens=5, vocab=11, hidden=513, dtype="bfloat16"),
              Case.make(n_tokens=9, vocab=100, hidden=96, dtype="float16")],
    make_inputs=make_inputs,
    reference=reference,
    load_candidate=candidate_function("kernel", "embedding_gather"),
    tolerances=TOLERANCES,
    min_bytes=min_bytes,
    # the copy is the whole work here: torch's copies may not do it beside a kernel that copies
    # their result once more (a red team's `x.t().contiguous()`, session 51)
    forbidden_torch_ops=frozenset({"clone", "copy_", "cat", "stack"}),
)

if __name__ == "__main__":
    raise SystemExit(run_task(TASK))
