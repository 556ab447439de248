"""Evaluation steps of the causal depthwise conv1d task: `python3 harness.py compile|correctness|performance`."""

import torch

from aka.harness import Case, KernelTask, candidate_function, random_tensor, run_task

WIDTH = 4  # Mamba's d_conv
CASES = (
    # (batch, channels, seqlen, dtype)
    (4, 5120, 2048, "bfloat16"),   # Mamba-2.8B d_inner = 5120
    (8, 1536, 4096, "float16"),    # Mamba-130M d_inner = 1536, long sequences
    (2, 3000, 4097, "float32"),    # odd channels and seqlen
    (16, 2560, 1000, "bfloat16"),  # Mamba-370M d_inner = 2048 + odd seqlen, many sequences
)

# Default tolerances fit: the kernel and the reference both sum bias + 4 products in float32
# (fma contraction changes at most the last bit or two, ~1e-7 relative against fp32's 1e-5);
# 16-bit outputs differ by at most one rounding step (fp16 1e-3/1e-3, bf16 1e-2/1.6e-2 cover it).


def make_inputs(case: Case, generator: torch.Generator, device: torch.device) -> tuple[torch.Tensor, ...]:
    """x of std 1, conv weights of std 0.5 (4 taps, as trained Mamba conv1d weights are O(0.5)),
    bias of std 0.1."""
    batch, channels, seqlen, dtype = (case.int_param("batch"), case.int_param("channels"),
                                      case.int_param("seqlen"), case.dtype())
    x = random_tensor((batch, channels, seqlen), dtype, generator, device)
    weight = random_tensor((channels, WIDTH), dtype, generator, device, scale=0.5)
    bias = random_tensor((channels,), dtype, generator, device, scale=0.1)
    return x, weight, bias


def reference(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    """causal_conv1d_ref (F.conv1d with padding width-1, groups=channels, the first seqlen outputs),
    spelled out elementwise in float32 so no TF32 convolution path can change the numbers."""
    width, seqlen = weight.shape[1], x.shape[-1]
    xf = torch.nn.functional.pad(x.float(), (width - 1, 0))
    wf = weight.float()
    out = bias.float()[None, :, None].expand(x.shape[0], -1, seqlen).clone()
    for k in range(width):
        out += wf[None, :, k, None] * xf[..., k:k + seqlen]
    return out.to(x.dtype)


TASK = KernelTask(
    name="triton2triton/llm/depthwise_conv1d",
    cases=[Case.make(batch=b, channels=c, seqlen=s, dtype=d) for b, c, s, d in CASES],
    ci_cases=[Case.make(batch=2, channels=5, seqlen=300, dtype="float32"),
              Case.make(batch=1, channels=3, seqlen=129, dtype="bfloat16"),
              Case.make(batch=3, channels=4, seqlen=2, dtype="float16")],
    make_inputs=make_inputs,
    reference=reference,
    load_candidate=candidate_function("kernel", "depthwise_conv1d"),
    # x read once, out written once (weights and bias are negligible and not counted).
    min_bytes=lambda case: (2 * case.int_param("batch") * case.int_param("channels") * case.int_param("seqlen")
                            * case.dtype().itemsize),
)

if __name__ == "__main__":
    raise SystemExit(run_task(TASK))
