// weft/topk.cuh: sorting (distance, id) pairs: warp-level bitonic sort in registers and
// block-level bitonic sort in shared memory. Pairs order by distance, then by id, so results are
// deterministic and (INFINITY, INVALID) padding sorts last.
#pragma once
#include "weft/types.cuh"

namespace weft {

// Whether pair (da, ia) comes strictly before (db, ib).
__device__ __forceinline__ bool pair_less(float da, u32 ia, float db, u32 ib) {
    return da < db || (da == db && ia < ib);
}

// Sorts 32 pairs, one per lane of a full warp, ascending across lanes.
__device__ __forceinline__ void warp_sort32(float& d, u32& id) {
    const u32 lane = threadIdx.x & 31u;
#pragma unroll
    for (u32 size = 2; size <= 32; size <<= 1) {
#pragma unroll
        for (u32 stride = size >> 1; stride > 0; stride >>= 1) {
            const float od = __shfl_xor_sync(0xffffffffu, d, stride);
            const u32 oi = __shfl_xor_sync(0xffffffffu, id, stride);
            const bool ascending = (lane & size) == 0;
            const bool lower = (lane & stride) == 0;
            // The lower lane of an ascending pair keeps the smaller element.
            const bool keep_small = (lower == ascending);
            const bool other_less = pair_less(od, oi, d, id);
            if (keep_small == other_less) {
                d = od;
                id = oi;
            }
        }
    }
}

// Sorts `n` pairs in shared memory ascending (`n` a power of two). Every thread of the block must
// call it; it begins and ends with a barrier.
__device__ __forceinline__ void block_bitonic_sort(float* d, u32* id, u32 n) {
    __syncthreads();
    for (u32 size = 2; size <= n; size <<= 1) {
        for (u32 stride = size >> 1; stride > 0; stride >>= 1) {
            for (u32 t = threadIdx.x; t < n / 2; t += blockDim.x) {
                // The t-th compare-exchange pair of this stage: i < j = i + stride.
                const u32 i = 2 * stride * (t / stride) + (t % stride);
                const u32 j = i + stride;
                const bool ascending = (i & size) == 0;
                const float di = d[i], dj = d[j];
                const u32 ii = id[i], ij = id[j];
                const bool swap = ascending ? pair_less(dj, ij, di, ii) : pair_less(di, ii, dj, ij);
                if (swap) {
                    d[i] = dj;
                    d[j] = di;
                    id[i] = ij;
                    id[j] = ii;
                }
            }
            __syncthreads();
        }
    }
}

}  // namespace weft
