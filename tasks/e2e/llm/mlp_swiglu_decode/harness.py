"""Evaluation steps of the e2e SwiGLU-MLP task: `python3 harness.py compile|correctness|performance`.

The timed and checked unit is a stack of SwiGLU MLP layers for one batched decode step (one new
token for each of `tokens` sequences), each layer

    gate_up = x @ gate_up_w.T                  (tokens, 2 * inter): gate columns first, then up
    x       = x + silu_and_mul(gate_up) @ down_w.T      (torch.addmm: the residual in the GEMM)

where `silu_and_mul` comes from kernel.py and the GEMMs run in PyTorch/cuBLAS, identically for the
baseline, the candidate and the reference. The speedup is the whole stack's.
"""

from collections.abc import Callable
from pathlib import Path

import torch
import torch.nn.functional as F

from aka.harness import Case, KernelTask, Tolerance, import_candidate, random_tensor, run_task

# The torch functions the workload uses, bound when the harness is imported (before kernel.py is),
# so a candidate that rebinds torch.mm or torch.addmm does not change the workload by
# accident. Not a defence: the workload runs in the candidate's worker, whose code can reach and
# replace these names (docs/evaluation.md, Known gaps, "The kernel-family policy").
_mm = torch.mm
_addmm = torch.addmm
_silu = F.silu

# hidden, intermediate, tokens (the decode batch), layers, dtype. Token counts of 512-2048 keep
# the activation a real share of each layer (its traffic grows with tokens, like the GEMMs' work,
# while at 1-64 tokens the GEMMs just stream their weights and the activation is < 3% of the time)
# and keep every layer's GPU time (40-130 us on an H200) above the host's launch time.
CASES = (
    (1024, 2816, 1024, 4, "bfloat16"),
    (1024, 2816, 2048, 4, "float16"),
    (1024, 2816, 1531, 4, "bfloat16"),   # odd token count
    (1536, 4096, 777, 4, "float16"),     # odd token count
    (2048, 5632, 512, 4, "bfloat16"),
)
CI_CASES = (  # tiny stacks for the Triton interpreter on the CPU
    (32, 96, 5, 2, "bfloat16"),
    (64, 176, 16, 1, "float16"),
)

# Tolerances. The reference runs the same stack in the same dtype with the same op order; the only
# legitimate difference is inside silu_and_mul (exp and division in float32 differ by an ulp or two
# of float32 between implementations), which flips an occasional 16-bit rounding of the activation
# by one ulp. Through the down/gate-up GEMMs and residual adds of the following layers those flips
# leave the final hidden state (std ~1.2, |x| up to ~6) up to ~2 ulps off in a few elements.
# Measured on the CPU (1024 tokens, 4 layers, 3 seeds/distributions) against the reference:
# float64 SiLU or x * sigmoid(x) give bf16 max error 0.031 (<= 0.35 of the tolerance below) and
# fp16 max error 0.0078 (<= 0.26 of it); rounding silu(gate) before the multiply (not the contract,
# but harmless) stays within 0.62 of it. Wrong activations (gate/up swapped, no up factor) are off
# by 3-5 in most elements (> 35x the tolerance).
TOLERANCES = {
    "bfloat16": Tolerance(atol=6e-2, rtol=2e-2),
    "float16": Tolerance(atol=1e-2, rtol=4e-3),
}


def make_inputs(case: Case, generator: torch.Generator, device: torch.device) -> tuple[torch.Tensor, ...]:
    """Hidden states with std 1, gate/up weights with std 1/sqrt(hidden) (gate and up values O(1))
    and down weights with std 0.5/sqrt(inter), so the residual stream grows slowly over the layers
    (as with trained weights) instead of compounding: std ~1.2 after four layers.

    Returns (x, gate_up_w[0], down_w[0], gate_up_w[1], down_w[1], ...)."""
    hidden, inter, dtype = case.int_param("hidden"), case.int_param("inter"), case.dtype()
    tensors = [random_tensor((case.int_param("tokens"), hidden), dtype, generator, device)]
    for _ in range(case.int_param("layers")):
        tensors.append(random_tensor((2 * inter, hidden), dtype, generator, device, scale=hidden ** -0.5))
        tensors.append(random_tensor((hidden, inter), dtype, generator, device, scale=0.5 * inter ** -0.5))
    return tuple(tensors)


Activation = Callable[[torch.Tensor], torch.Tensor]


def mlp_stack(silu_and_mul: Activation, x: torch.Tensor, *weights: torch.Tensor) -> torch.Tensor:
    """Every layer: x = x + down(silu(gate) * up) with [gate | up] = x @ gate_up_w.T."""
    for layer in range(len(weights) // 2):
        gate_up_w, down_w = weights[2 * layer], weights[2 * layer + 1]
        x = _addmm(x, silu_and_mul(_mm(x, gate_up_w.t())), down_w.t())
    return x


def torch_silu_and_mul(gate_up: torch.Tensor) -> torch.Tensor:
    """silu(gate) * up in float32, rounded once to the input dtype (gate = first half of columns)."""
    gate, up = gate_up.float().chunk(2, dim=-1)
    return (_silu(gate) * up).to(gate_up.dtype)


def reference(*inputs: torch.Tensor) -> torch.Tensor:
    """The same stack with the activation in PyTorch."""
    return mlp_stack(torch_silu_and_mul, *inputs)


def load_candidate(directory: Path) -> Callable[..., torch.Tensor]:
    """The stack with kernel.py's `silu_and_mul` (from `directory`) plugged in."""
    silu_and_mul = getattr(import_candidate("kernel", directory), "silu_and_mul", None)
    if not callable(silu_and_mul):
        raise TypeError("kernel.py defines no function 'silu_and_mul'")

    def workload(*inputs: torch.Tensor) -> torch.Tensor:
        return mlp_stack(silu_and_mul, *inputs)  # type: ignore[arg-type]

    return workload


def min_bytes(case: Case) -> int:
    """Every weight read once, the hidden states read once and the final ones written once."""
    hidden, inter = case.int_param("hidden"), case.int_param("inter")
    weights = case.int_param("layers") * 3 * hidden * inter
    return (weights + 2 * case.int_param("tokens") * hidden) * case.dtype().itemsize


def _case(hidden: int, inter: int, tokens: int, layers: int, dtype: str) -> Case:
    return Case.make(hidden=hidden, inter=inter, tokens=tokens, layers=layers, dtype=dtype)


TASK = KernelTask(
    name="e2e/llm/mlp_swiglu_decode",
    cases=[_case(*c) for c in CASES],
    ci_cases=[_case(*c) for c in CI_CASES],
    make_inputs=make_inputs,
    reference=reference,
    load_candidate=load_candidate,
    tolerances=TOLERANCES,
    min_bytes=min_bytes,
)

if __name__ == "__main__":
    raise SystemExit(run_task(TASK))
