"""Fused linear + bias + ReLU in Triton: Hopper-sized tiles, grouped ordering, aligned loads.

What changed from the starting kernel (32 x 32 x 32 tiles, 4 warps, 2 stages):
- 128 x 128 x 64 tiles (K <= 1024) or 128 x 256 x 64 (larger K), 8 warps, 3-4 pipeline stages:
  enough work per program to keep the wgmma tensor cores fed (the Triton matmul tutorial's best
  Hopper configurations);
- grouped (GROUP_M = 8) program ordering, so programs running together reuse weight tiles in L2;
- K is passed as K // 8 and rebuilt in the kernel, so the compiler knows every row starts on a
  16-byte boundary and the K-tail mask is constant over 8 elements: 16-byte vector loads even for
  K = 1000 (a plain K argument not divisible by 16 gets no alignment hint at all);
- rows/columns beyond M/N are clamped for the loads instead of masked (only the store is masked).
Against the baseline (cuBLAS GEMM + a separate ReLU pass over the output) the fused epilogue
saves one read and one write of the (M, N) output. Expected on an H200 (NOT measured): a clear
win (>= 1.2x) only where that pass is a large share of the time, the small-K case
(16384, 256, 4096) and possibly (8191, 768, 3072); near parity or slower than cuBLAS on the
compute-bound K = 2048-4096 cases. Far faster than the starting kernel everywhere.
"""

import torch
import triton
import triton.language as tl

_CONFIGS: dict[tuple[int, int, int], tuple[int, int, int, int, int, int]] = {}


@triton.jit
def linear_bias_relu_kernel(x_ptr, w_ptr, b_ptr, out_ptr, M, N, K8, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                            BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr):
    K = K8 * 8  # the contract guarantees K % 8 == 0; this tells the compiler
    pid = tl.program_id(0)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    num_pid_in_group = GROUP_M * num_pid_n
    first_pid_m = (pid // num_pid_in_group) * GROUP_M
    group_size_m = min(num_pid_m - first_pid_m, GROUP_M)
    pid_m = first_pid_m + (pid % num_pid_in_group) % group_size_m
    pid_n = (pid % num_pid_in_group) // group_size_m

    rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rows_in = tl.where(rows < M, rows, 0).to(tl.int64)  # clamped: out-of-range rows load row 0
    cols_in = tl.where(cols < N, cols, 0).to(tl.int64)
    ks = tl.arange(0, BLOCK_K)
    x_ptrs = x_ptr + rows_in[:, None] * K + ks[None, :]  # [BLOCK_M, BLOCK_K] of x
    w_ptrs = w_ptr + cols_in[None, :] * K + ks[:, None]  # [BLOCK_K, BLOCK_N] of weight.T
    acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        k_left = K - k * BLOCK_K
        a = tl.load(x_ptrs, mask=ks[None, :] < k_left, other=0.0)
        b = tl.load(w_ptrs, mask=ks[:, None] < k_left, other=0.0)
        acc = tl.dot(a, b, acc)
        x_ptrs += BLOCK_K
        w_ptrs += BLOCK_K
    bias = tl.load(b_ptr + cols, mask=cols < N, other=0.0).to(tl.float32)
    y = tl.maximum(acc + bias[None, :], 0.0)
    out_ptrs = out_ptr + rows[:, None].to(tl.int64) * N + cols[None, :]
    tl.store(out_ptrs, y.to(out_ptr.dtype.element_ty), mask=(rows[:, None] < M) & (cols[None, :] < N))


def _launch_config(m: int, n: int, k: int) -> tuple[int, int, int, int, int, int]:
    """(BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M, num_warps, num_stages) per shape."""
    key = (m, n, k)
    config = _CONFIGS.get(key)
    if config is None:
        if k <= 1024 or n < 256:
            config = (128, 128, 64, 8, 8, 4 if k > 256 else 3)
        else:
            config = (128, 256, 64, 8, 8, 3)
        _CONFIGS[key] = config
    return config


def linear_bias_relu(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    x, weight = x.contiguous(), weight.contiguous()
    m, k = x.shape
    n = weight.shape[0]
    out = torch.empty((m, n), dtype=x.dtype, device=x.device)
    block_m, block_n, block_k, group_m, num_warps, num_stages = _launch_config(m, n, k)
    grid = (triton.cdiv(m, block_m) * triton.cdiv(n, block_n),)
    linear_bias_relu_kernel[grid](x, weight, bias, out, m, n, k // 8, BLOCK_M=block_m, BLOCK_N=block_n,
                                  BLOCK_K=block_k, GROUP_M=group_m, num_warps=num_warps, num_stages=num_stages)
    return out
