// cagra/args.cuh: the argument struct of each CAGRA graph-optimisation kernel, passed by value.
// The Rust twins are generated from these declarations (weft-kernels), layout asserted on both
// sides. The steps are described at the top of cagra.cu.
#pragma once
#include "weft/types.cuh"

namespace weft {

// cagra_prune (step 1): the k-NN rows `knn` (n x k) pruned by detour count to `pruned`
// (n x degree), with a 2^bits-slot hash table per block; the counts into `detours` (n x k) when
// write_detours != 0; *error raised on an invalid row.
struct CagraPruneArgs {
    const u32* knn;
    u32 n;
    u32 k;
    u32 degree;
    u32 bits;
    u32* pruned;
    u32* detours;
    u32 write_detours;
    u32* error;
};

// cagra_rev_count (step 2): indeg[v] += 1 for each of the `edges` entries v of `pruned`.
struct CagraRevCountArgs {
    const u32* pruned;
    u64 edges;
    u32* indeg;
};

// cagra_scan_blocks (step 3): the exclusive prefix of `in` (n entries, zeros up to len) within
// each tile into `out`, the tile totals into `sums`.
struct CagraScanBlocksArgs {
    const u32* in;
    u32 n;
    u32 len;
    u32* out;
    u32* sums;
};

// cagra_scan_sums (step 3): exclusive scan of the `count` tile totals `sums`, in place.
struct CagraScanSumsArgs {
    u32* sums;
    u32 count;
};

// cagra_scan_add (step 3): out[i] += sums[tile of i] for i < len.
struct CagraScanAddArgs {
    u32* out;
    u32 len;
    const u32* sums;
};

// cagra_rev_scatter (step 4): each of the `edges` edges of `pruned` (rows of `degree`) as a key
// into its target's segment of `keys` (segments at `offsets`, `fill` the per-target counters).
struct CagraRevScatterArgs {
    const u32* pruned;
    u64 edges;
    u32 degree;
    const u32* offsets;
    u32* fill;
    u64* keys;
};

// cagra_rev_select (step 5): each of the n nodes' `degree` smallest keys (segments of `keys` at
// `offsets`) as its reverse row in `rev`, the row's length in `rev_cnt`.
struct CagraRevSelectArgs {
    const u64* keys;
    const u32* offsets;
    u32 n;
    u32 degree;
    u32* rev;
    u32* rev_cnt;
};

// cagra_merge (step 6): the pruned rows and the reverse rows (`rev`, `rev_cnt` entries each)
// merged into `out` (n x degree).
struct CagraMergeArgs {
    const u32* pruned;
    const u32* rev;
    const u32* rev_cnt;
    u32 n;
    u32 degree;
    u32* out;
};

}  // namespace weft
