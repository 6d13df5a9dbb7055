// grnnd/args.cuh: the argument struct of each GRNND kernel, passed by value. The Rust twins are
// generated from these declarations (weft-kernels), layout asserted on both sides. Pools are
// n x R packed entries (P) with a reservation counter per row (C); see grnnd.cu.
#pragma once
#include "weft/types.cuh"

namespace weft {

// grnnd_fill_u64: p[i] = value for i < len (grid-stride).
struct GrnndFillU64Args {
    u64* p;
    u64 len;
    u64 value;
};

// grnnd_fill_u32: p[i] = value for i < len (grid-stride).
struct GrnndFillU32Args {
    u32* p;
    u64 len;
    u32 value;
};

// grnnd_reverse: pool A (Pa, Ca) copied into pool B (Pb, Cb) plus ceil(rho k) reverse edges per
// vertex (the closest when `closest` != 0, else the first in pool order).
struct GrnndReverseArgs {
    const u64* Pa;
    const u32* Ca;
    u64* Pb;
    u32* Cb;
    u32 n;
    u32 R;
    float rho;
    u32 closest;
};

// grnnd_finalize: the output rows (n x degree ids into out, pool sizes into counts) from pool
// (P, C), rows shorter than fill_len filled from `pruned` (n x fill_len); *filled += edges
// filled in.
struct GrnndFinalizeArgs {
    const u64* P;
    const u32* C;
    u32 n;
    u32 R;
    u32 degree;
    const u64* pruned;
    u32 fill_len;
    u32* out;
    u32* counts;
    unsigned long long* filled;
};

// grnnd_insert_test: warp w inserts entries[w] into row owners[w] of pool (P, C), for w < m.
struct GrnndInsertTestArgs {
    u64* P;
    u32* C;
    u32 R;
    const u32* owners;
    const u64* entries;
    u32 m;
};

// grnnd_bfs_step: one BFS level over graph g (n x degree): vertices reached from level `cur`
// get level cur + 1 in `level`; *changed = 1 when any did.
struct GrnndBfsStepArgs {
    const u32* g;
    u32 n;
    u32 degree;
    u32* level;
    u32 cur;
    u32* changed;
};

// grnnd_init_<dt>: S random neighbours per vertex of `data` (n rows of `stride` elements,
// the element type's bytes), NEW, into the EMPTY-filled pool (P, C).
struct GrnndInitArgs {
    const u8* data;
    u32 n;
    u32 stride;
    MetricCode metric;
    u32 S;
    u64 seed;
    u64* P;
    u32* C;
    u32 R;
};

// grnnd_update_<dt>: one update round from pool A (Pa, Ca) into pool B (Pb, Cb) in `mode`
// (counters[0] += pairs, counters[1] += redirects); with fill_len > 0 the pruned entries are
// kept in `pruned` (n x fill_len).
struct GrnndUpdateArgs {
    const u8* data;
    u32 n;
    u32 stride;
    MetricCode metric;
    const u64* Pa;
    const u32* Ca;
    u64* Pb;
    u32* Cb;
    u32 R;
    u32 mode;
    u32 max_pairs;
    u64 seed;
    u32 round;
    unsigned long long* counters;
    u64* pruned;
    u32 fill_len;
};

// grnnd_colsum_<dt>: sums[c] += column c of `data` (n rows of `stride` elements, dim columns).
struct GrnndColsumArgs {
    const u8* data;
    u32 n;
    u32 stride;
    u32 dim;
    float* sums;
};

// grnnd_nearest_<dt>: *best = min over rows of (ordered squared distance to sums / n, row).
struct GrnndNearestArgs {
    const u8* data;
    u32 n;
    u32 stride;
    u32 dim;
    const float* sums;
    unsigned long long* best;
};

}  // namespace weft
