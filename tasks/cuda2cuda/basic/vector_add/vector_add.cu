// Element-wise float32 addition: out[i] = a[i] + b[i]. A plain, correct starting point.
//
// The harness calls the extern "C" launcher below; keep its name and signature.

#include <cuda_runtime.h>

// Threads per block of the launch (the kernel indexes with blockDim.x, so any value up to 1024 works).
#define THREADS_PER_BLOCK 128

__global__ void vector_add_kernel(const float* a, const float* b, float* out, long long n) {
    long long i = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (i < n) {
        out[i] = a[i] + b[i];
    }
}

// Launches the kernel on `stream`; returns the CUDA error code of the launch (0 = success).
extern "C" int vector_add_launch(const float* a, const float* b, float* out, long long n, cudaStream_t stream) {
    if (n <= 0) {
        return 0;
    }
    const int threads = THREADS_PER_BLOCK;
    const long long blocks = (n + threads - 1) / threads;
    vector_add_kernel<<<static_cast<unsigned int>(blocks), threads, 0, stream>>>(a, b, out, n);
    return static_cast<int>(cudaGetLastError());
}
