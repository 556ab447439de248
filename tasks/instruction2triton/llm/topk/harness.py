"""Evaluation steps of the row top-k task: `python3 harness.py compile|correctness|performance`.

Every row holds pairwise-distinct values, so the top-k values AND their indices are unique and
both outputs are compared exactly. k arrives as a 0-dim int64 CPU tensor (inputs are tensors
only; reading it with int(k) needs no device sync).
"""


import torch

from aka.harness import EXACT, Case, KernelTask, candidate_function, run_task

# (rows, n, k, dtype): LLM vocab sampling (fp32 logits, 128256 = Llama-3 vocab), mid-size rows in
# 16-bit types, k = 1 (argmax), 8 and 50.
SHAPES = (
    (64, 128256, 50, "float32"),
    (512, 32000, 8, "float32"),
    (4096, 4093, 8, "float16"),
    (16384, 1000, 1, "bfloat16"),
    (1024, 8191, 50, "bfloat16"),
)
CI_SHAPES = ((3, 1000, 8, "float32"), (4, 300, 4, "bfloat16"), (5, 77, 1, "float16"))


def distinct_values(dtype: torch.dtype, n: int, device: torch.device) -> torch.Tensor:
    """An ascending table of at least 2n distinct finite values of `dtype` (never -0.0).

    float32: the grid (i - G/2) * 2^-s with |v| <= 8 (exact: integers below 2^24 times a power of
    two). float16 / bfloat16: every value with magnitude in [2^-4, 2^4) (float16) or
    [2^-32, 2^32) (bfloat16), both signs: 16384 values, so 16-bit rows hold at most 16384 elements.
    """
    if dtype == torch.float32:
        size = 2 * n
        shift = max(0, (size // 16 - 1).bit_length())
        return (torch.arange(size, device=device, dtype=torch.float32) - size // 2) / 2.0 ** shift
    low, high = (0x2C00, 0x4C00) if dtype == torch.float16 else (0x2F80, 0x4F80)
    positive = torch.arange(low, high, device=device, dtype=torch.int32)
    bits = torch.cat([(positive | 0x8000).flip(0) - 0x10000, positive]).to(torch.int16)
    return bits.view(dtype)


def make_inputs(case: Case, generator: torch.Generator, device: torch.device) -> tuple[torch.Tensor, ...]:
    """x: (rows, n), each row a random n-subset of a random window of 2n consecutive entries of
    distinct_values(), in random order; k: a 0-dim int64 CPU tensor."""
    rows, n, k = case.int_param("rows"), case.int_param("n"), case.int_param("k")
    table = distinct_values(case.dtype(), n, device)
    start = torch.randint(0, table.numel() - 2 * n + 1, (rows, 1), generator=generator, device=device)
    keys = torch.rand((rows, 2 * n), generator=generator, device=device)
    picks = start + keys.argsort(dim=1)[:, :n]
    return table[picks].contiguous(), torch.tensor(k, dtype=torch.int64)


def reference(x: torch.Tensor, k: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """torch.topk along the last dimension, largest first (exact: values in a row are distinct)."""
    values, indices = torch.topk(x, int(k), dim=-1, largest=True, sorted=True)
    return values, indices


def case_of(rows: int, n: int, k: int, dtype: str) -> Case:
    return Case.make(rows=rows, n=n, k=k, dtype=dtype)


def min_bytes(case: Case) -> int:
    """x read once, the values and int64 indices written once."""
    rows, n, k, itemsize = case.int_param("rows"), case.int_param("n"), case.int_param("k"), case.dtype().itemsize
    return rows * n * itemsize + rows * k * (itemsize + 8)


TASK = KernelTask(
    name="instruction2triton/llm/topk",
    cases=[case_of(*shape) for shape in SHAPES],
    ci_cases=[case_of(*shape) for shape in CI_SHAPES],
    make_inputs=make_inputs,
    reference=reference,
    load_candidate=candidate_function("kernel", "topk"),
    # The values are copies of input elements and the indices are unique (distinct row values),
    # so both outputs must match exactly (int64 indices are always compared exactly).
    tolerances={"float32": EXACT, "float16": EXACT, "bfloat16": EXACT},
    min_bytes=min_bytes,
)

if __name__ == "__main__":
    raise SystemExit(run_task(TASK))
