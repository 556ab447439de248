// 2-D transpose of a float32 matrix: out[c, r] = x[r, c] for x (rows, cols) and out (cols, rows),
// both contiguous. A plain, correct kernel to optimise: one thread per input element, so the
// reads are coalesced but every write of a warp lands in 32 different rows of out.
//
// The harness calls the extern "C" launcher below through ctypes; keep its name and signature.

#include <cuda_runtime.h>

// Threads per block of the 1-D launch (the kernel indexes with blockDim.x, any value up to 1024).
#define THREADS_PER_BLOCK 256

__global__ void transpose_kernel(const float* x, float* out, long long rows, long long cols) {
    const long long i = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (i < rows * cols) {
        const long long r = i / cols;
        const long long c = i - r * cols;
        out[c * rows + r] = x[i];
    }
}

// x: (rows, cols) contiguous float32; out: (cols, rows) contiguous float32.
// Launches on `stream`; returns the CUDA error code of the launch (0 = success).
extern "C" int transpose_launch(const float* x, float* out, long long rows, long long cols, cudaStream_t stream) {
    const long long total = rows * cols;
    if (rows <= 0 || cols <= 0) {
        return 0;
    }
    const long long blocks = (total + THREADS_PER_BLOCK - 1) / THREADS_PER_BLOCK;
    transpose_kernel<<<static_cast<unsigned int>(blocks), THREADS_PER_BLOCK, 0, stream>>>(x, out, rows, cols);
    return static_cast<int>(cudaGetLastError());
}
