// SwiGLU activation (SiLU and multiply): for x of shape (tokens, 2 * d),
// out[t, j] = silu(x[t, j]) * x[t, d + j] with silu(a) = a / (1 + exp(-a)), computed in float32
// and stored in x's dtype (float32 or float16). A plain, correct starting point: one thread per
// output element, scalar loads, a 64-bit division per element to find the token.
//
// The harness calls the extern "C" launcher below through ctypes; keep its name and signature.

#include <cuda_fp16.h>
#include <cuda_runtime.h>

// Threads per block of the 1-D launch (the kernel indexes with blockDim.x, any value up to 1024).
#define THREADS_PER_BLOCK 256

__device__ __forceinline__ float to_float(float v) { return v; }
__device__ __forceinline__ float to_float(__half v) { return __half2float(v); }

template <typename T>
__device__ __forceinline__ T from_float(float v);
template <>
__device__ __forceinline__ float from_float<float>(float v) { return v; }
template <>
__device__ __forceinline__ __half from_float<__half>(float v) { return __float2half_rn(v); }

template <typename T>
__global__ void silu_and_mul_kernel(const T* x, T* out, long long d, long long total) {
    const long long i = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (i < total) {
        const long long token = i / d;
        const long long j = i - token * d;
        const T* x_row = x + token * 2 * d;
        const float a = to_float(x_row[j]);
        const float b = to_float(x_row[d + j]);
        out[i] = from_float<T>(a / (1.0f + expf(-a)) * b);
    }
}

// x: (tokens, 2 * d) contiguous; out: (tokens, d) contiguous; dtype: 0 = float32, 1 = float16.
// Launches on `stream`; returns the CUDA error code of the launch (0 = success).
extern "C" int silu_and_mul_launch(const void* x, void* out, long long tokens, long long d, long long dtype,
                                   cudaStream_t stream) {
    const long long total = tokens * d;
    if (total <= 0) {
        return 0;
    }
    const long long blocks = (total + THREADS_PER_BLOCK - 1) / THREADS_PER_BLOCK;
    const dim3 grid(static_cast<unsigned int>(blocks));
    if (dtype == 0) {
        silu_and_mul_kernel<float><<<grid, THREADS_PER_BLOCK, 0, stream>>>(
            static_cast<const float*>(x), static_cast<float*>(out), d, total);
    } else if (dtype == 1) {
        silu_and_mul_kernel<__half><<<grid, THREADS_PER_BLOCK, 0, stream>>>(
            static_cast<const __half*>(x), static_cast<__half*>(out), d, total);
    } else {
        return static_cast<int>(cudaErrorInvalidValue);
    }
    return static_cast<int>(cudaGetLastError());
}
