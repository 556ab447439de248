"""GeGLU in Triton, tuned: a 2-D grid of (row, column block), no integer division, big blocks.

Why it is faster than the reference (gelu on the strided gate view, then a multiply: two kernels
and ~10 bytes per 16-bit output element) and than the starting kernel:
- one fused pass: 6 bytes per 16-bit output element (read gate and up, write out), ~1.6x fewer;
- the grid is (tokens, cdiv(d, BLOCK)), so each program knows its row and reads two contiguous
  runs (gate and up of one row); the starter's per-element 64-bit `// d` and `% d` are gone and
  loads vectorise to 16 bytes whenever d is a multiple of 8 (Triton's divisibility
  specialisation of `d`);
- blocks of up to 2048 elements with 8 warps instead of 256 with 4: fewer, fatter programs;
- gelu_tanh(g) = g * sigmoid(2z) = g / (1 + 2^(-2z * log2(e))): one ex2 and one division instead
  of exp + two divisions for tanh, accurate in both tails.
Rounding is the contract's: gelu rounded to x.dtype before the multiply.
"""

import torch
import triton
import triton.language as tl

_CONFIGS: dict[int, tuple[int, int]] = {}


@triton.jit
def geglu_kernel(x_ptr, out_ptr, d, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = cols < d
    x_row = x_ptr + row * (2 * d)
    gate = tl.load(x_row + cols, mask=mask, other=0.0).to(tl.float32)
    up = tl.load(x_row + d + cols, mask=mask, other=0.0).to(tl.float32)
    # -2 * log2(e) * sqrt(2/pi) * (g + 0.044715 g^3)
    t = -2.302208198144325 * (gate + 0.044715 * gate * gate * gate)
    g = gate / (1.0 + tl.exp2(t))
    g = g.to(out_ptr.dtype.element_ty).to(tl.float32)  # the reference rounds gelu's output first
    tl.store(out_ptr + row * d + cols, (g * up).to(out_ptr.dtype.element_ty), mask=mask)


def _launch_config(d: int) -> tuple[int, int]:
    config = _CONFIGS.get(d)
    if config is None:
        block = min(2048, triton.next_power_of_2(d))
        config = _CONFIGS[d] = (block, 8 if block >= 2048 else 4)
    return config


def geglu(x: torch.Tensor) -> torch.Tensor:
    x = x.contiguous()
    tokens, two_d = x.shape
    d = two_d // 2
    out = torch.empty((tokens, d), dtype=x.dtype, device=x.device)
    block, num_warps = _launch_config(d)
    geglu_kernel[(tokens, triton.cdiv(d, block))](x, out, d, BLOCK_SIZE=block, num_warps=num_warps)
    return out
