"""Evaluation steps of the fp8 scaled GEMM task: `python3 harness.py compile|correctness|performance`.

C = (A @ B) * scale_a * scale_b with A (M, K) and B (K, N) in float8_e4m3fn, B column-major, and
float32 scales per tensor or per row of A / column of B; C in bfloat16. The reference (and timed
baseline) is the plain PyTorch route without fp8 kernels: upcast both operands to float16 (exact
for e4m3 values), float16 GEMM with float32 accumulation, scale in float32, cast to bfloat16.
Triton's interpreter supports fp8 tl.dot (it widens the operands to float16), so the tiny ci
cases run on the CPU too.
"""

import math

import torch

from aka.harness import Case, KernelTask, candidate_function, random_tensor, run_task

FP8 = torch.float8_e4m3fn
# (M, N, K, scaling): LLM projections (Llama-3-8B up-projection, a 14336-deep down-projection),
# odd token counts and a small decode batch (M = 33).
SHAPES = (
    (4096, 4096, 4096, "tensor"),
    (2048, 14336, 4096, "row"),
    (4093, 4096, 14336, "row"),
    (33, 8192, 8192, "tensor"),
)
CI_SHAPES = ((33, 64, 96, "row"), (72, 48, 64, "tensor"))


def make_inputs(case: Case, generator: torch.Generator, device: torch.device) -> tuple[torch.Tensor, ...]:
    """a (M, K) row-major and b (K, N) column-major (b.t() is contiguous), values of std ~1 rounded
    to e4m3; scales uniform in [0.5, 1.5) / K^(1/4) so that C has std ~1."""
    m, n, k = case.int_param("m"), case.int_param("n"), case.int_param("k")
    a = random_tensor((m, k), torch.float32, generator, device).to(FP8)
    b = random_tensor((n, k), torch.float32, generator, device).to(FP8).t()
    per_row = case.params["scaling"] == "row"
    unit = 1.0 / math.sqrt(math.sqrt(k))
    scale_a = random_tensor((m, 1) if per_row else (1, 1), torch.float32, generator, device,
                            distribution="uniform", low=0.5 * unit, high=1.5 * unit)
    scale_b = random_tensor((1, n) if per_row else (1, 1), torch.float32, generator, device,
                            distribution="uniform", low=0.5 * unit, high=1.5 * unit)
    return a, b, scale_a, scale_b


def reference(a: torch.Tensor, b: torch.Tensor, scale_a: torch.Tensor, scale_b: torch.Tensor) -> torch.Tensor:
    """Upcast to float16 (exact), float16 GEMM (float32 accumulation), scales in float32, bfloat16 out."""
    # cuBLAS may otherwise reduce split-K partial sums in float16, which moves outputs that cancel
    # to near zero by up to 1.5e-2 (seen on the H200); the contract promises float32 accumulation.
    torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction = False
    product = torch.mm(a.to(torch.float16), b.to(torch.float16))
    return (product.float() * scale_a * scale_b).to(torch.bfloat16)


def case_of(m: int, n: int, k: int, scaling: str) -> Case:
    return Case.make(m=m, n=n, k=k, scaling=scaling)


def min_bytes(case: Case) -> int:
    """A and B read once (1 byte each), C written once (bfloat16)."""
    m, n, k = case.int_param("m"), case.int_param("n"), case.int_param("k")
    return m * k + k * n + 2 * m * n


def min_flops(case: Case) -> int:
    """The product's multiply-adds, on 8-bit operands."""
    return 2 * case.int_param("m") * case.int_param("n") * case.int_param("k")


# Tolerances: the bfloat16 default (atol 1e-2, rtol 1.6e-2) fits. C has std ~1; a kernel that
# accumulates the exact e4m3 products in float32 is off by the final bfloat16 rounding (<= 2^-8
# relative); the reference adds a float16 rounding of A @ B (<= 2^-11) before its own bfloat16
# rounding, so the two differ by at most ~2^-7 relative (one bfloat16 ulp), inside rtol = 2^-6,
# and atol covers near-zero outputs. Accumulation-order differences in float32 are ~1e-6.
TASK = KernelTask(
    name="instruction2triton/llm/fp8_scaled_gemm",
    cases=[case_of(*shape) for shape in SHAPES],
    ci_cases=[case_of(*shape) for shape in CI_SHAPES],
    make_inputs=make_inputs,
    reference=reference,
    load_candidate=candidate_function("kernel", "fp8_scaled_gemm"),
    min_bytes=min_bytes,
    min_flops=min_flops,
    flops_operand_bits=8,
)

if __name__ == "__main__":
    raise SystemExit(run_task(TASK))
