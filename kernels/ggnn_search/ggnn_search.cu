// ggnn_search/ggnn_search.cu: the GGNN query on the GPU (crates/weft-search/src/gpu/ggnn.rs
// drives it; docs/ggnn.md, "Search on the GPU", explains the design and how it differs from the
// CPU search of crates/weft-search/src/ggnn.rs).
//
// One thread block per query. Shared memory holds the query (as f32), the sorted best list
// (`best_cap` entries), the sorted bounded priority queue (`beam_width` entries; its live part is
// [q_head, q_len)), the FIFO ring of the last `ring_cap` expanded vertices, the candidate buffer
// and an open-addressing visited table (weft/hashset.cuh) of 2^hash_bits slots. Lists are
// ordered by (distance, id) (weft/topk.cuh pair_less), so results are deterministic.
//
// Per query:
//   1. the entry points (`entries`, or, when there are none, 32 ids drawn with weft/rng.cuh
//      exactly as the CPU search draws them, keyed by (seed, global query index, j)) are
//      scored in chunks of `cand_cap`, like the neighbours of an expanded vertex (step 3);
//   2. while fewer than `max_iter` vertices were expanded: the queue's head (d, a) is popped if
//      d < crit, else the search stops; crit = d_best_k + xi with xi = tau * min(d_best_1,
//      max_nn1) in real distances, applied squared for L2 (d^2 < d_k^2 + xi^2) and linearly for
//      inner product and cosine (d_best_1 by magnitude); crit is infinite while the best list is
//      not full. `a` enters the ring;
//   3. a's row is read (up to its first INVALID; ids >= n and a itself are skipped), every id
//      not yet in the visited table is inserted there and becomes a candidate; the candidates'
//      distances are computed by teams of `team` lanes with 16-byte loads; the candidates with
//      d < crit (crit of the state before this row) are merged into the best list and the queue
//      at once (ranks by counting), each list keeping its best entries.
// With a filter (`has_filter`; bit id % 32 of word id / 32 of `filter` set = allowed), the
// traversal above is unchanged, and every scored candidate that is allowed is also merged into
// a third sorted list, the result list of `k` entries (one bit test per candidate), which is the
// output (padded with INVALID / +inf). The table refill keeps it too, so a listed id is never
// scored twice (as on the CPU, where a listed id counts as remembered).
// The visited table remembers every scored id since it was last reset. Before a row could fill
// it beyond half, it is reset and refilled with the best list, the queue and the ring: so an id
// in either list is always in the table (the lists never hold a duplicate), and everything the
// CPU search remembers (its lists and its ring) the GPU remembers too.
#include "weft/distance.cuh"
#include "weft/hashset.cuh"
#include "weft/rng.cuh"
#include "weft/topk.cuh"
#include "weft/types.cuh"
#include "args.cuh"

namespace weft {
namespace ggnn_search {

// Merge elements one thread holds (best + queue + candidates <= MAX_PER_THREAD * blockDim).
constexpr u32 MAX_PER_THREAD = 8;
// Random entry points when the graph has none (the CPU search's count).
constexpr u32 RANDOM_ENTRIES = 32;

// The stopping bound of a best list of `len` entries (see the header); `__fadd_rn` and
// `__fmul_rn` keep the compiler from fusing, so that the bound is the CPU's bit for bit.
__device__ __forceinline__ float criterion(const float* best_d, u32 len, u32 cap, float tau, float guard,
                                           bool squared) {
    if (len < cap) return inf_f32();
    const float dk = best_d[cap - 1];
    const float d1 = best_d[0];
    if (squared) {
        const float xi = __fmul_rn(tau, fminf(sqrtf(fmaxf(d1, 0.0f)), guard));
        return __fadd_rn(dk, __fmul_rn(xi, xi));
    }
    return __fadd_rn(dk, __fmul_rn(tau, fminf(fabsf(d1), guard)));
}

// Number of entries of the sorted list (d, id)[0..len) strictly before (x, xi).
__device__ __forceinline__ u32 count_less(const float* d, const u32* id, u32 len, float x, u32 xi) {
    u32 lo = 0, hi = len;
    while (lo < hi) {
        const u32 mid = (lo + hi) >> 1;
        if (pair_less(d[mid], id[mid], x, xi))
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

template <typename T>
__device__ void search(const GgnnSearchArgs& a) {
    constexpr u32 P = Elem<T>::PER_VEC;
    extern __shared__ __align__(16) u32 smem[];
    __shared__ u32 s_cnt;
    __shared__ u32 s_trim;
    __shared__ u32 s_filled;
    __shared__ u32 s_best_len;
    __shared__ u32 s_q_head;
    __shared__ u32 s_q_len;
    __shared__ u32 s_ring_len;
    __shared__ u32 s_ring_head;
    __shared__ u32 s_res_len;
    __shared__ u32 s_res_buf;
    __shared__ float s_qnorm;

    const u32 B = a.best_cap;
    const u32 Q = a.beam_width;
    const u32 V = a.ring_cap;
    const u32 C = a.cand_cap;
    float* qv = reinterpret_cast<float*>(smem);
    float* best_d = qv + a.stride;
    u32* best_i = reinterpret_cast<u32*>(best_d + B);
    float* q_d = reinterpret_cast<float*>(best_i + B);
    u32* q_i = reinterpret_cast<u32*>(q_d + Q);
    float* cand_d = reinterpret_cast<float*>(q_i + Q);
    u32* cand_i = reinterpret_cast<u32*>(cand_d + C);
    u32* gathered = cand_i + C;
    u32* ring = gathered + C;
    u32* table = ring + V;
    const bool filtered = a.has_filter != 0;
    const u32 R = filtered ? a.k : 0u;  // result list (filtered searches only)
    // Two result lists (the merge reads one and writes the other): res_d + b * 2R holds the
    // distances of list b, res_i + b * 2R its ids.
    float* res_d = reinterpret_cast<float*>(table + (1u << a.hash_bits));
    u32* res_i = reinterpret_cast<u32*>(res_d + R);

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
    const bool squared = a.metric == METRIC_L2;
    const u32 n_random = a.n_entries == 0 ? RANDOM_ENTRIES : 0u;
    const u32 n_start = a.n_entries == 0 ? RANDOM_ENTRIES : a.n_entries;

    u64 hops = 0, dcs = 0;
    for (u32 q = blockIdx.x; q < a.nq; q += gridDim.x) {
        const u8* qrow = a.queries + (u64)q * row_bytes;
        __syncthreads();  // the previous query's output is written
        block_widen_row<T>(reinterpret_cast<const uint4*>(qrow), nvec, qv);
        visited_clear(table, hsize);
        if (tid == 0) {
            s_filled = 0;
            s_best_len = 0;
            s_q_head = 0;
            s_q_len = 0;
            s_ring_len = 0;
            s_ring_head = 0;
            s_res_len = 0;
            s_res_buf = 0;
            s_trim = a.degree;
        }
        __syncthreads();
        if (tid < 32) {
            const float s = warp_sq_norm_f32(qv, a.stride);
            if (lane == 0) s_qnorm = s;
        }
        const u64 qglobal = (u64)a.q_base + q;

        u32 start = 0;  // entry points scored so far
        u32 iter = 0;
        while (true) {
            // ---- the ids of this round: a chunk of entry points, or the row of a popped vertex ----
            u32 count;           // ids in gathered[0..count)
            u32 node = INVALID;  // the expanded vertex (skipped in its own row)
            if (start < n_start) {
                count = min(C, n_start - start);
                for (u32 s = tid; s < count; s += bd) {
                    const u32 j = start + s;
                    gathered[s] = n_random ? (u32)below(hash3(a.seed, qglobal, j), a.n) : a.entries[j];
                }
                start += count;
            } else {
                if (iter >= a.max_iter) break;
                const u32 head = s_q_head;
                if (head >= s_q_len) break;
                const float d = q_d[head];
                const float crit = criterion(best_d, s_best_len, B, a.tau, a.guard, squared);
                if (!(d < crit)) break;
                node = q_i[head];
                ++iter;
                __syncthreads();  // every thread has read the head before it moves
                if (tid == 0) {
                    s_q_head = head + 1;
                    if (V > 0) {
                        if (s_ring_len < V) {
                            ring[s_ring_len] = node;
                            s_ring_len = s_ring_len + 1;
                        } else {
                            ring[s_ring_head] = node;
                            s_ring_head = s_ring_head + 1 == V ? 0 : s_ring_head + 1;
                        }
                    }
                    hops += 1;
                }
                // The row up to its first INVALID (s_trim was set to the degree last round).
                const u32* row = a.graph + (u64)node * a.degree;
                for (u32 s = tid; s < a.degree; s += bd) {
                    const u32 id = row[s];
                    gathered[s] = id;
                    if (id == INVALID) atomicMin(&s_trim, s);
                }
                __syncthreads();
                count = s_trim;
            }
            // ---- reset the visited table before this round could fill it past half; refill
            // it with the lists and the ring ----
            if (s_filled + count > hsize / 2) {
                visited_clear(table, hsize);
                if (tid == 0) s_cnt = 0;
                __syncthreads();
                const u32 bl = s_best_len, qh = s_q_head, ql = s_q_len, rl = s_ring_len;
                const u32 lists = bl + (ql - qh) + rl;
                const u32 total = lists + s_res_len;
                for (u32 i = tid; i < total; i += bd) {
                    const u32 id = i < bl                ? best_i[i]
                                   : i < bl + (ql - qh) ? q_i[qh + i - bl]
                                   : i < lists          ? ring[i - bl - (ql - qh)]
                                                        : res_i[s_res_buf * 2u * R + i - lists];
                    if (visited_insert(table, hmask, id)) atomicAdd(&s_cnt, 1u);
                }
                __syncthreads();
                if (tid == 0) s_filled = s_cnt;
            }
            // ---- keep the ids not yet scored ----
            if (tid == 0) s_cnt = 0;
            __syncthreads();
            for (u32 s = tid; s < count; s += bd) {
                const u32 id = gathered[s];
                if (id < a.n && id != node && visited_insert(table, hmask, id)) cand_i[atomicAdd(&s_cnt, 1u)] = id;
            }
            __syncthreads();
            const u32 cnt = s_cnt;
            // ---- prefetch the rows of the candidates past the first round into L2, so that
            // the later rounds of the team loop find them there instead of in DRAM ----
            if (a.prefetch && cnt > nteams) {
                const u32 lines = (u32)((row_bytes + 127u) / 128u);
                for (u32 i = tid; i < (cnt - nteams) * lines; i += bd) {
                    const u32 s = nteams + i / lines;
                    const u8* line = a.data + (u64)cand_i[s] * row_bytes + (u64)(i % lines) * 128u;
                    asm volatile("prefetch.global.L2 [%0];" ::"l"(line));
                }
            }
            // ---- distances, one team per candidate ----
            for (u32 base = 0; base < cnt; base += nteams) {
                const u32 s = base + team_id;
                const bool valid = s < cnt;
                const uint4* row =
                    valid ? reinterpret_cast<const uint4*>(a.data + (u64)cand_i[s] * row_bytes) : nullptr;
                const float dist = team_query_distance<T>(row, qv, nvec, team, team_lane, a.metric, s_qnorm);
                if (valid && team_lane == 0) cand_d[s] = dist;
            }
            if (tid == 0) {
                s_filled += cnt;
                dcs += cnt;
            }
            __syncthreads();
            // ---- merge the candidates below the bound into both lists at once ----
            // Element e < bl + qn is a list entry (it moves down by the accepted candidates
            // before it); e >= bl + qn is candidate e - bl - qn, with a position in each list.
            const u32 bl = s_best_len, qh = s_q_head, ql = s_q_len;
            const float crit = criterion(best_d, bl, B, a.tau, a.guard, squared);
            const u32 qn = ql - qh;
            const u32 total = bl + qn + cnt;
            float vd[MAX_PER_THREAD];
            u32 vi[MAX_PER_THREAD];
            u32 vpos[MAX_PER_THREAD];   // best-list position, or INVALID
            u32 vpos2[MAX_PER_THREAD];  // queue position, or INVALID
            u32 my_acc = 0;
#pragma unroll
            for (u32 r = 0; r < MAX_PER_THREAD; ++r) {
                const u32 e = tid + r * bd;
                vpos[r] = INVALID;
                vpos2[r] = INVALID;
                vd[r] = 0.0f;
                vi[r] = INVALID;
                if (e >= total) continue;
                const bool is_list = e < bl + qn;
                const bool in_best = e < bl;
                const u32 j = e - bl - qn;
                const float d = is_list ? (in_best ? best_d[e] : q_d[qh + e - bl]) : cand_d[j];
                const u32 id = is_list ? (in_best ? best_i[e] : q_i[qh + e - bl]) : cand_i[j];
                if (!is_list && !(d < crit)) continue;
                u32 before = 0;
                // Unrolled by 4, as ptxas chose by itself while the kernel took its parameters
                // one by one: reading them from the argument struct, it unrolls this loop about
                // 16 times, which doubles the kernel and spills.
#pragma unroll 4
                for (u32 c = 0; c < cnt; ++c) {
                    const float cd = cand_d[c];
                    before += (cd < crit && pair_less(cd, cand_i[c], d, id)) ? 1u : 0u;
                }
                vd[r] = d;
                vi[r] = id;
                if (is_list) {
                    if (in_best)
                        vpos[r] = e + before;
                    else
                        vpos2[r] = e - bl + before;
                } else {
                    vpos[r] = before + count_less(best_d, best_i, bl, d, id);
                    vpos2[r] = before + count_less(q_d + qh, q_i + qh, qn, d, id);
                    my_acc += 1;
                }
            }
            if (tid == 0) s_cnt = 0;
            __syncthreads();
            if (my_acc) atomicAdd(&s_cnt, my_acc);
#pragma unroll
            for (u32 r = 0; r < MAX_PER_THREAD; ++r) {
                if (vpos[r] < B) {
                    best_d[vpos[r]] = vd[r];
                    best_i[vpos[r]] = vi[r];
                }
                if (vpos2[r] < Q) {
                    q_d[vpos2[r]] = vd[r];
                    q_i[vpos2[r]] = vi[r];
                }
            }
            __syncthreads();
            if (tid == 0) {
                const u32 acc = s_cnt;
                s_best_len = min(B, bl + acc);
                s_q_len = min(Q, qn + acc);
                s_q_head = 0;
                s_trim = a.degree;
            }
            __syncthreads();
            // ---- with a filter: the allowed candidates into the result list ----
            // gathered[s] (free until the next round) flags candidate s: allowed and beating the
            // list's last entry when it is full. Element e < rl is a list entry (moved down by
            // the flagged candidates before it); e >= rl is candidate e - rl.
            if (filtered) {
                const u32 rl = s_res_len;
                const u32 cur = s_res_buf;
                const float* rd = res_d + cur * 2u * R;
                const u32* ri = res_i + cur * 2u * R;
                float* wd_out = res_d + (cur ^ 1u) * 2u * R;
                u32* wi_out = res_i + (cur ^ 1u) * 2u * R;
                const bool full = rl == R;
                const float wd = full ? rd[R - 1] : inf_f32();
                const u32 wi = full ? ri[R - 1] : INVALID;
                for (u32 s = tid; s < cnt; s += bd) {
                    const u32 id = cand_i[s];
                    const bool allowed = (a.filter[id >> 5] >> (id & 31u)) & 1u;
                    gathered[s] = allowed && (!full || pair_less(cand_d[s], id, wd, wi)) ? 1u : 0u;
                }
                if (tid == 0) s_cnt = 0;
                __syncthreads();
                // Each element's rank in the merged list, written straight into the other buffer.
                u32 r_acc = 0;
                for (u32 e = tid; e < rl + cnt; e += bd) {
                    const bool is_list = e < rl;
                    if (!is_list && !gathered[e - rl]) continue;
                    const float d = is_list ? rd[e] : cand_d[e - rl];
                    const u32 id = is_list ? ri[e] : cand_i[e - rl];
                    u32 pos = 0;
                    for (u32 c = 0; c < cnt; ++c)
                        pos += (gathered[c] && pair_less(cand_d[c], cand_i[c], d, id)) ? 1u : 0u;
                    if (is_list) {
                        pos += e;
                    } else {
                        pos += count_less(rd, ri, rl, d, id);
                        r_acc += 1;
                    }
                    if (pos < R) {
                        wd_out[pos] = d;
                        wi_out[pos] = id;
                    }
                }
                if (r_acc) atomicAdd(&s_cnt, r_acc);
                __syncthreads();
                if (tid == 0) {
                    s_res_len = min(R, rl + s_cnt);
                    s_res_buf = cur ^ 1u;
                }
                __syncthreads();
            }
        }

        // ---- output: the first k entries of the best list (with a filter: the result list) ----
        __syncthreads();
        const u32 bl = filtered ? s_res_len : s_best_len;
        const float* od = filtered ? res_d + s_res_buf * 2u * R : best_d;
        const u32* oi = filtered ? res_i + s_res_buf * 2u * R : best_i;
        for (u32 i = tid; i < a.k; i += bd) {
            a.out_ids[(u64)q * a.k + i] = i < bl ? oi[i] : INVALID;
            a.out_d[(u64)q * a.k + i] = i < bl ? od[i] : inf_f32();
        }
    }
    if (tid == 0) {
        atomicAdd(&a.counters[0], (unsigned long long)hops);
        atomicAdd(&a.counters[1], (unsigned long long)dcs);
    }
}

}  // namespace ggnn_search
}  // namespace weft

using namespace weft;
using namespace weft::ggnn_search;

#define WEFT_GGNN_SEARCH(NAME, T)                                                                  \
    extern "C" __global__ void __launch_bounds__(128, 8)                                           \
        NAME(const __grid_constant__ GgnnSearchArgs a) {                                           \
        search<T>(a);                                                                              \
    }

WEFT_GGNN_SEARCH(ggnn_search_f32, float)
WEFT_GGNN_SEARCH(ggnn_search_f16, f16_t)
WEFT_GGNN_SEARCH(ggnn_search_u8, u8)
WEFT_GGNN_SEARCH(ggnn_search_i8, i8)
