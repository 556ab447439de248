"""Evaluation steps of the LayerNorm task: `python3 harness.py compile|correctness|performance`."""

import torch
import torch.nn.functional as F

from aka.harness import Case, KernelTask, candidate_function, random_tensor, run_task

EPS = 1e-5  # nn.LayerNorm's default; fixed by the contract, not an input
CASES = (
    (32768, 1024, "float16"),   # BERT-large / ViT-L width
    (16384, 1600, "bfloat16"),  # GPT-2 XL width
    (8193, 4544, "bfloat16"),   # Falcon-7B width, odd token count
    (4096, 8192, "float16"),    # Falcon-40B width
    (6000, 3001, "float32"),    # odd width
)

# Default tolerances fit: like PyTorch's kernel, the statistics and the affine map run in float32
# and the output is rounded once; only the summation order of the mean/variance differs (relative
# ~1e-7, inside fp32's 1e-5), and fp16 1e-3/1e-3, bf16 1e-2/1.6e-2 cover a one-ulp rounding flip.


def make_inputs(case: Case, generator: torch.Generator, device: torch.device) -> tuple[torch.Tensor, ...]:
    """Activations with std 2 around a per-tensor offset (so a missing mean subtraction fails),
    weights around 1 and small biases, as in a trained model."""
    rows, hidden, dtype = case.int_param("rows"), case.int_param("hidden"), case.dtype()
    x = (0.5 + random_tensor((rows, hidden), torch.float32, generator, device, scale=2.0)).to(dtype)
    weight = (1.0 + random_tensor((hidden,), torch.float32, generator, device, scale=0.25)).to(dtype)
    bias = random_tensor((hidden,), dtype, generator, device, scale=0.1)
    return x, weight, bias


def reference(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    """nn.LayerNorm's forward: PyTorch's fused layer_norm kernel."""
    return F.layer_norm(x, (x.shape[-1],), weight, bias, EPS)


TASK = KernelTask(
    name="torch2triton/llm/layernorm",
    cases=[Case.make(rows=r, hidden=h, dtype=d) for r, h, d in CASES],
    ci_cases=[Case.make(rows=4, hidden=1000, dtype="float32"), Case.make(rows=3, hidden=1537, dtype="bfloat16"),
              Case.make(rows=2, hidden=2051, dtype="float16")],
    make_inputs=make_inputs,
    reference=reference,
    load_candidate=candidate_function("kernel", "layernorm"),
    # x read once, weight and bias read once, output written once.
    min_bytes=lambda case: (2 * case.int_param("rows") + 2) * case.int_param("hidden") * case.dtype().itemsize,
)

if __name__ == "__main__":
    raise SystemExit(run_task(TASK))
