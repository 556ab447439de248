"""Evaluation steps of the linear+bias+ReLU task: `python3 harness.py compile|correctness|performance`."""

import math

import torch
import torch.nn.functional as F

from aka.harness import Case, KernelTask, Tolerance, candidate_function, random_tensor, run_task

CASES = (  # (M tokens, K in_features, N out_features, dtype)
    (4095, 2048, 8192, "float16"),    # OPT-1.3B FFN up-projection (ReLU MLP)
    (8191, 768, 3072, "bfloat16"),    # T5-base / BERT-base width FFN up-projection
    (3001, 1000, 1999, "bfloat16"),   # odd M and N, K not a multiple of 16
    (16384, 256, 4096, "float16"),    # small K: the separate ReLU pass costs as much as the GEMM
    (1023, 4096, 16384, "float16"),   # OPT-6.7B FFN up-projection, odd M
)


def make_inputs(case: Case, generator: torch.Generator, device: torch.device) -> tuple[torch.Tensor, ...]:
    """Activations with std 1, weights with std 1/sqrt(K) (outputs ~N(0, 1) before the bias, as in
    a trained layer), bias with std 0.5."""
    m, k, n, dtype = case.int_param("m"), case.int_param("k"), case.int_param("n"), case.dtype()
    x = random_tensor((m, k), dtype, generator, device)
    weight = random_tensor((n, k), dtype, generator, device, scale=1.0 / math.sqrt(k))
    bias = random_tensor((n,), dtype, generator, device, scale=0.5)
    return x, weight, bias


def reference(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    """nn.Linear followed by nn.ReLU: cuBLAS (bias in its epilogue) and a separate ReLU kernel."""
    return F.relu(F.linear(x, weight, bias))


TASK = KernelTask(
    name="torch2triton/llm/linear_bias_relu",
    cases=[Case.make(m=m, k=k, n=n, dtype=d) for m, k, n, d in CASES],
    # The CPU profile is float16 only: Triton 3.9's interpreter stores bfloat16 as raw uint16 bits and
    # its tl.dot multiplies those bits as integers (garbage), so bfloat16 is checked on the GPU only.
    ci_cases=[Case.make(m=17, k=32, n=24, dtype="float16"), Case.make(m=32, k=24, n=19, dtype="float16")],
    make_inputs=make_inputs,
    reference=reference,
    load_candidate=candidate_function("kernel", "linear_bias_relu"),
    # Outputs are ~N(0, 1.25) (|y| up to ~6) after a float32 sum over K <= 4096 products. A different
    # summation order flips the final rounding by an ulp (fp16: 0.004 at |y| in [4, 8); bf16: 0.03),
    # and with PyTorch's default allow_{fp16,bf16}_reduced_precision_reduction cuBLAS may reduce
    # split-K partial sums in 16-bit, adding ~1-2 ulps of |y|~1. These allow 2-3 ulps everywhere and
    # still catch a missing bias (std 0.5), a missing ReLU or a dropped K tile. float16 is 4e-3/4e-3
    # (6-8 ulps at |y| ~ 1): at 1e-2/1e-2 a computation in bfloat16 (inputs and output rounded, the
    # `lower_precision` mutant of `aka validate`) passed; it is now 1.3x (K=32) to 2.5x (K=4096) over,
    # while float32 accumulation in any order stays below 0.1 of it (measured on the CPU).
    tolerances={"float16": Tolerance(4e-3, 4e-3), "bfloat16": Tolerance(4e-2, 2e-2)},
    # x, weight and bias read once, the output written once.
    min_bytes=lambda case: (case.int_param("m") * case.int_param("k") + case.int_param("n") * case.int_param("k")
                            + case.int_param("n") + case.int_param("m") * case.int_param("n"))
    * case.dtype().itemsize,
    min_flops=lambda case: 2 * case.int_param("m") * case.int_param("n") * case.int_param("k"),
)

if __name__ == "__main__":
    raise SystemExit(run_task(TASK))
