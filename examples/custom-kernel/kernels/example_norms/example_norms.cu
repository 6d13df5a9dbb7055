// The example kernel module of docs/adding-an-algorithm.md: per row of an f32 matrix, its
// squared L2 norm scaled by `scale`, one warp per row. The shared headers come from weft-gpu
// (`#include "weft/..."` is inlined at build time).
#include "weft/types.cuh"

using namespace weft;

// Launch: blocks of 256 threads (8 rows each); `rows` rows of `dim` floats, row-major, in
// `data`; `out[r] = scale * |row r|^2`.
extern "C" __global__ void example_scaled_norms(const float* __restrict__ data, u32 rows, u32 dim,
                                                float scale, float* __restrict__ out) {
    const u32 row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    const u32 lane = threadIdx.x & 31u;
    if (row >= rows) return;
    const float* x = data + (u64)row * dim;
    float acc = 0.0f;
    for (u32 i = lane; i < dim; i += 32) acc += x[i] * x[i];
    for (u32 off = 16; off > 0; off >>= 1) acc += __shfl_down_sync(0xffffffffu, acc, off);
    if (lane == 0) out[row] = scale * acc;
}
