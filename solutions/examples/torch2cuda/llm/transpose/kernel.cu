// 2-D transpose of a float32 matrix: out[c, r] = x[r, c], x (rows, cols) and out (cols, rows).
//
// Why it is faster than PyTorch's `x.t().contiguous()` (a generic strided copy: one side of
// every warp access is scattered over 32 rows) and than the plain starting kernel (strided
// reads): each block stages a TILE_DIM x TILE_DIM tile in shared memory, so both the global
// reads and the global writes are coalesced 128-byte rows. The tile is padded to TILE_DIM + 1
// columns so reading a tile column hits 32 different banks (no bank conflicts). A flattened 1-D
// grid of tiles covers any shape (gridDim.y would cap the tile rows at 65535).

#include <cuda_runtime.h>

// Tile edge (32 or 64) and thread rows per block: a block is TILE_DIM x BLOCK_ROWS threads and
// each thread moves TILE_DIM / BLOCK_ROWS elements. TILE_DIM must be a multiple of BLOCK_ROWS.
#define TILE_DIM 32
#define BLOCK_ROWS 8

__launch_bounds__(TILE_DIM * BLOCK_ROWS) __global__ void
transpose_kernel(const float* __restrict__ x, float* __restrict__ out, long long rows, long long cols,
                 long long tiles_per_row) {
    __shared__ float tile[TILE_DIM][TILE_DIM + 1];
    const long long tile_index = blockIdx.x;
    const long long r0 = (tile_index / tiles_per_row) * TILE_DIM;  // first input row of the tile
    const long long c0 = (tile_index % tiles_per_row) * TILE_DIM;  // first input column of the tile
    const int tx = threadIdx.x;
    const int ty = threadIdx.y;

    // Read: thread (tx, ty) loads x[r0 + ty + j, c0 + tx]; a warp reads 32 consecutive floats.
    const long long c = c0 + tx;
#pragma unroll
    for (int j = 0; j < TILE_DIM; j += BLOCK_ROWS) {
        const long long r = r0 + ty + j;
        if (r < rows && c < cols) {
            tile[ty + j][tx] = __ldg(x + r * cols + c);
        }
    }
    __syncthreads();

    // Write: out[c0 + ty + j, r0 + tx] = x[r0 + tx, c0 + ty + j] = tile[tx][ty + j]; a warp writes
    // 32 consecutive floats of one output row and reads a tile column (conflict-free thanks to +1).
    const long long out_c = r0 + tx;  // column of out = row of x
#pragma unroll
    for (int j = 0; j < TILE_DIM; j += BLOCK_ROWS) {
        const long long out_r = c0 + ty + j;  // row of out = column of x
        if (out_r < cols && out_c < rows) {
            __stcs(out + out_r * rows + out_c, tile[tx][ty + j]);
        }
    }
}

// x: (rows, cols) contiguous float32; out: (cols, rows) contiguous float32.
// Launches on `stream`; returns the CUDA error code of the launch (0 = success).
extern "C" int transpose_launch(const float* x, float* out, long long rows, long long cols, cudaStream_t stream) {
    if (rows <= 0 || cols <= 0) {
        return 0;
    }
    const long long tiles_per_row = (cols + TILE_DIM - 1) / TILE_DIM;
    const long long tiles = ((rows + TILE_DIM - 1) / TILE_DIM) * tiles_per_row;
    const dim3 block(TILE_DIM, BLOCK_ROWS);
    transpose_kernel<<<static_cast<unsigned int>(tiles), block, 0, stream>>>(x, out, rows, cols, tiles_per_row);
    return static_cast<int>(cudaGetLastError());
}
