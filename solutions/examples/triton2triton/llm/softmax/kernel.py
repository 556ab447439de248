"""Row softmax of a 2-D tensor in Triton, for long rows: one HBM read where the row fits in
registers, an online (fused max + sum) softmax where it does not.

Same results as the starting kernel (float32 math, one cast back to x.dtype). Why it is faster:
- Rows up to 16384 columns (next power of two) are loaded once into registers (4-16 warps),
  reduced twice there and stored: one read and one write of HBM, against three reads in the
  baseline, and no dependent chain of 256-element loads.
- Longer rows use an online softmax over 4096-element chunks with 8 warps: the running maximum
  and the rescaled running sum come out of one pass, and a second pass writes the output (two
  reads instead of three, each chunk 16x larger than the baseline's, so far fewer serialised
  load/reduce round trips per row).
Both paths live in the one `softmax_kernel`, chosen by a constexpr flag; launch parameters are
cached per (cols, dtype).
"""

import torch
import triton
import triton.language as tl

MAX_SINGLE_BLOCK = 16384  # largest next_power_of_2(cols) kept in registers
CHUNK = 4096  # chunk of the online path
CHUNK_WARPS = 8

_launch_cache: dict[tuple[int, torch.dtype], tuple[int, bool, int]] = {}


@triton.jit
def softmax_kernel(out_ptr, in_ptr, in_row_stride, out_row_stride, n_cols, BLOCK_SIZE: tl.constexpr,
                   SINGLE_PASS: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    in_row = in_ptr + row * in_row_stride
    out_row = out_ptr + row * out_row_stride
    offsets = tl.arange(0, BLOCK_SIZE)
    if SINGLE_PASS:
        mask = offsets < n_cols
        x = tl.load(in_row + offsets, mask=mask, other=-float("inf")).to(tl.float32)
        numerator = tl.exp(x - tl.max(x, axis=0))
        y = numerator / tl.sum(numerator, axis=0)
        tl.store(out_row + offsets, y.to(out_ptr.dtype.element_ty), mask=mask)
    else:
        row_max = -float("inf")
        denominator = 0.0
        for start in range(0, n_cols, BLOCK_SIZE):
            cols = start + offsets
            x = tl.load(in_row + cols, mask=cols < n_cols, other=-float("inf")).to(tl.float32)
            new_max = tl.maximum(row_max, tl.max(x, axis=0))
            denominator = denominator * tl.exp(row_max - new_max) + tl.sum(tl.exp(x - new_max), axis=0)
            row_max = new_max
        for start in range(0, n_cols, BLOCK_SIZE):
            cols = start + offsets
            mask = cols < n_cols
            x = tl.load(in_row + cols, mask=mask, other=-float("inf")).to(tl.float32)
            y = tl.exp(x - row_max) / denominator
            tl.store(out_row + cols, y.to(out_ptr.dtype.element_ty), mask=mask)


def _launch_params(n_cols: int, dtype: torch.dtype) -> tuple[int, bool, int]:
    key = (n_cols, dtype)
    params = _launch_cache.get(key)
    if params is None:
        block = triton.next_power_of_2(n_cols)
        if block <= MAX_SINGLE_BLOCK:
            params = (block, True, 4 if block <= 1024 else 8 if block <= 8192 else 16)
        else:
            params = (CHUNK, False, CHUNK_WARPS)
        _launch_cache[key] = params
    return params


def softmax(x: torch.Tensor) -> torch.Tensor:
    x = x.contiguous()
    n_rows, n_cols = x.shape
    out = torch.empty_like(x)
    block, single_pass, num_warps = _launch_params(n_cols, x.dtype)
    softmax_kernel[(n_rows,)](out, x, x.stride(0), out.stride(0), n_cols, BLOCK_SIZE=block,
                              SINGLE_PASS=single_pass, num_warps=num_warps)
    return out
