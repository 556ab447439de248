"""Inclusive prefix sum along the last dimension in Triton, tuned: large blocks.

Same contract as the starting kernel (float32 output, float32 accumulation). Why it is faster: the
baseline scans 128 elements per step, so each step is a load that must arrive before a block scan
and sum, and a 128k row is ~1000 dependent memory round trips. Here rows of up to 8192 elements
are scanned in one block (BLOCK_SIZE = next_power_of_2(n), no carry at all), and longer rows in
4096-element blocks with 8 warps: 32x fewer round trips, each moving 16 KB, and wide loads and
stores per thread. Launch parameters are cached per (n, dtype); row offsets are int64.
"""

import torch
import triton
import triton.language as tl

MAX_SINGLE_BLOCK = 8192
CHUNK = 4096

_launch_cache: dict[tuple[int, torch.dtype], tuple[int, int]] = {}


@triton.jit
def cumsum_kernel(x_ptr, out_ptr, x_row_stride, out_row_stride, n_cols, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * x_row_stride
    out_row = out_ptr + row * out_row_stride
    offsets = tl.arange(0, BLOCK_SIZE)
    carry = 0.0
    for start in range(0, n_cols, BLOCK_SIZE):
        cols = start + offsets
        mask = cols < n_cols
        x = tl.load(x_row + cols, mask=mask, other=0.0).to(tl.float32)
        tl.store(out_row + cols, tl.cumsum(x, axis=0) + carry, mask=mask)
        carry += tl.sum(x, axis=0)


def _launch_params(n_cols: int, dtype: torch.dtype) -> tuple[int, int]:
    key = (n_cols, dtype)
    params = _launch_cache.get(key)
    if params is None:
        block = triton.next_power_of_2(n_cols)
        block = block if block <= MAX_SINGLE_BLOCK else CHUNK
        params = _launch_cache[key] = (block, 4 if block <= 2048 else 8)
    return params


def cumsum(x: torch.Tensor) -> torch.Tensor:
    x = x.contiguous()
    n_rows, n_cols = x.shape
    out = torch.empty((n_rows, n_cols), dtype=torch.float32, device=x.device)
    block, num_warps = _launch_params(n_cols, x.dtype)
    cumsum_kernel[(n_rows,)](x, out, x.stride(0), out.stride(0), n_cols, BLOCK_SIZE=block, num_warps=num_warps)
    return out
