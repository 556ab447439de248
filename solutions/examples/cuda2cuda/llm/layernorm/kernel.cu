// LayerNorm over the last dimension, float32, with weight and bias (eps inside the sqrt,
// biased variance).
//
// Why it is faster than the starting kernel (64 threads per row, scalar loads, two
// shared-memory trees of log2(64) barriers each, and three passes over the row: the second
// and third come back through L1/L2):
// - the row is read from memory once and kept in registers (each thread caches up to UNITS
//   float4s, or floats for widths that are not a multiple of 4; template instances picked on
//   the host), and the statistics are computed from the registers in two exact passes (mean,
//   then the centred sum of squares: no E[x^2] - mean^2 cancellation);
// - 16-byte float4 loads of x, weight and bias and float4 streaming stores of out when
//   hidden % 4 == 0;
// - warp-shuffle reductions with one shared slot per warp: two barriers per reduction;
// - 128 threads for rows up to 2048 values, 256 above, so few threads idle.
// Rows wider than the register cache (hidden > 8192) take a looping kernel that re-reads x.

#include <cuda_runtime.h>
#include <stdint.h>

// Threads of the looping fallback kernel for very wide rows (a multiple of 32, at most 1024).
#define LOOP_THREADS 512

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1) {
        v += __shfl_xor_sync(0xffffffffu, v, offset);
    }
    return v;
}

// Sum over a block of THREADS threads (a multiple of 32); every thread gets the total. Safe to
// call repeatedly: the final __syncthreads orders the next call's writes after this call's reads.
template <int THREADS>
__device__ __forceinline__ float block_sum(float v) {
    __shared__ float warp_part[THREADS / 32];
    __shared__ float total;
    const int lane = threadIdx.x & 31;
    const int warp = threadIdx.x >> 5;
    v = warp_sum(v);
    if (lane == 0) {
        warp_part[warp] = v;
    }
    __syncthreads();
    if (warp == 0) {
        float s = lane < THREADS / 32 ? warp_part[lane] : 0.0f;
        s = warp_sum(s);
        if (lane == 0) {
            total = s;
        }
    }
    __syncthreads();
    return total;
}

// hidden % 4 == 0, 16-byte aligned pointers, hidden / 4 <= THREADS * UNITS.
template <int THREADS, int UNITS>
__launch_bounds__(THREADS) __global__ void
layernorm_kernel(const float* __restrict__ x, const float* __restrict__ weight, const float* __restrict__ bias,
                 float* __restrict__ out, int hidden, float eps) {
    const int nvec = hidden >> 2;
    const size_t row_offset = static_cast<size_t>(blockIdx.x) * static_cast<size_t>(hidden);
    const float4* x_vec = reinterpret_cast<const float4*>(x + row_offset);
    const float4* w_vec = reinterpret_cast<const float4*>(weight);
    const float4* b_vec = reinterpret_cast<const float4*>(bias);
    float4* out_vec = reinterpret_cast<float4*>(out + row_offset);
    const float inv_hidden = 1.0f / static_cast<float>(hidden);

    float4 v[UNITS];
    float sum = 0.0f;
#pragma unroll
    for (int j = 0; j < UNITS; ++j) {
        const int i = threadIdx.x + j * THREADS;
        v[j] = i < nvec ? __ldg(x_vec + i) : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    }
#pragma unroll
    for (int j = 0; j < UNITS; ++j) {
        sum += (v[j].x + v[j].y) + (v[j].z + v[j].w);  // padding zeros add nothing
    }
    const float mean = block_sum<THREADS>(sum) * inv_hidden;

    float sq = 0.0f;
#pragma unroll
    for (int j = 0; j < UNITS; ++j) {
        const int i = threadIdx.x + j * THREADS;
        if (i < nvec) {
            const float dx = v[j].x - mean, dy = v[j].y - mean, dz = v[j].z - mean, dw = v[j].w - mean;
            sq += (dx * dx + dy * dy) + (dz * dz + dw * dw);
        }
    }
    const float rstd = rsqrtf(block_sum<THREADS>(sq) * inv_hidden + eps);

#pragma unroll
    for (int j = 0; j < UNITS; ++j) {
        const int i = threadIdx.x + j * THREADS;
        if (i < nvec) {
            const float4 w = __ldg(w_vec + i);
            const float4 b = __ldg(b_vec + i);
            float4 o;
            o.x = (v[j].x - mean) * rstd * w.x + b.x;
            o.y = (v[j].y - mean) * rstd * w.y + b.y;
            o.z = (v[j].z - mean) * rstd * w.z + b.z;
            o.w = (v[j].w - mean) * rstd * w.w + b.w;
            __stcs(out_vec + i, o);
        }
    }
}

// Any width and alignment, hidden <= THREADS * UNITS: scalar loads, same register cache.
template <int THREADS, int UNITS>
__launch_bounds__(THREADS) __global__ void
layernorm_kernel_scalar(const float* __restrict__ x, const float* __restrict__ weight,
                        const float* __restrict__ bias, float* __restrict__ out, int hidden, float eps) {
    const size_t row_offset = static_cast<size_t>(blockIdx.x) * static_cast<size_t>(hidden);
    const float* x_row = x + row_offset;
    float* out_row = out + row_offset;
    const float inv_hidden = 1.0f / static_cast<float>(hidden);

    float v[UNITS];
    float sum = 0.0f;
#pragma unroll
    for (int j = 0; j < UNITS; ++j) {
        const int i = threadIdx.x + j * THREADS;
        v[j] = i < hidden ? __ldg(x_row + i) : 0.0f;
    }
#pragma unroll
    for (int j = 0; j < UNITS; ++j) {
        sum += v[j];
    }
    const float mean = block_sum<THREADS>(sum) * inv_hidden;

    float sq = 0.0f;
#pragma unroll
    for (int j = 0; j < UNITS; ++j) {
        const int i = threadIdx.x + j * THREADS;
        if (i < hidden) {
            const float d = v[j] - mean;
            sq += d * d;
        }
    }
    const float rstd = rsqrtf(block_sum<THREADS>(sq) * inv_hidden + eps);

#pragma unroll
    for (int j = 0; j < UNITS; ++j) {
        const int i = threadIdx.x + j * THREADS;
        if (i < hidden) {
            __stcs(out_row + i, (v[j] - mean) * rstd * __ldg(weight + i) + __ldg(bias + i));
        }
    }
}

// Any width: three passes over the row (the second and third mostly hit L1/L2).
__launch_bounds__(LOOP_THREADS) __global__ void
layernorm_kernel_loop(const float* __restrict__ x, const float* __restrict__ weight, const float* __restrict__ bias,
                      float* __restrict__ out, int hidden, float eps) {
    const size_t row_offset = static_cast<size_t>(blockIdx.x) * static_cast<size_t>(hidden);
    const float* x_row = x + row_offset;
    float* out_row = out + row_offset;
    const float inv_hidden = 1.0f / static_cast<float>(hidden);

    float sum = 0.0f;
    for (int i = threadIdx.x; i < hidden; i += LOOP_THREADS) {
        sum += __ldg(x_row + i);
    }
    const float mean = block_sum<LOOP_THREADS>(sum) * inv_hidden;
    float sq = 0.0f;
    for (int i = threadIdx.x; i < hidden; i += LOOP_THREADS) {
        const float d = __ldg(x_row + i) - mean;
        sq += d * d;
    }
    const float rstd = rsqrtf(block_sum<LOOP_THREADS>(sq) * inv_hidden + eps);
    for (int i = threadIdx.x; i < hidden; i += LOOP_THREADS) {
        out_row[i] = (__ldg(x_row + i) - mean) * rstd * __ldg(weight + i) + __ldg(bias + i);
    }
}

#define LN_VEC(THREADS, UNITS) \
    layernorm_kernel<THREADS, UNITS><<<grid, THREADS, 0, stream>>>(x, weight, bias, out, h, eps)
#define LN_SCALAR(THREADS, UNITS) \
    layernorm_kernel_scalar<THREADS, UNITS><<<grid, THREADS, 0, stream>>>(x, weight, bias, out, h, eps)

// x, out: (rows, hidden) contiguous float32; weight, bias: (hidden,) float32.
// Launches on `stream`; returns the CUDA error code of the launch (0 = success).
extern "C" int layernorm_launch(const float* x, const float* weight, const float* bias, float* out, long long rows,
                                long long hidden, float eps, cudaStream_t stream) {
    if (rows <= 0 || hidden <= 0) {
        return 0;
    }
    const dim3 grid(static_cast<unsigned int>(rows));
    const int h = static_cast<int>(hidden);
    const bool aligned = ((reinterpret_cast<uintptr_t>(x) | reinterpret_cast<uintptr_t>(weight) |
                           reinterpret_cast<uintptr_t>(bias) | reinterpret_cast<uintptr_t>(out)) & 15) == 0;
    if (aligned && hidden % 4 == 0 && hidden <= 4 * 256 * 8) {
        const long long nvec = hidden / 4;
        if (nvec <= 128) {
            LN_VEC(128, 1);
        } else if (nvec <= 256) {
            LN_VEC(128, 2);
        } else if (nvec <= 512) {
            LN_VEC(128, 4);
        } else if (nvec <= 1024) {
            LN_VEC(256, 4);
        } else {
            LN_VEC(256, 8);
        }
    } else if (hidden <= 256 * 32) {
        if (hidden <= 512) {
            LN_SCALAR(128, 4);
        } else if (hidden <= 1024) {
            LN_SCALAR(128, 8);
        } else if (hidden <= 2048) {
            LN_SCALAR(256, 8);
        } else if (hidden <= 4096) {
            LN_SCALAR(256, 16);
        } else {
            LN_SCALAR(256, 32);
        }
    } else {
        layernorm_kernel_loop<<<grid, LOOP_THREADS, 0, stream>>>(x, weight, bias, out, h, eps);
    }
    return static_cast<int>(cudaGetLastError());
}
