// The example kernel module of docs/adding-an-algorithm.md: per row of an f32 matrix, its
// squared L2 norm scaled by `scale`, one warp per row. The shared headers come from weft-gpu
// (`#include "weft/..."` is inlined at build time), the module's own `args.cuh` beside it.
#include "weft/types.cuh"
#include "args.cuh"

using namespace weft;

// Launch: blocks of 256 threads (8 rows each). The kernel takes its argument struct by value
// (its one parameter; `__grid_constant__` keeps it in parameter memory).
extern "C" __global__ void example_scaled_norms(const __grid_constant__ ExampleScaledNormsArgs a) {
    const u32 row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    const u32 lane = threadIdx.x & 31u;
    if (row >= a.rows) return;
    const float* x = a.data + (u64)row * a.dim;
    float acc = 0.0f;
    for (u32 i = lane; i < a.dim; i += 32) acc += x[i] * x[i];
    for (u32 off = 16; off > 0; off >>= 1) acc += __shfl_down_sync(0xffffffffu, acc, off);
    if (lane == 0) a.out[row] = a.scale * acc;
}
