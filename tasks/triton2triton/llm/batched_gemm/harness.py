"""Evaluation steps of the batched GEMM task: `python3 harness.py compile|correctness|performance`."""

import torch

from aka.harness import Case, KernelTask, Tolerance, candidate_function, random_tensor, run_task

CASES = (
    (8, 1024, 1024, 1024, "float16"),   # (batch, M, N, K): a few large square products
    (96, 384, 384, 128, "bfloat16"),    # many small attention-like products (K = head_dim 128)
    (3, 2000, 1000, 1536, "float16"),   # odd batch and sizes
    (40, 513, 777, 256, "bfloat16"),    # N = 777: B's rows are not 16-byte aligned
)

TOLERANCES = {
    # fp16: a one-ulp rounding flip of the fp16 output (<= 9.8e-4 relative) on top of float32
    # accumulation-order and tensor-core accumulator differences over K up to 4096 (~1e-4 absolute
    # on outputs of std ~1); an fp16 accumulator (errors ~1e-2) still fails.
    torch.float16: Tolerance(atol=4e-3, rtol=2e-3),
    # bf16: the default 1.6e-2 relative covers a one-ulp flip (7.8e-3); atol 2e-2 adds room for the
    # same accumulation differences.
    torch.bfloat16: Tolerance(atol=2e-2, rtol=1.6e-2),
}


def make_inputs(case: Case, generator: torch.Generator, device: torch.device) -> tuple[torch.Tensor, ...]:
    """A of std 1 and B of std 1/sqrt(K), so every output has std ~1 whatever K is."""
    batch, m, n, k, dtype = (case.int_param("batch"), case.int_param("m"), case.int_param("n"),
                             case.int_param("k"), case.dtype())
    a = random_tensor((batch, m, k), dtype, generator, device)
    b = random_tensor((batch, k, n), dtype, generator, device, scale=k ** -0.5)
    return a, b


def reference(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """float32 batched matmul (no TF32), cast back once."""
    previous = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False
    try:
        return torch.bmm(a.float(), b.float()).to(a.dtype)
    finally:
        torch.backends.cuda.matmul.allow_tf32 = previous


def min_bytes(case: Case) -> int:
    """A and B read once, C written once."""
    batch, m, n, k = case.int_param("batch"), case.int_param("m"), case.int_param("n"), case.int_param("k")
    return batch * (m * k + k * n + m * n) * case.dtype().itemsize


def min_flops(case: Case) -> int:
    """One multiply-add per (batch, row, column, k)."""
    return 2 * case.int_param("batch") * case.int_param("m") * case.int_param("n") * case.int_param("k")


TASK = KernelTask(
    name="triton2triton/llm/batched_gemm",
    cases=[Case.make(batch=bt, m=m, n=n, k=k, dtype=d) for bt, m, n, k, d in CASES],
    # float16 only on the CPU: the Triton 3.9 interpreter's tl.dot misreads bfloat16 operands (it
    # returns ~1e10 for a 16x16 bf16 product), so bfloat16 is checked on the GPU cases alone.
    ci_cases=[Case.make(batch=2, m=16, n=32, k=24, dtype="float16"),
              Case.make(batch=3, m=13, n=29, k=40, dtype="float16")],
    make_inputs=make_inputs,
    reference=reference,
    load_candidate=candidate_function("kernel", "batched_gemm"),
    tolerances=TOLERANCES,
    min_bytes=min_bytes,
    min_flops=min_flops,
)

if __name__ == "__main__":
    raise SystemExit(run_task(TASK))
