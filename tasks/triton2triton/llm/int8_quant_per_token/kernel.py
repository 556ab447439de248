"""Dynamic per-token symmetric int8 quantization in Triton: the starting point to optimise.

`int8_quant_per_token(x)` takes a contiguous (tokens, hidden) tensor of float32, float16 or bfloat16
and returns (q, scale): q int8 (tokens, hidden) and scale float32 (tokens, 1). For every row, in
float32 (x converted exactly):
    amax  = max_j |x[j]|
    scale = amax / 127                        (IEEE round-to-nearest division: tl.math.div_rn)
    inv   = 127 / amax, or 0 when amax == 0   (IEEE round-to-nearest division: tl.math.div_rn)
    v     = x * inv                           (one rounded float32 product, not fused into an add)
    q     = clamp(round_half_to_even(v), -127, 127)
An all-zero row gives scale 0 and q 0. Triton's plain `/` on float32 is an approximate division,
hence div_rn; rounding uses the float32 magic constant 1.5 * 2^23 (exact for |v| < 2^22) with fma
contraction disabled at launch, so v is rounded once as a product and once to an integer.
"""

import torch
import triton
import triton.language as tl

BLOCK_SIZE = 256
NUM_WARPS = 4
ROUND_MAGIC = 12582912.0  # 1.5 * 2**23: (v + M) - M rounds v to the nearest integer, ties to even


@triton.jit
def row_absmax_kernel(x_ptr, amax_ptr, scale_ptr, hidden, stride_x, BLOCK_SIZE: tl.constexpr):
    # Pass 1: one program per row, max |x| in BLOCK_SIZE chunks.
    row = tl.program_id(axis=0)
    x_row = x_ptr + row.to(tl.int64) * stride_x
    running = tl.zeros((BLOCK_SIZE,), dtype=tl.float32)
    for start in range(0, hidden, BLOCK_SIZE):
        cols = start + tl.arange(0, BLOCK_SIZE)
        x = tl.load(x_row + cols, mask=cols < hidden, other=0.0).to(tl.float32)
        running = tl.maximum(running, tl.abs(x))
    amax = tl.max(running, axis=0)
    tl.store(amax_ptr + row, amax)
    tl.store(scale_ptr + row, tl.math.div_rn(amax, 127.0))


@triton.jit
def int8_quant_kernel(x_ptr, amax_ptr, q_ptr, hidden, stride_x, stride_q, BLOCK_SIZE: tl.constexpr,
                      ROUND_MAGIC: tl.constexpr):
    # Pass 2: one program per row, reads the row again and quantizes it.
    row = tl.program_id(axis=0)
    amax = tl.load(amax_ptr + row)
    inv = tl.where(amax > 0.0, tl.math.div_rn(127.0, amax), 0.0)
    x_row = x_ptr + row.to(tl.int64) * stride_x
    q_row = q_ptr + row.to(tl.int64) * stride_q
    for start in range(0, hidden, BLOCK_SIZE):
        cols = start + tl.arange(0, BLOCK_SIZE)
        mask = cols < hidden
        x = tl.load(x_row + cols, mask=mask, other=0.0).to(tl.float32)
        v = x * inv
        r = (v + ROUND_MAGIC) - ROUND_MAGIC
        r = tl.minimum(tl.maximum(r, -127.0), 127.0)
        tl.store(q_row + cols, r.to(tl.int8), mask=mask)


def int8_quant_per_token(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    x = x.contiguous()
    tokens, hidden = x.shape
    q = torch.empty((tokens, hidden), dtype=torch.int8, device=x.device)
    scale = torch.empty((tokens, 1), dtype=torch.float32, device=x.device)
    amax = torch.empty((tokens,), dtype=torch.float32, device=x.device)
    # enable_fp_fusion=False: x * inv must be rounded to float32 before the rounding add (an fma
    # would round the exact product and can differ on near-ties).
    row_absmax_kernel[(tokens,)](x, amax, scale, hidden, x.stride(0),
                                 BLOCK_SIZE=BLOCK_SIZE, num_warps=NUM_WARPS)
    int8_quant_kernel[(tokens,)](x, amax, q, hidden, x.stride(0), q.stride(0), BLOCK_SIZE=BLOCK_SIZE,
                                 ROUND_MAGIC=ROUND_MAGIC, num_warps=NUM_WARPS, enable_fp_fusion=False)
    return q, scale
