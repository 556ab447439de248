// Row softmax in float32: out[r, i] = exp(x[r, i] - max_r) / sum_j exp(x[r, j] - max_r).
// A plain, correct starting point: one block per row, scalar loads, three passes over the row
// (max, sum of exponentials, normalise) and a shared-memory tree for each reduction.
//
// The harness calls the extern "C" launcher below through ctypes; keep its name and signature.

#include <cuda_runtime.h>
#include <math.h>

// Threads per block (one block per row). Must be a power of two between 32 and 1024: the tree
// reductions below halve the active threads each step.
#define THREADS_PER_BLOCK 256

__global__ void softmax_kernel(const float* x, float* out, long long cols) {
    __shared__ float partial[THREADS_PER_BLOCK];
    const long long row = blockIdx.x;
    const float* x_row = x + row * cols;
    float* out_row = out + row * cols;

    float row_max = -INFINITY;
    for (long long i = threadIdx.x; i < cols; i += blockDim.x) {
        row_max = fmaxf(row_max, x_row[i]);
    }
    partial[threadIdx.x] = row_max;
    __syncthreads();
    for (unsigned int stride = blockDim.x / 2; stride > 0; stride >>= 1) {
        if (threadIdx.x < stride) {
            partial[threadIdx.x] = fmaxf(partial[threadIdx.x], partial[threadIdx.x + stride]);
        }
        __syncthreads();
    }
    row_max = partial[0];
    __syncthreads();  // everyone has read the maximum before the buffer is reused

    float sum = 0.0f;
    for (long long i = threadIdx.x; i < cols; i += blockDim.x) {
        sum += expf(x_row[i] - row_max);
    }
    partial[threadIdx.x] = sum;
    __syncthreads();
    for (unsigned int stride = blockDim.x / 2; stride > 0; stride >>= 1) {
        if (threadIdx.x < stride) {
            partial[threadIdx.x] += partial[threadIdx.x + stride];
        }
        __syncthreads();
    }
    sum = partial[0];

    for (long long i = threadIdx.x; i < cols; i += blockDim.x) {
        out_row[i] = expf(x_row[i] - row_max) / sum;
    }
}

// x, out: (rows, cols) contiguous float32. Launches on `stream`; returns the CUDA error code of
// the launch (0 = success).
extern "C" int softmax_launch(const float* x, float* out, long long rows, long long cols, cudaStream_t stream) {
    if (rows <= 0 || cols <= 0) {
        return 0;
    }
    softmax_kernel<<<static_cast<unsigned int>(rows), THREADS_PER_BLOCK, 0, stream>>>(x, out, cols);
    return static_cast<int>(cudaGetLastError());
}
