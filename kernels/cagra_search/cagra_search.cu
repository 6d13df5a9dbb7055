// cagra_search/cagra_search.cu: CAGRA-style graph search (crates/weft-search/src/gpu/cagra.rs
// drives it; docs/kernels.md, "CAGRA search", explains the design).
//
// One CTA works on one (query, part) pair: single-CTA mode runs one part per query with an
// internal top-L list of up to 1024 entries; multi-CTA mode runs `num_cta` parts per query,
// each with a 32-entry list, sharing one visited table per query in global memory, and
// cagra_search_merge then picks the k best of all parts. Per iteration a CTA
//   1. gathers candidate ids: the neighbours of this iteration's parents (or random ids at the
//      start and on a restart),
//   2. drops those already visited (open-addressing table of weft/hashset.cuh, in shared memory
//      and "forgettable": cleared and refilled with the current lists when half full; or in
//      global memory) and compacts the new ones,
//   3. computes their distances, one team of `team` lanes per candidate with 16-byte loads and
//      a shuffle reduction inside the team; without a filter, a candidate not before the top
//      list's last entry is dropped there (it could never enter the list),
//   4. sorts the kept candidates (by counting, for each, the candidates before it, when the
//      buffer holds at most 128; else a block bitonic sort) and merges them into the top-L list
//      by ranks (each element's position = its index + the number of smaller elements of the
//      other list, found by binary search), written into the list's second buffer (the lists
//      are double-buffered, so no thread holds elements while others write), and with a
//      filter, merges the allowed ones into a second result list of the same length (so that
//      filtered-out points are traversed but never returned),
//   5. picks the next parents: the first `width` entries of the top-L list that have not been
//      parents (the id's most significant bit marks a parent).
// The first gather holds the first `cand_cap` entry points (part 0 only; random ids fill the
// rest). Part 0 then scores the remaining entry points in batches of `cand_cap` (steps 2-4 only,
// with the table's clear check between batches) before it picks its first parents; these
// batches do not count as iterations.
// It stops when no parent is left (after `min_iter` iterations; before that it restarts from
// random points) or after `max_iter` iterations. Random ids come from weft/rng.cuh keyed by
// (seed, a hash of the query's bytes, part, counter), so a query's result does not depend on
// the batch it is in or its position there.
#include "weft/distance.cuh"
#include "weft/hashset.cuh"
#include "weft/rng.cuh"
#include "weft/topk.cuh"
#include "weft/types.cuh"
#include "args.cuh"

namespace weft {
namespace cagra_search {

constexpr u32 MSB = 0x80000000u;
// The largest candidate buffer sorted by rank_sort (larger ones by the bitonic sort).
constexpr u32 RANK_SORT_MAX = 128;

// Hash-table placement (the `table_mode` argument).
enum TableMode : u32 {
    // Forgettable table in shared memory (cleared and refilled when half full).
    TABLE_SHARED = 0,
    // Forgettable table in global memory, one per CTA of the grid.
    TABLE_GLOBAL_CTA = 1,
    // One table per query in global memory shared by the query's CTAs, never cleared by the
    // kernel (multi-CTA).
    TABLE_GLOBAL_QUERY = 2,
};

__device__ __forceinline__ u32 key_id(u32 id) { return id == INVALID ? INVALID : (id & ~MSB); }

// (da, ia) strictly before (db, ib), the ids compared without the parent flag.
__device__ __forceinline__ bool before(float da, u32 ia, float db, u32 ib) {
    return pair_less(da, key_id(ia), db, key_id(ib));
}

// Number of entries of the sorted list (d, id)[0..len) strictly before (x, xi) (or, with
// `or_equal`, before or equal to it).
__device__ __forceinline__ u32 count_before(const float* d, const u32* id, u32 len, float x, u32 xi,
                                            bool or_equal) {
    u32 lo = 0, hi = len;
    while (lo < hi) {
        const u32 mid = (lo + hi) >> 1;
        const bool b = or_equal ? !before(x, xi, d[mid], id[mid]) : before(d[mid], id[mid], x, xi);
        if (b)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

// Merges the sorted candidates (cd, ci)[0..cnt) into the sorted list (sd, si)[0..len), writing
// the len best into (dd, di) (a second buffer: every element's place is its rank, so nothing
// has to be held while others are written). With `masks`, only candidates whose bit is set take
// part (their rank among the candidates is the number of set bits before them). Every thread
// calls it once the inputs are in place; it ends with a barrier.
__device__ __forceinline__ void merge_into(const float* sd, const u32* si, float* dd, u32* di, u32 len,
                                           const float* cd, const u32* ci, u32 cnt, const u32* masks) {
    for (u32 e = threadIdx.x; e < len + cnt; e += blockDim.x) {
        float x;
        u32 xi, rank;
        if (e < len) {
            x = sd[e];
            xi = si[e];
            const u32 c = count_before(cd, ci, cnt, x, xi, false);
            u32 allowed = c;
            if (masks != nullptr) {
                // Only allowed candidates count.
                allowed = 0;
                for (u32 w = 0; w < c / 32; ++w) allowed += __popc(masks[w]);
                if (c % 32) allowed += __popc(masks[c / 32] & ((1u << (c % 32)) - 1u));
            }
            rank = e + allowed;
        } else {
            const u32 j = e - len;
            if (masks != nullptr && ((masks[j / 32] >> (j % 32)) & 1u) == 0) continue;
            x = cd[j];
            xi = ci[j];
            u32 r = j;
            if (masks != nullptr) {
                r = 0;
                for (u32 w = 0; w < j / 32; ++w) r += __popc(masks[w]);
                if (j % 32) r += __popc(masks[j / 32] & ((1u << (j % 32)) - 1u));
            }
            rank = r + count_before(sd, si, len, x, xi, true);
        }
        if (rank < len) {
            dd[rank] = x;
            di[rank] = xi;
        }
    }
    __syncthreads();
}

// Sorts the candidates (cd, ci)[0..cnt) into (od, oi)[0..kept) by counting, for each, the
// candidates before it (ids are distinct, so the ranks are). Entries with id INVALID (dropped)
// take no part and sort nowhere; `kept` is the number of the others. For small candidate
// buffers: one pass and no barrier inside, where a bitonic sort takes log^2 passes. Every thread
// calls it once the inputs are in place; it ends with a barrier.
__device__ __forceinline__ void rank_sort(const float* cd, const u32* ci, u32 cnt, float* od, u32* oi) {
    for (u32 s = threadIdx.x; s < cnt; s += blockDim.x) {
        const u32 xi = ci[s];
        if (xi == INVALID) continue;
        const float x = cd[s];
        u32 r = 0;
        for (u32 j = 0; j < cnt; ++j) r += before(cd[j], ci[j], x, xi) ? 1u : 0u;
        od[r] = x;
        oi[r] = xi;
    }
    __syncthreads();
}

// Forgettable visited table: when inserting `cap` more ids could push it past half full, clears
// it and refills it with the ids of the top list (and of the result list, `res_len` > 0), so that
// no listed vertex is ever inserted again. `filled` counts the ids inserted since the last
// clear; `cnt` is scratch. Every thread calls it with the same arguments.
__device__ __forceinline__ void forget_if_full(u32* table, u32 hsize, u32 cap, const u32* top_i, u32 len,
                                               const u32* res_i, u32 res_len, u32& filled, u32& cnt) {
    if (filled + cap <= hsize / 2) return;
    __syncthreads();
    visited_clear(table, hsize);
    __syncthreads();
    if (threadIdx.x == 0) cnt = 0;
    __syncthreads();
    for (u32 i = threadIdx.x; i < len + res_len; i += blockDim.x) {
        const u32 id = key_id(i < len ? top_i[i] : res_i[i - len]);
        if (id != INVALID && visited_insert(table, hsize - 1u, id)) atomicAdd(&cnt, 1u);
    }
    __syncthreads();
    if (threadIdx.x == 0) filled = cnt;
}

// 64 bits that depend only on the query's bytes (row of `words` u32 words): the RNG key that
// makes the search independent of the batch. Every thread of warp 0 returns it.
__device__ __forceinline__ u64 query_key(const u32* row, u32 words) {
    const u32 lane = threadIdx.x & 31u;
    u64 h = 0;
    for (u32 i = lane; i < words; i += 32) h += mix64(((u64)i << 32) ^ (u64)row[i]);
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) h += __shfl_xor_sync(0xffffffffu, h, o);
    return mix64(h ^ words);
}

template <typename T>
__device__ void search(const CagraSearchArgs& a) {
    constexpr u32 P = Elem<T>::PER_VEC;
    extern __shared__ __align__(16) u32 smem[];
    __shared__ u32 s_cnt;
    __shared__ u32 s_np;
    __shared__ u32 s_filled;
    // Candidates of this iteration kept for the merge.
    __shared__ u32 s_kept;
    // Entry points gathered so far (part 0; the other parts start at n_entries: they have none).
    __shared__ u32 s_ent_next;
    __shared__ u64 s_key;
    __shared__ float s_qnorm;
    // Statistics, kept by thread 0 alone (in shared memory, as s_ent_next: the loop is short of
    // registers).
    __shared__ u64 s_hops, s_dcs;

    const u32 L = a.beam_width;
    const u32 C = a.cand_cap;
    const u32 W = a.width;
    const u32 R = a.has_filter ? L : 0;
    const bool filtered = a.has_filter != 0;
    // The top and result lists are double-buffered: a merge reads one buffer and writes the
    // other (`flip` says which is current; every thread keeps the same value).
    float* qv = reinterpret_cast<float*>(smem);
    float* top_d_buf = qv + a.stride;
    u32* top_i_buf = reinterpret_cast<u32*>(top_d_buf + 2 * L);
    float* res_d_buf = reinterpret_cast<float*>(top_i_buf + 2 * L);
    u32* res_i_buf = reinterpret_cast<u32*>(res_d_buf + 2 * R);
    float* cand_d = reinterpret_cast<float*>(res_i_buf + 2 * R);
    u32* cand_i = reinterpret_cast<u32*>(cand_d + C);
    u32* gathered = reinterpret_cast<u32*>(cand_d);  // ids before the distances overwrite them
    // The sorted candidates (rank_sort's output; the bitonic sort sorts cand_d/cand_i in place).
    float* sort_d = reinterpret_cast<float*>(cand_i + C);
    u32* sort_i = reinterpret_cast<u32*>(sort_d + C);
    u32* parents = sort_i + C;
    u32* masks = parents + 32;
    u32* stable = masks + C / 32;
    const bool by_rank = C <= RANK_SORT_MAX;
    const float* sorted_d = by_rank ? sort_d : cand_d;
    const u32* sorted_i = by_rank ? sort_i : cand_i;

    const u32 tid = threadIdx.x;
    const u32 bd = blockDim.x;
    const u32 lane = tid & 31u;
    const u32 team = a.team;
    const u32 team_id = tid / team;
    const u32 team_lane = tid % team;
    const u32 nteams = bd / team;
    const u32 nvec = a.stride / P;
    const u32 hsize = 1u << a.hash_bits;
    const u32 hmask = hsize - 1u;
    const u64 row_bytes = (u64)a.stride * sizeof(T);

    if (tid == 0) s_hops = s_dcs = 0;
    const u32 total = a.nq * a.num_cta;
    for (u32 w = blockIdx.x; w < total; w += gridDim.x) {
        const u32 q = w / a.num_cta;
        const u32 part = w % a.num_cta;
        u32* table = a.table_mode == TABLE_SHARED       ? stable
                     : a.table_mode == TABLE_GLOBAL_CTA ? a.gtable + (u64)blockIdx.x * hsize
                                                        : a.gtable + (u64)q * hsize;
        const bool forgettable = a.table_mode != TABLE_GLOBAL_QUERY;
        u32 flip = 0;
        float* top_d = top_d_buf;
        u32* top_i = top_i_buf;
        float* res_d = res_d_buf;
        u32* res_i = res_i_buf;

        // The query, as f32, and its key and norm.
        const u8* qrow = a.queries + (u64)q * row_bytes;
        __syncthreads();  // the previous query's output is written
        block_widen_row<T>(reinterpret_cast<const uint4*>(qrow), nvec, qv);
        for (u32 i = tid; i < L; i += bd) {
            top_d[i] = inf_f32();
            top_i[i] = INVALID;
        }
        for (u32 i = tid; i < R; i += bd) {
            res_d[i] = inf_f32();
            res_i[i] = INVALID;
        }
        if (forgettable) visited_clear(table, hsize);  // blockDim-strided
        if (tid < 32) {
            const u64 key = query_key(reinterpret_cast<const u32*>(qrow), (u32)(row_bytes / 4));
            if (tid == 0) {
                s_key = key;
                s_filled = 0;
                s_ent_next = part == 0 ? min(a.n_entries, C) : a.n_entries;
            }
        }
        __syncthreads();
        if (tid < 32) {
            const float s = warp_sq_norm_f32(qv, a.stride);
            if (lane == 0) s_qnorm = s;
        }
        const u64 key = s_key;
        u64 counter = 0;  // random draws so far (the same in every thread)

        // Initial candidates: the entry points (first part only), then random ids. With more than
        // C entry points, the first C come here and the others in further batches (below).
        const u32 n_ent = part == 0 ? a.n_entries : 0u;
        for (u32 s = tid; s < C; s += bd) {
            gathered[s] = s < n_ent ? a.entries[s]
                                    : (u32)below(hash3(a.seed, key, ((u64)part << 40) | (counter + s)), a.n);
        }
        counter += C;
        u32 iter = 0;
        while (true) {
            // Drop visited and invalid ids; compact the new ones.
            if (tid == 0) s_cnt = 0;
            __syncthreads();
            for (u32 s = tid; s < C; s += bd) {
                const u32 id = gathered[s];
                if (id < a.n && visited_insert(table, hmask, id)) cand_i[atomicAdd(&s_cnt, 1u)] = id;
            }
            __syncthreads();
            const u32 cnt = s_cnt;
            // Without a filter, a candidate not before the list's last entry can never enter it:
            // it is dropped here (id INVALID) and takes no part in the sort or the merge.
            const float last_d = top_d[L - 1];
            const u32 last_i = top_i[L - 1];
            if (tid == 0) s_kept = 0;
            __syncthreads();
            // Distances, one team per candidate.
            for (u32 base = 0; base < cnt; base += nteams) {
                const u32 s = base + team_id;
                const bool valid = s < cnt;
                const uint4* row =
                    valid ? reinterpret_cast<const uint4*>(a.data + (u64)cand_i[s] * row_bytes) : nullptr;
                const float dist = team_query_distance<T>(row, qv, nvec, team, team_lane, a.metric, s_qnorm);
                if (valid && team_lane == 0) {
                    if (filtered || before(dist, cand_i[s], last_d, last_i)) {
                        cand_d[s] = dist;
                        atomicAdd(&s_kept, 1u);
                    } else {
                        cand_d[s] = inf_f32();
                        cand_i[s] = INVALID;
                    }
                }
            }
            if (!by_rank) {
                for (u32 s = cnt + tid; s < C; s += bd) {
                    cand_d[s] = inf_f32();
                    cand_i[s] = INVALID;
                }
            }
            if (tid == 0) {
                s_filled += cnt;
                s_dcs += cnt;
            }
            __syncthreads();
            const u32 kept = s_kept;
            if (by_rank)
                rank_sort(cand_d, cand_i, cnt, sort_d, sort_i);
            else
                block_bitonic_sort(cand_d, cand_i, C);  // barriers on both sides
            float* next_top_d = top_d_buf + (flip ^ 1u) * L;
            u32* next_top_i = top_i_buf + (flip ^ 1u) * L;
            merge_into(top_d, top_i, next_top_d, next_top_i, L, sorted_d, sorted_i, kept, nullptr);
            if (filtered) {
                for (u32 s = tid; s < C / 32; s += bd) masks[s] = 0;
                __syncthreads();
                for (u32 s = tid; s < kept; s += bd) {
                    const u32 id = sorted_i[s];
                    if ((a.filter[id >> 5] >> (id & 31u)) & 1u) atomicOr(&masks[s >> 5], 1u << (s & 31u));
                }
                __syncthreads();
                float* next_res_d = res_d_buf + (flip ^ 1u) * R;
                u32* next_res_i = res_i_buf + (flip ^ 1u) * R;
                merge_into(res_d, res_i, next_res_d, next_res_i, R, sorted_d, sorted_i, kept, masks);
                res_d = next_res_d;
                res_i = next_res_i;
            }
            flip ^= 1u;
            top_d = next_top_d;
            top_i = next_top_i;
            // Entry points left (part 0): the next batch of up to C of them is scored like
            // candidates, with no parents picked and no iteration counted.
            const bool entry_batch = s_ent_next < a.n_entries;
            u32 np = 0;
            if (!entry_batch) {
                ++iter;
                if (iter >= a.max_iter) break;

                // Parents: the first W unflagged entries of the top list, by one warp.
                if (tid < 32) {
                    u32 found = 0;
                    for (u32 base = 0; base < L && found < W; base += 32) {
                        const u32 i = base + lane;
                        const u32 id = i < L ? top_i[i] : INVALID;
                        const bool unflagged = (id & MSB) == 0;
                        const u32 ballot = __ballot_sync(0xffffffffu, unflagged);
                        const u32 before_me = __popc(ballot & ((1u << lane) - 1u));
                        if (unflagged && found + before_me < W) {
                            parents[found + before_me] = id;
                            top_i[i] = id | MSB;
                        }
                        found = min(W, found + __popc(ballot));
                    }
                    if (lane == 0) s_np = found;
                }
                __syncthreads();
                np = s_np;
                if (np == 0 && iter >= a.min_iter) break;
            }

            // Forgettable table: clear it before it is half full and refill it with the lists (also
            // between batches of entry points, so that any number of them fits).
            if (forgettable) forget_if_full(table, hsize, C, top_i, L, res_i, R, s_filled, s_cnt);
            if (entry_batch) {
                const u32 e0 = s_ent_next;
                for (u32 s = tid; s < C; s += bd) {
                    const u32 e = e0 + s;
                    gathered[s] = e < a.n_entries ? a.entries[e] : INVALID;
                }
            } else if (np == 0) {
                // Converged before min_iter: restart from random points.
                for (u32 s = tid; s < C; s += bd)
                    gathered[s] = (u32)below(hash3(a.seed, key, ((u64)part << 40) | (counter + s)), a.n);
                counter += C;
            } else {
                if (tid == 0) s_hops += np;
                for (u32 s = tid; s < C; s += bd) {
                    const u32 p = s / a.degree;
                    gathered[s] = p < np ? a.graph[(u64)parents[p] * a.degree + (s - p * a.degree)] : INVALID;
                }
            }
            __syncthreads();  // also: every thread has read s_ent_next
            if (entry_batch && tid == 0) s_ent_next = a.n_entries - s_ent_next > C ? s_ent_next + C : a.n_entries;
        }

        // Output: the first out_len distinct entries of the result list, by one warp.
        __syncthreads();
        if (tid < 32) {
            const float* od = filtered ? res_d : top_d;
            const u32* oi = filtered ? res_i : top_i;
            u32* dst_i = a.out_ids + (u64)w * a.out_len;
            float* dst_d = a.out_d + (u64)w * a.out_len;
            u32 pos = 0;
            for (u32 base = 0; base < L && pos < a.out_len; base += 32) {
                const u32 i = base + lane;
                const u32 id = i < L ? key_id(oi[i]) : INVALID;
                const bool keep = id != INVALID && (i == 0 || key_id(oi[i - 1]) != id);
                const u32 ballot = __ballot_sync(0xffffffffu, keep);
                const u32 at = pos + __popc(ballot & ((1u << lane) - 1u));
                if (keep && at < a.out_len) {
                    dst_i[at] = id;
                    dst_d[at] = od[i];
                }
                pos += __popc(ballot);
            }
            for (u32 i = pos + lane; i < a.out_len; i += 32) {
                dst_i[i] = INVALID;
                dst_d[i] = inf_f32();
            }
        }
    }
    if (tid == 0) {
        atomicAdd(&a.counters[0], (unsigned long long)s_hops);
        atomicAdd(&a.counters[1], (unsigned long long)s_dcs);
    }
}

}  // namespace cagra_search
}  // namespace weft

using namespace weft;
using namespace weft::cagra_search;

#define WEFT_CAGRA_SEARCH(NAME, T)                                                                     \
    extern "C" __global__ void __launch_bounds__(512, 2)                                               \
        NAME(const __grid_constant__ CagraSearchArgs a) {                                              \
        search<T>(a);                                                                                  \
    }

WEFT_CAGRA_SEARCH(cagra_search_f32, float)
WEFT_CAGRA_SEARCH(cagra_search_f16, f16_t)
WEFT_CAGRA_SEARCH(cagra_search_u8, u8)
WEFT_CAGRA_SEARCH(cagra_search_i8, i8)

// Sets `len` words to INVALID (empties global visited tables).
extern "C" __global__ void cagra_search_fill(const __grid_constant__ CagraSearchFillArgs a) {
    for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < a.len;
         i += (unsigned long long)gridDim.x * blockDim.x)
        a.p[i] = INVALID;
}

// Multi-CTA results: per query, the `k` best distinct of `parts` sorted lists of `len` entries
// (`in_ids` / `in_d`, [query][part][len]); `slots` (a power of two >= parts * len) pairs of
// dynamic shared memory.
extern "C" __global__ void cagra_search_merge(const __grid_constant__ CagraSearchMergeArgs a) {
    extern __shared__ __align__(16) u32 smem[];
    float* d = reinterpret_cast<float*>(smem);
    u32* id = smem + a.slots;
    const u32 q = blockIdx.x;
    const u32 m = a.parts * a.len;
    for (u32 i = threadIdx.x; i < a.slots; i += blockDim.x) {
        d[i] = i < m ? a.in_d[(u64)q * m + i] : inf_f32();
        id[i] = i < m ? a.in_ids[(u64)q * m + i] : INVALID;
        if (id[i] == INVALID) d[i] = inf_f32();
    }
    block_bitonic_sort(d, id, a.slots);
    if (threadIdx.x < 32) {
        const u32 lane = threadIdx.x;
        u32 pos = 0;
        for (u32 base = 0; base < a.slots && pos < a.k; base += 32) {
            const u32 i = base + lane;
            const u32 x = id[i];
            const bool keep = x != INVALID && (i == 0 || id[i - 1] != x);
            const u32 ballot = __ballot_sync(0xffffffffu, keep);
            const u32 at = pos + __popc(ballot & ((1u << lane) - 1u));
            if (keep && at < a.k) {
                a.out_ids[(u64)q * a.k + at] = x;
                a.out_d[(u64)q * a.k + at] = d[i];
            }
            pos += __popc(ballot);
        }
        for (u32 i = pos + lane; i < a.k; i += 32) {
            a.out_ids[(u64)q * a.k + i] = INVALID;
            a.out_d[(u64)q * a.k + i] = inf_f32();
        }
    }
}
