"""Batched matrix multiply C[i] = A[i] @ B[i] in Triton: the starting point to optimise.

`batched_gemm(a, b)` takes A (BATCH, M, K) and B (BATCH, K, N), contiguous and of one dtype
(float16 or bfloat16), and returns a new (BATCH, M, N) tensor of that dtype. Each product
accumulates in float32 and is cast once at the store.
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
def batched_gemm_kernel(a_ptr, b_ptr, c_ptr, M, N, K,
                        stride_ab, stride_am, stride_ak, stride_bb, stride_bk, stride_bn,
                        stride_cb, stride_cm, stride_cn,
                        BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    # Axis 0: the output tile inside one matrix (row by row); axis 1: the batch index.
    pid = tl.program_id(axis=0)
    batch = tl.program_id(axis=1).to(tl.int64)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    pid_m = pid // num_pid_n
    pid_n = pid % num_pid_n
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    a_base = a_ptr + batch * stride_ab
    b_base = b_ptr + batch * stride_bb
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        ks = k0 + offs_k
        a = tl.load(a_base + offs_m[:, None] * stride_am + ks[None, :] * stride_ak,
                    mask=(offs_m[:, None] < M) & (ks[None, :] < K), other=0.0)
        b = tl.load(b_base + ks[:, None] * stride_bk + offs_n[None, :] * stride_bn,
                    mask=(ks[:, None] < K) & (offs_n[None, :] < N), other=0.0)
        acc += tl.dot(a, b)
    c_ptrs = c_ptr + batch * stride_cb + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn
    tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


def batched_gemm(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    a, b = a.contiguous(), b.contiguous()
    batch, M, K = a.shape
    N = b.shape[2]
    c = torch.empty((batch, M, N), dtype=a.dtype, device=a.device)
    grid = (triton.cdiv(M, BLOCK_M) * triton.cdiv(N, BLOCK_N), batch)
    batched_gemm_kernel[grid](a, b, c, M, N, K,
                              a.stride(0), a.stride(1), a.stride(2), b.stride(0), b.stride(1), b.stride(2),
                              c.stride(0), c.stride(1), c.stride(2),
                              BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K,
                              num_warps=NUM_WARPS, num_stages=NUM_STAGES)
    return c
