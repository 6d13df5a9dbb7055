// gnnd/args.cuh: the argument struct of each GNND kernel, passed by value. The Rust twins are
// generated from these declarations (weft-kernels), layout asserted on both sides. Lists are
// n rows of k (distance, id) entries; inboxes n rows of M candidate slots; samples n rows of
// S = 2 p ids.
#pragma once
#include "weft/types.cuh"

namespace weft {

// gnnd_init_<dt>: list s of n gets k random distinct ids != s, with their distances, as inbox
// candidates (inbox_d/inbox_i/inbox_cnt); the lists list_d/list_i are emptied. data: n rows of
// `stride` elements (the element type's bytes).
struct GnndInitArgs {
    const u8* data;
    u32 n;
    u32 stride;
    MetricCode metric;
    u32 k;
    u64 seed;
    float* list_d;
    u32* list_i;
    float* inbox_d;
    u32* inbox_i;
    u32* inbox_cnt;
    u32 M;
};

// gnnd_cross_init_<dt> (the graph merge, GGM): list s gets up to `half` random ids of the other
// vertex subset, with their distances, as inbox candidates. Vertices [0, split) are rows of `a`,
// [split, n) rows of `b` (the element type's bytes, `stride` elements a row).
struct GnndCrossInitArgs {
    const u8* a;
    const u8* b;
    u32 split;
    u32 n;
    u32 stride;
    MetricCode metric;
    u32 half;
    u64 seed;
    float* inbox_d;
    u32* inbox_i;
    u32* inbox_cnt;
    u32 M;
};

// gnnd_sample: the forward NEW/OLD samples of each list into new_s/old_s (sampled NEW entries
// of list_i become OLD), and each sample's reverse append (counters rev_new/rev_old); forward
// counts into fwd_new/fwd_old. split: 0 for a build, else the merge's second subset's start.
struct GnndSampleArgs {
    u32* list_i;
    u32 n;
    u32 k;
    u32 p;
    u32 split;
    u32* new_s;
    u32* old_s;
    u32* fwd_new;
    u32* fwd_old;
    u32* rev_new;
    u32* rev_old;
};

// gnnd_dedup: compacts each list's samples (forward + reverse, duplicates and OLD ids that are
// also NEW removed), writes the counts to fwd_new/fwd_old and resets rev_new/rev_old.
struct GnndDedupArgs {
    u32 n;
    u32 p;
    u32* new_s;
    u32* old_s;
    u32* fwd_new;
    u32* fwd_old;
    u32* rev_new;
    u32* rev_old;
};

// gnnd_join_l2_<dt>, gnnd_join_ip_<dt>, gnnd_join_cos_<dt> (one struct for the three metrics'
// kernels): joins list s's NEW samples (new_s, new_cnt) with its NEW and OLD samples (old_s,
// old_cnt) and offers the candidates closer than a target's worst entry (list_d) to its inbox;
// inbox overflows are counted in *overflow. Vertices [0, split) are rows of `data`, [split, n)
// rows of `data_b` (the element type's bytes). norms: squared norms (cosine only). mode: the
// MODE_* bits and the offers per row (bits 8..). `metric` is not read (the kernel's name fixes
// the metric).
struct GnndJoinArgs {
    const u8* data;
    const u8* data_b;
    u32 split;
    u32 stride;
    MetricCode metric;
    const float* norms;
    const u32* new_s;
    const u32* new_cnt;
    const u32* old_s;
    const u32* old_cnt;
    u32 S;
    const float* list_d;
    u32 k;
    float* inbox_d;
    u32* inbox_i;
    u32* inbox_cnt;
    u32 M;
    unsigned long long* overflow;
    u32 mode;
};

// gnnd_merge: inserts each list's inbox (inbox_d, inbox_i, inbox_cnt) into the sorted list
// (list_d, list_i) as NEW entries, empties the inbox and adds the insertions to *updates.
struct GnndMergeArgs {
    float* list_d;
    u32* list_i;
    u32 n;
    u32 k;
    const float* inbox_d;
    const u32* inbox_i;
    u32* inbox_cnt;
    u32 M;
    unsigned long long* updates;
};

// gnnd_finish: clears the NEW flags of the `len` ids of list_i (the finished graph).
struct GnndFinishArgs {
    u32* list_i;
    u64 len;
};

}  // namespace weft
