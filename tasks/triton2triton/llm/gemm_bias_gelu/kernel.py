"""C = gelu_tanh(A @ B + bias) in Triton: the starting point to optimise.

`gemm_bias_gelu(a, b, bias)` takes A (M, K), B (K, N) and bias (N,), all contiguous and of one dtype
(float16 or bfloat16), and returns a new (M, N) tensor of that dtype. The product accumulates in
float32; bias and the tanh-approximate GELU are applied in float32 and the result is cast once.
"""

import torch
import triton
import triton.language as tl

BLOCK_M = 32
BLOCK_N = 32
BLOCK_K = 32
NUM_WARPS = 4
NUM_STAGES = 1


@triton.jit
def gemm_bias_gelu_kernel(a_ptr, b_ptr, bias_ptr, c_ptr, M, N, K,
                          stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                          BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    # One output tile per program, tiles numbered row by row.
    pid = tl.program_id(axis=0)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    pid_m = pid // num_pid_n
    pid_n = pid % num_pid_n
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        ks = k0 + offs_k
        a = tl.load(a_ptr + offs_m[:, None] * stride_am + ks[None, :] * stride_ak,
                    mask=(offs_m[:, None] < M) & (ks[None, :] < K), other=0.0)
        b = tl.load(b_ptr + ks[:, None] * stride_bk + offs_n[None, :] * stride_bn,
                    mask=(ks[:, None] < K) & (offs_n[None, :] < N), other=0.0)
        acc += tl.dot(a, b)
    bias = tl.load(bias_ptr + offs_n, mask=offs_n < N, other=0.0).to(tl.float32)
    x = acc + bias[None, :]
    # gelu_tanh(x) = 0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 x^3))), tanh(u) = 2 / (1 + e^-2u) - 1
    u = 0.7978845608028654 * (x + 0.044715 * x * x * x)
    t = 2.0 / (1.0 + tl.exp(-2.0 * u)) - 1.0
    y = 0.5 * x * (1.0 + t)
    c_ptrs = c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn
    tl.store(c_ptrs, y.to(c_ptr.dtype.element_ty), mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


def gemm_bias_gelu(a: torch.Tensor, b: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    a, b, bias = a.contiguous(), b.contiguous(), bias.contiguous()
    M, K = a.shape
    N = b.shape[1]
    c = torch.empty((M, N), dtype=a.dtype, device=a.device)
    grid = (triton.cdiv(M, BLOCK_M) * triton.cdiv(N, BLOCK_N),)
    gemm_bias_gelu_kernel[grid](a, b, bias, c, M, N, K,
                                a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1),
                                BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K,
                                num_warps=NUM_WARPS, num_stages=NUM_STAGES)
    return c
