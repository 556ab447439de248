"""Row-wise softmax in Triton, tuned on an H200: exp2 in the exponent, and two rows per program
(software-pipelined) for long 16-bit rows, where one row per program left the memory system idle.

Results equal `torch.softmax(x, dim=-1)` (float32 math). Offsets are 32-bit: rows * cols must stay
below 2**31. Measured with the task's harness (CUDA events, L2 flushed), 2048 x 12289 float16 took
44 us against 54 us for one row per program; more warps than 4 were slower for every case.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def _softmax_row(out_ptr, in_ptr, row, in_row_stride, out_row_stride, cols, mask):
    x = tl.load(in_ptr + row * in_row_stride + cols, mask=mask, other=-float("inf")).to(tl.float32)
    x = (x - tl.max(x, axis=0)) * 1.4426950408889634
    numerator = tl.exp2(x)
    y = numerator / tl.sum(numerator, axis=0)
    tl.store(out_ptr + row * out_row_stride + cols, y.to(out_ptr.dtype.element_ty), mask=mask)


@triton.jit
def softmax_kernel(out_ptr, in_ptr, in_row_stride, out_row_stride, n_rows, n_cols,
                   BLOCK_SIZE: tl.constexpr, ROWS_PER_PROGRAM: tl.constexpr, NUM_STAGES: tl.constexpr):
    cols = tl.arange(0, BLOCK_SIZE)
    mask = cols < n_cols
    if ROWS_PER_PROGRAM == 1:
        _softmax_row(out_ptr, in_ptr, tl.program_id(0), in_row_stride, out_row_stride, cols, mask)
    else:
        first_row = tl.program_id(0) * ROWS_PER_PROGRAM
        last_row = tl.minimum(first_row + ROWS_PER_PROGRAM, n_rows)
        for row in tl.range(first_row, last_row, num_stages=NUM_STAGES):
            _softmax_row(out_ptr, in_ptr, row, in_row_stride, out_row_stride, cols, mask)


def _launch_params(n_cols: int, element_size: int) -> tuple[int, int, int]:
    """(BLOCK_SIZE, rows per program, pipeline stages) for a row length and element size."""
    block = triton.next_power_of_2(n_cols)
    if element_size <= 2 and block >= 8192:
        return block, 2, 2
    return block, 1, 1


def softmax(x: torch.Tensor) -> torch.Tensor:
    n_rows, n_cols = x.shape
    x = x.contiguous()
    out = torch.empty_like(x)
    block, rows_per_program, stages = _launch_params(n_cols, x.element_size())
    grid = (triton.cdiv(n_rows, rows_per_program),)
    softmax_kernel[grid](out, x, x.stride(0), out.stride(0), n_rows, n_cols, BLOCK_SIZE=block,
                         ROWS_PER_PROGRAM=rows_per_program, NUM_STAGES=stages, num_warps=4)
    return out
