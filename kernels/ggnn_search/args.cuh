// ggnn_search/args.cuh: the argument struct of the GGNN search kernels, passed by value. The
// Rust twin is generated from this declaration (weft-kernels), layout asserted on both sides.
#pragma once
#include "weft/types.cuh"

namespace weft {

// ggnn_search_<dt>: the GGNN query of `nq` queries (rows of `stride` elements, bytes of the
// element type; global indices from q_base) over `n` points and their graph layer; the first `k`
// results of each to out_ids / out_d, hops and distance computations added to counters[0..2]
// (see ggnn_search.cu).
struct GgnnSearchArgs {
    const u8* data;
    u32 n;
    u32 stride;
    const u32* graph;
    u32 degree;
    const u8* queries;
    u32 nq;
    u32 q_base;
    MetricCode metric;
    u32 best_cap;
    u32 beam_width;
    u32 ring_cap;
    u32 max_iter;
    float tau;
    float guard;
    u32 team;
    u64 seed;
    const u32* entries;
    u32 n_entries;
    const u32* filter;
    u32 has_filter;
    u32 cand_cap;
    u32 hash_bits;
    u32 k;
    u32 prefetch;
    u32* out_ids;
    float* out_d;
    unsigned long long* counters;
};

}  // namespace weft
