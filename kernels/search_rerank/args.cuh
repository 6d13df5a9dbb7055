// search_rerank/args.cuh: the argument struct of each kernel of the f16 traversal, passed by
// value. The Rust twins are generated from these declarations (weft-kernels), layout asserted on
// both sides.
#pragma once
#include "weft/types.cuh"

namespace weft {

// search_rerank_to_f16: the `elems` f32 values at src as f16 bits at dst; finite values that
// overflow to infinity added to *overflow.
struct SearchRerankToF16Args {
    const u8* src;
    unsigned long long elems;
    u8* dst;
    unsigned long long* overflow;
};

// search_rerank_f32: per query, exact f32 distances to the `m` ids of its list (`cand`), sorted
// over `slots` pairs of dynamic shared memory, the `k` best distinct to out_ids / out_d.
struct SearchRerankF32Args {
    const u8* data;
    u32 n;
    u32 stride;
    const u8* queries;
    u32 nq;
    const u32* cand;
    u32 m;
    u32 slots;
    MetricCode metric;
    u32 k;
    u32* out_ids;
    float* out_d;
};

}  // namespace weft
