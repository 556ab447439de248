"""Fused linear + bias + ReLU in Triton: a plain, correct starting point.

`linear_bias_relu(x, weight, bias)` equals `F.relu(F.linear(x, weight, bias))` for x (M, K),
weight (N, K) (nn.Linear's layout), bias (N,), all float16 or bfloat16: y = relu(x @ weight.T +
bias), accumulated in float32 and rounded once to the input dtype.

A textbook tiled matmul: one program per BLOCK_M x BLOCK_N output tile, a loop over K in
BLOCK_K steps with tl.dot, and the bias and ReLU applied to the float32 accumulator before the
store (the fusion the PyTorch version lacks). The small tiles are the thing to improve.
"""

import torch
import triton
import triton.language as tl

BLOCK_M = 32
BLOCK_N = 32
BLOCK_K = 32
NUM_WARPS = 4
NUM_STAGES = 2


@triton.jit
def linear_bias_relu_kernel(x_ptr, w_ptr, b_ptr, out_ptr, M, N, K,
                            BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    ks = tl.arange(0, BLOCK_K)
    x_ptrs = x_ptr + rows[:, None].to(tl.int64) * K + ks[None, :]  # [BLOCK_M, BLOCK_K] of x
    w_ptrs = w_ptr + cols[None, :].to(tl.int64) * K + ks[:, None]  # [BLOCK_K, BLOCK_N] of weight.T
    acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
    for k in range(0, K, BLOCK_K):
        a = tl.load(x_ptrs, mask=(rows[:, None] < M) & (ks[None, :] + k < K), other=0.0)
        b = tl.load(w_ptrs, mask=(ks[:, None] + k < K) & (cols[None, :] < N), other=0.0)
        acc = tl.dot(a, b, acc)
        x_ptrs += BLOCK_K
        w_ptrs += BLOCK_K
    bias = tl.load(b_ptr + cols, mask=cols < N, other=0.0).to(tl.float32)
    y = tl.maximum(acc + bias[None, :], 0.0)
    out_ptrs = out_ptr + rows[:, None].to(tl.int64) * N + cols[None, :]
    tl.store(out_ptrs, y.to(out_ptr.dtype.element_ty), mask=(rows[:, None] < M) & (cols[None, :] < N))


def linear_bias_relu(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    x, weight = x.contiguous(), weight.contiguous()
    m, k = x.shape
    n = weight.shape[0]
    out = torch.empty((m, n), dtype=x.dtype, device=x.device)
    grid = (triton.cdiv(m, BLOCK_M), triton.cdiv(n, BLOCK_N))
    linear_bias_relu_kernel[grid](x, weight, bias, out, m, n, k, BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N,
                                  BLOCK_K=BLOCK_K, num_warps=NUM_WARPS, num_stages=NUM_STAGES)
    return out
