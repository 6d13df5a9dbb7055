// testing/args.cuh: the argument struct of each testing kernel, passed by value. The Rust
// twins are generated from these declarations (weft-kernels), layout asserted on both sides.
#pragma once
#include "weft/types.cuh"

namespace weft {

// testing_rng_u64: out[3 count] words of weft_core::rng for `count` indices.
struct TestingRngU64Args {
    u64 seed;
    u32 count;
    u64 n;
    u64* out;
};

// testing_affine_walk: `count` walks of `steps` steps, rows of 2 + steps words in out.
struct TestingAffineWalkArgs {
    u64 seed;
    const u32* ms;
    u32 count;
    u32 steps;
    u32* out;
};

// testing_pair_distance_<dt>: out[p] = distance(a[p], b[p]); a and b hold `pairs` rows of
// `stride` elements (the element type's bytes).
struct TestingPairDistanceArgs {
    const u8* a;
    const u8* b;
    u32 pairs;
    u32 stride;
    MetricCode metric;
    float* out;
};

// testing_warp_sort_f32: `runs` runs of 32 (distance, id) pairs sorted in place.
struct TestingWarpSortF32Args {
    float* d;
    u32* id;
    u32 runs;
};

// testing_visited_set: blocks of `per_block` ids inserted into a 2^bits-slot visited set.
struct TestingVisitedSetArgs {
    const u32* ids;
    u32 per_block;
    u32 bits;
    i32 mode;
    u8* is_new;
    u8* contains;
    u32* table;
};

// testing_tag_set: blocks of `per_block` ids inserted into a 2^bits-slot tag set.
struct TestingTagSetArgs {
    const u32* ids;
    u32 per_block;
    u32 bits;
    i32 mode;
    u8* answer;
    u8* contains;
    u32* table;
};

}  // namespace weft
