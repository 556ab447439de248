// Llama RMSNorm: out[r, i] = x[r, i] * rsqrt(mean_j(x[r, j]^2) + eps) * weight[i], computed in
// float32 and stored in x's dtype (float32 or float16). A plain, correct starting point: one block
// per row, scalar loads, a shared-memory tree for the sum of squares, and a second pass over the row.
//
// The harness calls the extern "C" launcher below through ctypes; keep its name and signature.

#include <cuda_fp16.h>
#include <cuda_runtime.h>

// Threads per block (one block per row). Must be a power of two between 32 and 1024: the tree
// reduction below halves the active threads each step.
#define THREADS_PER_BLOCK 128

__device__ __forceinline__ float to_float(float v) { return v; }
__device__ __forceinline__ float to_float(__half v) { return __half2float(v); }

template <typename T>
__device__ __forceinline__ T from_float(float v);
template <>
__device__ __forceinline__ float from_float<float>(float v) { return v; }
template <>
__device__ __forceinline__ __half from_float<__half>(float v) { return __float2half_rn(v); }

template <typename T>
__global__ void rmsnorm_kernel(const T* x, const T* weight, T* out, long long hidden, float eps) {
    __shared__ float partial[THREADS_PER_BLOCK];
    const long long row = blockIdx.x;
    const T* x_row = x + row * hidden;
    T* out_row = out + row * hidden;

    float sum_sq = 0.0f;
    for (long long i = threadIdx.x; i < hidden; i += blockDim.x) {
        const float v = to_float(x_row[i]);
        sum_sq += v * v;
    }
    partial[threadIdx.x] = sum_sq;
    __syncthreads();
    for (unsigned int stride = blockDim.x / 2; stride > 0; stride >>= 1) {
        if (threadIdx.x < stride) {
            partial[threadIdx.x] += partial[threadIdx.x + stride];
        }
        __syncthreads();
    }
    const float inv_rms = rsqrtf(partial[0] / static_cast<float>(hidden) + eps);

    for (long long i = threadIdx.x; i < hidden; i += blockDim.x) {
        out_row[i] = from_float<T>(to_float(x_row[i]) * inv_rms * to_float(weight[i]));
    }
}

// x, out: (rows, hidden) contiguous; weight: (hidden,); dtype: 0 = float32, 1 = float16.
// Launches on `stream`; returns the CUDA error code of the launch (0 = success).
extern "C" int rmsnorm_launch(const void* x, const void* weight, void* out, long long rows, long long hidden,
                              long long dtype, float eps, cudaStream_t stream) {
    if (rows <= 0 || hidden <= 0) {
        return 0;
    }
    const dim3 grid(static_cast<unsigned int>(rows));
    if (dtype == 0) {
        rmsnorm_kernel<float><<<grid, THREADS_PER_BLOCK, 0, stream>>>(
            static_cast<const float*>(x), static_cast<const float*>(weight), static_cast<float*>(out), hidden, eps);
    } else if (dtype == 1) {
        rmsnorm_kernel<__half><<<grid, THREADS_PER_BLOCK, 0, stream>>>(
            static_cast<const __half*>(x), static_cast<const __half*>(weight), static_cast<__half*>(out), hidden, eps);
    } else {
        return static_cast<int>(cudaErrorInvalidValue);
    }
    return static_cast<int>(cudaGetLastError());
}
