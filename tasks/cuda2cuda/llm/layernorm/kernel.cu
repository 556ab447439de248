// LayerNorm over the last dimension, float32: for each row r of x (rows, hidden),
//   mean = sum_i x[r, i] / hidden,  var = sum_i (x[r, i] - mean)^2 / hidden  (biased),
//   out[r, i] = (x[r, i] - mean) / sqrt(var + eps) * weight[i] + bias[i].
// A plain, correct kernel to optimise: one small block per row, scalar loads, two separate
// reduction passes (mean, then variance) through a shared-memory tree, then a third pass that
// reads the row again to write the output.
//
// The harness calls the extern "C" launcher below through ctypes; keep its name and signature.

#include <cuda_runtime.h>

// Threads per block (one block per row). Must be a power of two between 32 and 1024: the tree
// reductions below halve the active threads each step.
#define THREADS_PER_BLOCK 64

// Sum of `value` over the block through shared memory; every thread gets the total.
__device__ float block_tree_sum(float value, float* partial) {
    partial[threadIdx.x] = value;
    __syncthreads();
    for (unsigned int stride = blockDim.x / 2; stride > 0; stride >>= 1) {
        if (threadIdx.x < stride) {
            partial[threadIdx.x] += partial[threadIdx.x + stride];
        }
        __syncthreads();
    }
    const float total = partial[0];
    __syncthreads();  // everyone has read the total before the buffer is reused
    return total;
}

__global__ void layernorm_kernel(const float* x, const float* weight, const float* bias, float* out,
                                 long long hidden, float eps) {
    __shared__ float partial[THREADS_PER_BLOCK];
    const float* x_row = x + static_cast<long long>(blockIdx.x) * hidden;
    float* out_row = out + static_cast<long long>(blockIdx.x) * hidden;

    float sum = 0.0f;
    for (long long i = threadIdx.x; i < hidden; i += blockDim.x) {
        sum += x_row[i];
    }
    const float mean = block_tree_sum(sum, partial) / static_cast<float>(hidden);

    float sq = 0.0f;
    for (long long i = threadIdx.x; i < hidden; i += blockDim.x) {
        const float d = x_row[i] - mean;
        sq += d * d;
    }
    const float var = block_tree_sum(sq, partial) / static_cast<float>(hidden);
    const float rstd = rsqrtf(var + eps);

    for (long long i = threadIdx.x; i < hidden; i += blockDim.x) {
        out_row[i] = (x_row[i] - mean) * rstd * weight[i] + bias[i];
    }
}

// x, out: (rows, hidden) contiguous float32; weight, bias: (hidden,) float32.
// Launches on `stream`; returns the CUDA error code of the launch (0 = success).
extern "C" int layernorm_launch(const float* x, const float* weight, const float* bias, float* out, long long rows,
                                long long hidden, float eps, cudaStream_t stream) {
    if (rows <= 0 || hidden <= 0) {
        return 0;
    }
    layernorm_kernel<<<static_cast<unsigned int>(rows), THREADS_PER_BLOCK, 0, stream>>>(x, weight, bias, out,
                                                                                       hidden, eps);
    return static_cast<int>(cudaGetLastError());
}
