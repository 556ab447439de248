"""Evaluation steps of the GEMM + bias + GELU task: `python3 harness.py compile|correctness|performance`."""

import torch

from aka.harness import Case, KernelTask, Tolerance, candidate_function, random_tensor, run_task

CASES = (
    (1000, 4096, 4096, "float16"),   # odd token count through an MLP up-projection
    (4096, 2748, 1024, "float16"),   # N = 2748: B's rows are not 16-byte aligned
    (1000, 2748, 4096, "bfloat16"),
    (4096, 4096, 1024, "bfloat16"),
)

TOLERANCES = {
    # fp16: a one-ulp rounding flip of the fp16 output (<= 9.8e-4 relative) on top of float32
    # accumulation-order and tensor-core accumulator differences over K=4096 (~1e-4 absolute on
    # pre-activations of std ~1); an fp16 accumulator (errors ~1e-2) still fails.
    torch.float16: Tolerance(atol=4e-3, rtol=2e-3),
    # bf16: the default 1.6e-2 relative covers a one-ulp flip (7.8e-3); atol 2e-2 adds room for the
    # same K=4096 accumulation differences.
    torch.bfloat16: Tolerance(atol=2e-2, rtol=1.6e-2),
}


def make_inputs(case: Case, generator: torch.Generator, device: torch.device) -> tuple[torch.Tensor, ...]:
    """Activations of std 1, weights of std 1/sqrt(K) (pre-activations of std ~1, so GELU's curved
    region is exercised) and a bias of std 0.5."""
    m, n, k, dtype = case.int_param("m"), case.int_param("n"), case.int_param("k"), case.dtype()
    a = random_tensor((m, k), dtype, generator, device)
    b = random_tensor((k, n), dtype, generator, device, scale=k ** -0.5)
    bias = random_tensor((n,), dtype, generator, device, scale=0.5)
    return a, b, bias


def reference(a: torch.Tensor, b: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    """float32 matmul (no TF32), bias and tanh GELU in float32, cast back once."""
    previous = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False
    try:
        x = a.float() @ b.float() + bias.float()
    finally:
        torch.backends.cuda.matmul.allow_tf32 = previous
    return torch.nn.functional.gelu(x, approximate="tanh").to(a.dtype)


def min_bytes(case: Case) -> int:
    """A, B and bias read once, C written once."""
    m, n, k = case.int_param("m"), case.int_param("n"), case.int_param("k")
    return (m * k + k * n + n + m * n) * case.dtype().itemsize


def min_flops(case: Case) -> int:
    """The product's multiply-adds (the bias and GELU are negligible beside them)."""
    return 2 * case.int_param("m") * case.int_param("n") * case.int_param("k")


TASK = KernelTask(
    name="triton2triton/llm/gemm_bias_gelu",
    cases=[Case.make(m=m, n=n, k=k, dtype=d) for m, n, k, d in CASES],
    # float16 only on the CPU: the Triton 3.9 interpreter's tl.dot misreads bfloat16 operands (it
    # returns ~1e10 for a 16x16 bf16 product), so bfloat16 is checked on the GPU cases alone.
    ci_cases=[Case.make(m=16, n=32, k=24, dtype="float16"), Case.make(m=13, n=29, k=40, dtype="float16")],
    make_inputs=make_inputs,
    reference=reference,
    load_candidate=candidate_function("kernel", "gemm_bias_gelu"),
    tolerances=TOLERANCES,
    min_bytes=min_bytes,
    min_flops=min_flops,
)

if __name__ == "__main__":
    raise SystemExit(run_task(TASK))
