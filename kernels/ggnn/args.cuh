// ggnn/args.cuh: the argument struct of each GGNN construction kernel, passed by value. The
// Rust twins are generated from these declarations (weft-kernels), layout asserted on both sides.
// Row space, segments (s0, s0_off) and the search parameters are described in ggnn.cu.
#pragma once
#include "weft/types.cuh"

namespace weft {

// ggnn_select: weighted upward sampling of layer t + 1 (rows from off_up) from layer t (n_t
// points, rows from off_t; segments (s0, s0_off), g children of S points, each child segment
// sg + [c < sg_off] of them), keys from nn1 and hash3(seed, t, v); writes glob and sel.
struct GgnnSelectArgs {
    u32 n_t;
    u32 off_t;
    u32 off_up;
    u32 s0;
    u32 s0_off;
    u32 g;
    u32 S;
    u32 sg;
    u32 sg_off;
    u64 seed;
    u32 t;
    const float* nn1;
    u32* glob;
    u32* sel;
};

// ggnn_sym_rebuild: each row's second half (n rows of k from row offset off, first halves of
// kl) from its kf link slots (link_cnt filled), into out (layer-local).
struct GgnnSymRebuildArgs {
    const u32* ids;
    u32 off;
    u32 n;
    u32 k;
    u32 kl;
    u32 kf;
    u32* links;
    const u32* link_cnt;
    u32* out;
};

// ggnn_copy_u32: dst[i] = src[i] for i < len.
struct GgnnCopyU32Args {
    u32* dst;
    const u32* src;
    u64 len;
};

// ggnn_fill_u32: dst[i] = value for i < len.
struct GgnnFillU32Args {
    u32* dst;
    u64 len;
    u32 value;
};

// ggnn_nn1_stats: out[0] = the f64 sum and out[1] = the maximum of nn1[0..n].
struct GgnnNn1StatsArgs {
    const float* nn1;
    u32 n;
    double* out;
};

// ggnn_iota_u32: dst[i] = i for i < len.
struct GgnnIotaU32Args {
    u32* dst;
    u64 len;
};

// ggnn_order_count: count[rank[min(key1[v], l1 - 1)]] += 1 for the n points.
struct GgnnOrderCountArgs {
    const u32* key1;
    u32 n;
    const u32* rank;
    u32 l1;
    u32* count;
};

// ggnn_order_scan: count[0..len] becomes its exclusive prefix sum.
struct GgnnOrderScanArgs {
    u32* count;
    u32 len;
};

// ggnn_order_scatter: order[cursor[rank[min(key1[v], l1 - 1)]]++] = v for the n points.
struct GgnnOrderScatterArgs {
    const u32* key1;
    u32 n;
    const u32* rank;
    u32 l1;
    u32* cursor;
    u32* order;
};

// ggnn_top_<dt>: brute force inside each segment (s0, s0_off) of the layer at row offset off
// (rows of data by glob, `stride` elements): k ids per point into ids and the real 1-NN
// distance into nn1 (both from row off).
struct GgnnTopArgs {
    const u8* data;
    u32 stride;
    MetricCode metric;
    const u32* glob;
    u32 off;
    u32 s0;
    u32 s0_off;
    u32 k;
    u32* ids;
    float* nn1;
};

// ggnn_merge_<dt>: the top-down merge ltop -> lm of every point of layer lm (n_lm points), the
// search state sized by bcap, qcap, rcap and seen_slots (wide: u32 slots); rows into out_ids,
// 1-NN distances into nn1 from row off_lm, the locality keys into key1/key2 (by key_mask), the
// per-layer pops and scored candidates into counts. perm (use_perm) is the processing order,
// seeds (use_seeds) the entry seeds of layer 0.
struct GgnnMergeArgs {
    const u8* data;
    u32 stride;
    MetricCode metric;
    const u32* ids;
    const u32* glob;
    const u32* sel;
    const u32* row_off;
    u32 k;
    u32 lm;
    u32 ltop;
    u32 n_lm;
    u32 s0;
    u32 s0_off;
    u32 S;
    u32 levels;
    float slack;
    u32 bcap;
    u32 qcap;
    u32 rcap;
    u32 seen_slots;
    u32 wide;
    u32 max_pops;
    u32 team;
    u32 heads;
    const u32* perm;
    u32 use_perm;
    u32* key1;
    u32* key2;
    u32 key_mask;
    const u32* seeds;
    u32 use_seeds;
    u32* out_ids;
    float* nn1;
    u32 off_lm;
    unsigned long long* counts;
};

// ggnn_nearest_entry_<dt>: out[v] = the nearest of the n_entries entry points (global ids) to
// each of the n points of layer 0.
struct GgnnNearestEntryArgs {
    const u8* data;
    u32 stride;
    MetricCode metric;
    const u32* entries;
    u32 n_entries;
    u32 n;
    u32* out;
};

// ggnn_sym_<dt>: the symmetric-link searches of the layer at row offset off (n points, rows of
// k, first halves of kl, kf link slots per point in links/link_cnt); the search state as for
// merge; links that find no slot counted in dropped, pops and scored candidates in counts[0..2].
struct GgnnSymArgs {
    const u8* data;
    u32 stride;
    MetricCode metric;
    const u32* ids;
    const u32* glob;
    u32 off;
    u32 n;
    u32 k;
    u32 kl;
    u32 kf;
    float slack;
    u32 bcap;
    u32 qcap;
    u32 rcap;
    u32 seen_slots;
    u32 wide;
    u32 max_pops;
    u32 team;
    const u32* perm;
    u32 use_perm;
    u32* links;
    u32* link_cnt;
    unsigned long long* dropped;
    unsigned long long* counts;
};

}  // namespace weft
