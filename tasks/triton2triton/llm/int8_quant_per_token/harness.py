"""Evaluation steps of the per-token int8 quantization task: `python3 harness.py compile|correctness|performance`."""

import torch

from aka.harness import Case, KernelTask, candidate_function, random_tensor, run_task

ZERO_ROW_STRIDE = 997  # rows 0, 997, 1994, ... are all zeros: the amax == 0 convention is exercised
CASES = (
    # (tokens, hidden, dtype)
    (8192, 4096, "bfloat16"),    # Llama-2-7B / Llama-3-8B hidden size
    (4096, 14336, "float16"),    # Llama-3-8B MLP intermediate (input of down_proj)
    (3001, 5120, "float32"),     # odd token count
    (16384, 2048, "bfloat16"),   # many short rows
    (6000, 3001, "float16"),     # odd hidden size: rows are not 16-byte aligned
)

# q is int8 and compared EXACTLY (the default for integer outputs): the contract pins every step
# (exact amax, IEEE round-to-nearest divisions, one rounded float32 product, round half to even),
# and the reference below reproduces exactly those operations, so a correct kernel matches bit for
# bit. (Dividing x by scale instead, an approximate division, or an fma-fused product differs on
# near-ties and fails, as it would against the pinned contract.) scale is float32 and uses the
# default 1e-5 tolerance, although a div_rn scale matches exactly too.


def make_inputs(case: Case, generator: torch.Generator, device: torch.device) -> tuple[torch.Tensor, ...]:
    """Activations of std 1 with some rows zeroed."""
    x = random_tensor((case.int_param("tokens"), case.int_param("hidden")), case.dtype(), generator, device)
    x[::ZERO_ROW_STRIDE] = 0
    return (x,)


def reference(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """vLLM's dynamic per-token int8 quantization, with every rounding step pinned.

    Tensor-by-tensor divisions (never `127.0 / tensor`, which PyTorch computes as reciprocal
    times 127, nor `tensor / 127.0`, which CUDA PyTorch may turn into a multiplication).
    """
    xf = x.float()
    amax = xf.abs().amax(dim=1, keepdim=True)
    c127 = torch.full_like(amax, 127.0)
    scale = amax / c127
    inv = torch.where(amax > 0, c127 / torch.where(amax > 0, amax, torch.ones_like(amax)), torch.zeros_like(amax))
    v = xf * inv
    q = torch.round(v).clamp(-127, 127).to(torch.int8)
    return q, scale


def min_bytes(case: Case) -> int:
    """x read once, q (1 byte per element) and scale (4 bytes per row) written once."""
    tokens, hidden = case.int_param("tokens"), case.int_param("hidden")
    return tokens * hidden * (case.dtype().itemsize + 1) + 4 * tokens


TASK = KernelTask(
    name="triton2triton/llm/int8_quant_per_token",
    cases=[Case.make(tokens=t, hidden=h, dtype=d) for t, h, d in CASES],
    ci_cases=[Case.make(tokens=5, hidden=700, dtype="float32"), Case.make(tokens=3, hidden=1031, dtype="bfloat16"),
              Case.make(tokens=4, hidden=256, dtype="float16")],
    make_inputs=make_inputs,
    reference=reference,
    load_candidate=candidate_function("kernel", "int8_quant_per_token"),
    min_bytes=min_bytes,
)

if __name__ == "__main__":
    raise SystemExit(run_task(TASK))
