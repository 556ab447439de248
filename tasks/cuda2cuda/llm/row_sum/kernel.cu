// Row sums of a float32 matrix: out[r] = sum_i x[r, i] for x (rows, n) contiguous, out (rows,).
// A plain, correct kernel to optimise: one block per row, scalar loads, and the textbook first
// shared-memory tree (interleaved addressing: `tid % (2 * stride)`, divergent warps and bank
// conflicts, a __syncthreads per level).
//
// The harness calls the extern "C" launcher below through ctypes; keep its name and signature.

#include <cuda_runtime.h>

// Threads per block (one block per row). Must be a power of two between 32 and 1024: the tree
// below pairs thread t with t + stride for stride = 1, 2, 4, ...
#define THREADS_PER_BLOCK 256

__global__ void row_sum_kernel(const float* x, float* out, long long n) {
    __shared__ float partial[THREADS_PER_BLOCK];
    const unsigned int tid = threadIdx.x;
    const float* x_row = x + static_cast<long long>(blockIdx.x) * n;

    float sum = 0.0f;
    for (long long i = tid; i < n; i += blockDim.x) {
        sum += x_row[i];
    }
    partial[tid] = sum;
    __syncthreads();
    for (unsigned int stride = 1; stride < blockDim.x; stride *= 2) {
        if (tid % (2 * stride) == 0) {
            partial[tid] += partial[tid + stride];
        }
        __syncthreads();
    }
    if (tid == 0) {
        out[blockIdx.x] = partial[0];
    }
}

// x: (rows, n) contiguous float32; out: (rows,) float32.
// Launches on `stream`; returns the CUDA error code of the launch (0 = success).
extern "C" int row_sum_launch(const float* x, float* out, long long rows, long long n, cudaStream_t stream) {
    if (rows <= 0 || n <= 0) {
        return 0;
    }
    row_sum_kernel<<<static_cast<unsigned int>(rows), THREADS_PER_BLOCK, 0, stream>>>(x, out, n);
    return static_cast<int>(cudaGetLastError());
}
