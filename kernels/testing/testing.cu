// testing/testing.cu: kernels that exist to test the shared headers against their Rust
// counterparts (weft_core::rng, weft_core::distance, the sorts).
#include "weft/distance.cuh"
#include "weft/hashset.cuh"
#include "weft/rng.cuh"
#include "weft/topk.cuh"
#include "weft/types.cuh"
#include "args.cuh"

using namespace weft;

// out[3 i] = mix64(i ^ seed), out[3 i + 1] = hash3(seed, i, 7 i + 3),
// out[3 i + 2] = below(hash3(seed, i, 1), n + i).
extern "C" __global__ void testing_rng_u64(const __grid_constant__ TestingRngU64Args a) {
    const u32 i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= a.count) return;
    const u64 x = (u64)i;
    a.out[3 * x] = mix64(x ^ a.seed);
    a.out[3 * x + 1] = hash3(a.seed, x, 7 * x + 3);
    a.out[3 * x + 2] = below(hash3(a.seed, x, 1), a.n + x);
}

// Row i of out (2 + steps words) for walk i: AffineWalk(hash3(seed, i, 0), ms[i]) as
// [o, g, at(0), ..., at(steps - 1)] (the at() words stay as they are when ms[i] = 0).
extern "C" __global__ void testing_affine_walk(const __grid_constant__ TestingAffineWalkArgs a) {
    const u32 i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= a.count) return;
    const u32 m = a.ms[i];
    const AffineWalk walk(hash3(a.seed, (u64)i, 0), m);
    u32* row = a.out + (u64)i * (2 + a.steps);
    row[0] = walk.o;
    row[1] = walk.g;
    if (m == 0) return;
    for (u32 j = 0; j < a.steps; ++j) row[2 + j] = walk.at(j);
}

// One warp per pair: out[p] = distance(a[p], b[p]) by warp_distance.
#define WEFT_TESTING_PAIRS(T, NAME)                                                              \
    extern "C" __global__ void testing_pair_distance_##NAME(                                     \
        const __grid_constant__ TestingPairDistanceArgs a) {                                     \
        const u32 p = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;                         \
        if (p >= a.pairs) return;                                                                \
        const T* x = as_elements<T>(a.a) + (u64)p * a.stride;                                    \
        const T* y = as_elements<T>(a.b) + (u64)p * a.stride;                                    \
        const float d = warp_distance<T>(x, y, a.stride, a.metric);                              \
        if ((threadIdx.x & 31u) == 0) a.out[p] = d;                                              \
    }
WEFT_TESTING_PAIRS(float, f32)
WEFT_TESTING_PAIRS(f16_t, f16)
WEFT_TESTING_PAIRS(u8, u8)
WEFT_TESTING_PAIRS(i8, i8)

// Sorts each run of 32 pairs with warp_sort32 (block = 32 threads x warps; grid covers runs).
extern "C" __global__ void testing_warp_sort_f32(const __grid_constant__ TestingWarpSortF32Args a) {
    const u32 run = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    if (run >= a.runs) return;
    const u32 lane = threadIdx.x & 31u;
    float x = a.d[run * 32 + lane];
    u32 i = a.id[run * 32 + lane];
    warp_sort32(x, i);
    a.d[run * 32 + lane] = x;
    a.id[run * 32 + lane] = i;
}

// Visited sets: one block per run of `per_block` ids (blockDim.x threads), a shared-memory table
// of 2^bits slots. mode 0: all threads insert concurrently (visited_insert); mode 1: thread 0
// inserts the ids in order (visited_insert_exclusive). is_new[i] = the insert's answer;
// contains[i] = visited_contains after all inserts; table = the final slots of each block.
extern "C" __global__ void testing_visited_set(const __grid_constant__ TestingVisitedSetArgs a) {
    extern __shared__ u32 slots[];
    const u32 size = 1u << a.bits, mask = size - 1;
    const u64 base = (u64)blockIdx.x * a.per_block;
    visited_clear(slots, size);
    __syncthreads();
    if (a.mode == 0) {
        for (u32 i = threadIdx.x; i < a.per_block; i += blockDim.x)
            a.is_new[base + i] = visited_insert(slots, mask, a.ids[base + i]) ? 1 : 0;
    } else if (threadIdx.x == 0) {
        for (u32 i = 0; i < a.per_block; ++i)
            a.is_new[base + i] = visited_insert_exclusive(slots, mask, a.ids[base + i]) ? 1 : 0;
    }
    __syncthreads();
    for (u32 i = threadIdx.x; i < a.per_block; i += blockDim.x)
        a.contains[base + i] = visited_contains(slots, mask, a.ids[base + i]) ? 1 : 0;
    for (u32 i = threadIdx.x; i < size; i += blockDim.x)
        a.table[(u64)blockIdx.x * size + i] = slots[i];
}

// Tag sets: one block per run of `per_block` ids (blockDim.x threads), a shared-memory tag set of
// 2^bits 16-bit slots. mode 0: all threads insert concurrently; mode 1: thread 0 inserts the ids
// in order. answer[i] = tagset_insert's answer (TAG_SEEN, TAG_NEW or TAG_LOST); contains[i] =
// tagset_contains after all inserts; table = the final 2^(bits - 1) words of each block.
extern "C" __global__ void testing_tag_set(const __grid_constant__ TestingTagSetArgs a) {
    extern __shared__ u32 words[];
    const u32 size = 1u << (a.bits - 1);
    const u64 base = (u64)blockIdx.x * a.per_block;
    for (u32 i = threadIdx.x; i < size; i += blockDim.x) words[i] = 0xffffffffu;
    __syncthreads();
    if (a.mode == 0) {
        for (u32 i = threadIdx.x; i < a.per_block; i += blockDim.x)
            a.answer[base + i] = (u8)tagset_insert(words, a.bits, a.ids[base + i]);
    } else if (threadIdx.x == 0) {
        for (u32 i = 0; i < a.per_block; ++i)
            a.answer[base + i] = (u8)tagset_insert(words, a.bits, a.ids[base + i]);
    }
    __syncthreads();
    for (u32 i = threadIdx.x; i < a.per_block; i += blockDim.x)
        a.contains[base + i] = tagset_contains(words, a.bits, a.ids[base + i]) ? 1 : 0;
    for (u32 i = threadIdx.x; i < size; i += blockDim.x)
        a.table[(u64)blockIdx.x * size + i] = words[i];
}
