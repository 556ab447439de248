"""Evaluation steps of the LayerNorm task: `python3 harness.py compile|correctness|performance`."""

import torch

from aka.harness import Case, KernelTask, candidate_function, random_tensor, run_task

EPS = 1e-5
# (rows, hidden, dtype): an odd short row, BERT/GPT-style widths and an odd long one.
CASES = (
    (32768, 1000, "float16"),
    (16384, 4096, "bfloat16"),
    (8192, 5120, "float32"),
    (4096, 8191, "bfloat16"),
)


def make_inputs(case: Case, generator: torch.Generator, device: torch.device) -> tuple[torch.Tensor, ...]:
    """Activations with std 2 and mean 0.5; weight around 1 (std 0.25) and a small bias, all in the
    input dtype."""
    rows, hidden, dtype = case.int_param("rows"), case.int_param("hidden"), case.dtype()
    x = random_tensor((rows, hidden), torch.float32, generator, device, scale=2.0) + 0.5
    weight = random_tensor((hidden,), torch.float32, generator, device, scale=0.25) + 1.0
    bias = random_tensor((hidden,), torch.float32, generator, device, scale=0.25)
    return x.to(dtype), weight.to(dtype), bias.to(dtype)


def reference(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    """LayerNorm in float32 (biased variance, eps 1e-5), cast back once to the input dtype."""
    y = torch.nn.functional.layer_norm(x.float(), (x.shape[-1],), weight.float(), bias.float(), eps=EPS)
    return y.to(x.dtype)


def min_bytes(case: Case) -> int:
    """Read x once and write y once (weight and bias are negligible and left out)."""
    return 2 * case.int_param("rows") * case.int_param("hidden") * case.dtype().itemsize


# Default tolerances fit: float32 statistics over <= 16k values have relative errors of a few 1e-7
# (reduction order, rsqrt), so with |x_hat * weight| <= ~8 the float32 error stays under 1e-5;
# 16-bit outputs differ from the reference by at most one rounding.
TASK = KernelTask(
    name="triton2triton/llm/layernorm",
    cases=[Case.make(rows=r, hidden=h, dtype=dtype) for r, h, dtype in CASES],
    ci_cases=[Case.make(rows=3, hidden=1000, dtype="float32"), Case.make(rows=4, hidden=257, dtype="bfloat16"),
              Case.make(rows=2, hidden=2049, dtype="float16")],
    make_inputs=make_inputs,
    reference=reference,
    load_candidate=candidate_function("kernel", "layernorm"),
    min_bytes=min_bytes,
)

if __name__ == "__main__":
    raise SystemExit(run_task(TASK))
