// exact/args.cuh: the argument struct of each exact-search kernel, passed by value. The Rust
// twins are generated from these declarations (weft-kernels), layout asserted on both sides.
#pragma once
#include "weft/types.cuh"

namespace weft {

// exact_norms_<dt>: out[i] = the squared norm of row i of x (`rows` rows of `stride` elements).
struct ExactNormsArgs {
    const u8* x;
    u32 rows;
    u32 stride;
    float* out;
};

// exact_distances_<dt>: out[i * ldo + j] = distance(q_i, b_j) for nq x nb pairs; qnorm and
// bnorm are the rows' squared norms (unread for the inner product).
struct ExactDistancesArgs {
    const u8* q;
    u32 nq;
    const u8* b;
    u32 nb;
    u32 stride;
    const float* qnorm;
    const float* bnorm;
    MetricCode metric;
    float* out;
    u32 ldo;
};

// exact_select_f32: folds a tile of distances into each query's running top list (see the
// kernel).
struct ExactSelectF32Args {
    const float* dist;
    u32 ldd;
    u32 ncols;
    u32 base_offset;
    u32 query_offset;
    i32 exclude_self;
    u32 k;
    u32 list;
    u32 slots;
    float* top_d;
    u32* top_i;
};

}  // namespace weft
