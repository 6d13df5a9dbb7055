// cagra_search/args.cuh: the argument struct of each CAGRA search kernel, passed by value. The
// Rust twins are generated from these declarations (weft-kernels), layout asserted on both sides.
#pragma once
#include "weft/types.cuh"

namespace weft {

// cagra_search_<dt>: the CAGRA-style search of `nq` queries (rows of `stride` elements, bytes
// of the element type) over `n` points and their fixed-degree graph; `num_cta` parts per query
// (multi-CTA when > 1), each writing its first `out_len` results to out_ids / out_d; hops and
// distance computations added to counters[0..2] (see cagra_search.cu).
struct CagraSearchArgs {
    const u8* data;
    u32 n;
    u32 stride;
    const u32* graph;
    u32 degree;
    const u8* queries;
    u32 nq;
    MetricCode metric;
    u32 beam_width;
    u32 width;
    u32 max_iter;
    u32 min_iter;
    u32 team;
    u64 seed;
    const u32* entries;
    u32 n_entries;
    const u32* filter;
    u32 has_filter;
    u32 cand_cap;
    u32 hash_bits;
    u32 table_mode;
    u32* gtable;
    u32 num_cta;
    u32 out_len;
    u32* out_ids;
    float* out_d;
    unsigned long long* counters;
};

// cagra_search_fill: sets `len` words at p to INVALID (empties global visited tables).
struct CagraSearchFillArgs {
    u32* p;
    unsigned long long len;
};

// cagra_search_merge: per query, the `k` best distinct of `parts` sorted lists of `len` entries
// (multi-CTA results), sorted over `slots` pairs of dynamic shared memory.
struct CagraSearchMergeArgs {
    const u32* in_ids;
    const float* in_d;
    u32 parts;
    u32 len;
    u32 slots;
    u32 k;
    u32* out_ids;
    float* out_d;
};

}  // namespace weft
