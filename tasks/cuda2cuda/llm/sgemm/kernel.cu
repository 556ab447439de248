// Single-precision matrix multiply C = A @ B, all row-major and contiguous: A (M, K), B (K, N),
// C (M, N), float32 in, float32 accumulation, float32 out. A plain, correct kernel to optimise:
// TILE x TILE shared-memory tiles, one output element per thread.
//
// The harness calls the extern "C" launcher below through ctypes; keep its name and signature.

#include <cuda_runtime.h>
#include <stddef.h>

// Edge of the square tile: a block is TILE x TILE threads (at most 32 x 32 = 1024).
#define TILE 16

__global__ void sgemm_kernel(const float* A, const float* B, float* C, int M, int N, int K) {
    __shared__ float As[TILE][TILE];
    __shared__ float Bs[TILE][TILE];
    const int row = blockIdx.y * TILE + threadIdx.y;
    const int col = blockIdx.x * TILE + threadIdx.x;

    float acc = 0.0f;
    for (int k0 = 0; k0 < K; k0 += TILE) {
        const int ka = k0 + threadIdx.x;
        const int kb = k0 + threadIdx.y;
        As[threadIdx.y][threadIdx.x] = (row < M && ka < K) ? A[static_cast<size_t>(row) * K + ka] : 0.0f;
        Bs[threadIdx.y][threadIdx.x] = (kb < K && col < N) ? B[static_cast<size_t>(kb) * N + col] : 0.0f;
        __syncthreads();
        for (int k = 0; k < TILE; ++k) {
            acc += As[threadIdx.y][k] * Bs[k][threadIdx.x];
        }
        __syncthreads();
    }
    if (row < M && col < N) {
        C[static_cast<size_t>(row) * N + col] = acc;
    }
}

// A: (M, K), B: (K, N), C: (M, N), row-major contiguous float32.
// Launches on `stream`; returns the CUDA error code of the launch (0 = success).
extern "C" int sgemm_launch(const float* A, const float* B, float* C, long long M, long long N, long long K,
                            cudaStream_t stream) {
    if (M <= 0 || N <= 0 || K <= 0) {
        return 0;
    }
    const dim3 block(TILE, TILE);
    const dim3 grid(static_cast<unsigned int>((N + TILE - 1) / TILE), static_cast<unsigned int>((M + TILE - 1) / TILE));
    sgemm_kernel<<<grid, block, 0, stream>>>(A, B, C, static_cast<int>(M), static_cast<int>(N), static_cast<int>(K));
    return static_cast<int>(cudaGetLastError());
}
