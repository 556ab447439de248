"""fp8 scaled GEMM: write it in Triton (no kernel is given).

`fp8_scaled_gemm(a, b, scale_a, scale_b)`:
- a: (M, K) torch.float8_e4m3fn, row-major (contiguous);
- b: (K, N) torch.float8_e4m3fn, column-major: b.stride() == (1, K), i.e. b.t() is a contiguous
  (N, K) tensor (element (k, n) lives at offset n * K + k);
- scale_a: float32, shape (1, 1) (per tensor) or (M, 1) (per row of A);
- scale_b: float32, shape (1, 1) (per tensor) or (1, N) (per column of B);
returns a new contiguous (M, N) bfloat16 tensor C = (A @ B) * scale_a * scale_b, the products
accumulated in float32. The work must be done by a @triton.jit kernel named
`fp8_scaled_gemm_kernel` that multiplies the float8 tiles with tl.dot (the fp8 tensor cores),
launched on every call. The full contract is in the task's instructions.
"""

import torch
import triton  # noqa: F401  (for the kernel you write)
import triton.language as tl  # noqa: F401

# Launch knobs: keep these module-level names and use them (an autotuner edits the lines):
# tile sizes, the program-order swizzle group, warps and pipeline stages.
BLOCK_M = 64
BLOCK_N = 64
BLOCK_K = 64
GROUP_M = 1
NUM_WARPS = 4
NUM_STAGES = 2

# Required: @triton.jit def fp8_scaled_gemm_kernel(...): computes C, launched below.


def fp8_scaled_gemm(a: torch.Tensor, b: torch.Tensor, scale_a: torch.Tensor, scale_b: torch.Tensor) -> torch.Tensor:
    raise NotImplementedError("write the Triton kernel fp8_scaled_gemm_kernel")
