// 2-D transpose of a float32 matrix: out[c, r] = x[r, c] for x (rows, cols) and out (cols, rows),
// both contiguous. A plain, correct starting point: one thread per output element, so the writes
// are coalesced but every read of a warp touches 32 different rows of x.
//
// The harness calls the extern "C" launcher below through ctypes; keep its name and signature.

#include <cuda_runtime.h>

// Threads per block of the 1-D launch (the kernel indexes with blockDim.x, any value up to 1024).
#define THREADS_PER_BLOCK 256

__global__ void transpose_kernel(const float* x, float* out, long long rows, long long cols) {
    const long long o = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (o < rows * cols) {
        const long long c = o / rows;  // output row = input column
        const long long r = o - c * rows;
        out[o] = x[r * cols + c];
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
