// gnnd/gnnd.cu: GPU NN-Descent (GNND, Wang, Zhao & Zeng, CIKM 2021), redesigned as described in
// docs/gnnd.md. One iteration is four launches:
//   gnnd_sample   one warp per list: the first p NEW and first p OLD entries (the closest) are
//                 the forward samples; sampled NEW entries become OLD; each forward sample v
//                 receives the list owner as a reverse sample (atomic append, capped at p).
//   gnnd_dedup    one warp per list: forward + reverse samples, duplicates removed, ids that are
//                 NEW removed from OLD; compacted, counts written, reverse counters reset.
//   gnnd_join_*   one block per list: the distances between the NEW samples (columns) and all
//                 samples (rows: NEW then OLD) by register tiles over shared-memory chunks of the
//                 vectors; selective update (each NEW sample gets its nearest NEW and its nearest
//                 OLD sample as a candidate, each OLD sample its nearest NEW); candidates closer
//                 than the target's current worst entry go to the target's inbox.
//   gnnd_merge    one warp per list: the inbox is inserted into the sorted list (duplicates
//                 rejected, entries inserted NEW), the inbox emptied, insertions counted.
// Lists are sorted ascending by (distance, id); the NEW flag is the top bit of the id.
// The graph merge (GGM, crates/weft-nndescent/src/gpu/gnnd/merge.rs) reuses these kernels on
// the union of two vertex sets, vertices [0, split) read from one matrix and [split, n) from
// another: gnnd_cross_init_* seeds each list with random vertices of the other set,
// gnnd_sample skips OLD entries of the other set, and the join's MODE_CROSS skips NEW x NEW
// pairs, so only cross-set pairs are joined.
#include "weft/distance.cuh"
#include "weft/rng.cuh"
#include "weft/topk.cuh"
#include "weft/types.cuh"
#include "args.cuh"

namespace weft {
namespace gnnd {

// The NEW flag of a list entry (top bit of the id); ids are below 2^31 - 1.
constexpr u32 NEW_FLAG = 0x80000000u;
constexpr u32 ID_MASK = 0x7fffffffu;
// Most samples of one kind (NEW or OLD) per list after the reverse append (2 p, p <= 32).
constexpr u32 MAX_SAMPLES = 64;
// Rows (NEW + OLD samples) and columns (NEW samples) of the join tile.
constexpr u32 JOIN_ROWS = 2 * MAX_SAMPLES;
constexpr u32 JOIN_COLS = MAX_SAMPLES;
// Threads per join block (16 x 16), dimensions per shared-memory chunk and its row pitch.
constexpr u32 JOIN_THREADS = 256;
constexpr u32 CHUNK = 32;
constexpr u32 PITCH = CHUNK + 4;

__device__ __forceinline__ u32 raw_id(u32 id) { return id == INVALID ? INVALID : (id & ID_MASK); }

// The vector of vertex v when the vertices live in two matrices: [0, split) in `a`, [split, n)
// in `b` (a merge of two shards; a plain build passes b = a and split = n).
template <typename T>
__device__ __forceinline__ const T* row_of(const T* a, const T* b, u32 split, u32 v, u32 stride) {
    return v < split ? a + (u64)v * stride : b + (u64)(v - split) * stride;
}

// Join modes: bit 0 symmetric offers, bit 1 cross-only (GGM: NEW x NEW pairs are skipped, so
// only NEW x OLD pairs, which the merge sampling makes cross-subset, are offered), bits 8.. the
// offers per row.
constexpr u32 MODE_SYMMETRIC = 1u;
constexpr u32 MODE_CROSS = 2u;

// The join's metric, a template parameter: one kernel per metric (gnnd_join_l2_*,
// gnnd_join_ip_*, gnnd_join_cos_*), so that each unrolled register tile holds one distance
// formula. One kernel for inner product and cosine with a run-time choice compiled in 2.7x the
// L2 join's time (NVRTC, first use without nvcc).
constexpr u32 JOIN_L2 = 0u;
constexpr u32 JOIN_IP = 1u;
constexpr u32 JOIN_COS = 2u;

// Initialisation: list s gets k distinct random ids != s (s + 1 + ((o + j g) mod (n - 1)), g
// coprime to n - 1), with their distances, as inbox candidates; the list itself is emptied.
template <typename T>
__device__ void init(const T* data, u32 n, u32 stride, i32 metric, u32 k, u64 seed, float* list_d,
                     u32* list_i, float* inbox_d, u32* inbox_i, u32* inbox_cnt, u32 M) {
    const u32 lane = threadIdx.x & 31u;
    const u32 s = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    if (s >= n) return;
    const u32 m = n - 1;
    const u64 h = hash3(seed, 0x6e6e64696e6974ull, s);
    const AffineWalk walk(h, m);
    const T* a = data + (u64)s * stride;
    for (u32 j = 0; j < k; ++j) {
        const u32 v = (s + 1 + walk.at(j)) % n;
        const float d = warp_distance<T>(a, data + (u64)v * stride, stride, metric);
        if (lane == 0) {
            inbox_d[(u64)s * M + j] = d;
            inbox_i[(u64)s * M + j] = v;
        }
    }
    for (u32 j = lane; j < k; j += 32) {
        list_d[(u64)s * k + j] = inf_f32();
        list_i[(u64)s * k + j] = INVALID;
    }
    if (lane == 0) inbox_cnt[s] = k;
}

// GGM initialisation: list s of a merge (vertices [0, split) in `a`, [split, n) in `b`) gets
// min(half, size of the other subset) distinct random ids of the other subset (o + j g modulo its
// size, g coprime to it), with their distances, as inbox candidates (the lists themselves, the
// kept halves of the two graphs, are written by the host).
template <typename T>
__device__ void cross_init(const T* a, const T* b, u32 split, u32 n, u32 stride, i32 metric,
                           u32 half, u64 seed, float* inbox_d, u32* inbox_i, u32* inbox_cnt,
                           u32 M) {
    const u32 lane = threadIdx.x & 31u;
    const u32 s = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    if (s >= n) return;
    const u32 base = s < split ? split : 0;
    const u32 m = s < split ? n - split : split;
    const u32 cnt = min(half, m);
    const u64 h = hash3(seed, 0x67676d696e6974ull, s);
    const AffineWalk walk(h, m);
    const T* x = row_of(a, b, split, s, stride);
    for (u32 j = 0; j < cnt; ++j) {
        const u32 v = base + walk.at(j);
        const float d = warp_distance<T>(x, row_of(a, b, split, v, stride), stride, metric);
        if (lane == 0) {
            inbox_d[(u64)s * M + j] = d;
            inbox_i[(u64)s * M + j] = v;
        }
    }
    if (lane == 0) inbox_cnt[s] = cnt;
}

// Row r of the join tile: NEW samples first, then OLD.
struct JoinShared {
    u32 ids[JOIN_ROWS];
    // Cosine: 1 / |x| of each row (0 for a zero row), so that a pair's distance is
    // 1 - dot * inv_norm[r] * inv_norm[c]: two multiplications in each of the unrolled register
    // tiles instead of a square root and a division (which made the cosine join take three times
    // the L2 join's compile time; a zero row still gives 1, the cosine_from_parts convention).
    float inv_norm[JOIN_ROWS];
    float worst[JOIN_ROWS];
    unsigned long long colmin[JOIN_COLS];
    float vec[JOIN_ROWS * PITCH];
};

// Sends candidate (v, d) to u's inbox when it beats u's worst entry (`worst`, read when the
// join began; the lists do not change during a join).
__device__ __forceinline__ void emit(u32 u, float worst, u32 v, float d, u32 k, float* inbox_d,
                                     u32* inbox_i, u32* inbox_cnt, u32 M,
                                     unsigned long long* overflow) {
    (void)k;
    if (!(d < worst)) return;
    const u32 pos = atomicAdd(&inbox_cnt[u], 1u);
    if (pos < M) {
        inbox_d[(u64)u * M + pos] = d;
        inbox_i[(u64)u * M + pos] = v;
    } else {
        atomicAdd(overflow, 1ull);
    }
}

// The distance tile of one join block: thread (tr, tc) owns rows r0 + tr + 16 i (i < RI) and
// columns tc + 16 j (j < CJ); r0 = 0, or A with CROSS (the merge's cross mode: NEW rows are not
// joined there, so only the OLD rows, at most 64, are computed; with RI = 4 the rows stay below
// A + 64 <= JOIN_ROWS). L2: sum of squared differences; else the dot product (finished later).
template <typename T, u32 JM, u32 RI, u32 CJ, bool CROSS>
__device__ void join_tile(const T* data, const T* data_b, u32 split, u32 stride, i32 metric,
                          JoinShared& sh, u32 R, u32 A, const float* list_d, u32 k,
                          float* inbox_d, u32* inbox_i, u32* inbox_cnt, u32 M,
                          unsigned long long* overflow, u32 mode) {
    static_assert(!CROSS || RI == 4, "the cross mode computes at most 64 OLD rows");
    const u32 r0 = CROSS ? A : 0u;
    constexpr int P = Elem<T>::PER_VEC;
    const u32 tid = threadIdx.x;
    const u32 tc = tid & 15u, tr = tid >> 4;
    float acc[RI][CJ];
#pragma unroll
    for (u32 i = 0; i < RI; ++i)
#pragma unroll
        for (u32 j = 0; j < CJ; ++j) acc[i][j] = 0.0f;

    const u32 nvec = stride / P;        // 16-byte vectors per row
    constexpr u32 VPC = CHUNK / P;      // 16-byte vectors per chunk
    for (u32 c0 = 0; c0 < stride; c0 += CHUNK) {
        __syncthreads();
        for (u32 t = tid; t < R * VPC; t += JOIN_THREADS) {
            const u32 r = t / VPC, q = t % VPC;
            const u32 vi = c0 / P + q;
            float x[P];
            if (vi < nvec) {
                const uint4 w = reinterpret_cast<const uint4*>(
                    row_of(data, data_b, split, sh.ids[r], stride))[vi];
                Elem<T>::unpack(w, x);
            } else {
#pragma unroll
                for (int e = 0; e < P; ++e) x[e] = 0.0f;
            }
            float* dst = sh.vec + r * PITCH + q * P;
#pragma unroll
            for (int e = 0; e < P; e += 4)
                *reinterpret_cast<float4*>(dst + e) = make_float4(x[e], x[e + 1], x[e + 2], x[e + 3]);
        }
        __syncthreads();
#pragma unroll 2
        for (u32 e = 0; e < CHUNK; e += 4) {
            float4 xr[RI], yc[CJ];
#pragma unroll
            for (u32 i = 0; i < RI; ++i)
                xr[i] = *reinterpret_cast<const float4*>(sh.vec + (r0 + tr + 16 * i) * PITCH + e);
#pragma unroll
            for (u32 j = 0; j < CJ; ++j)
                yc[j] = *reinterpret_cast<const float4*>(sh.vec + (tc + 16 * j) * PITCH + e);
#pragma unroll
            for (u32 i = 0; i < RI; ++i)
#pragma unroll
                for (u32 j = 0; j < CJ; ++j) {
                    if (JM == JOIN_L2) {
                        float d0 = xr[i].x - yc[j].x, d1 = xr[i].y - yc[j].y;
                        float d2 = xr[i].z - yc[j].z, d3 = xr[i].w - yc[j].w;
                        float a = acc[i][j];
                        a = fmaf(d0, d0, a);
                        a = fmaf(d1, d1, a);
                        a = fmaf(d2, d2, a);
                        a = fmaf(d3, d3, a);
                        acc[i][j] = a;
                    } else {
                        float a = acc[i][j];
                        a = fmaf(xr[i].x, yc[j].x, a);
                        a = fmaf(xr[i].y, yc[j].y, a);
                        a = fmaf(xr[i].z, yc[j].z, a);
                        a = fmaf(xr[i].w, yc[j].w, a);
                        acc[i][j] = a;
                    }
                }
        }
    }

    // Pairs worth offering: distinct ids, inside the tile, and closer than the worst entry of
    // an end that would receive the offer. key: the ordered distance, ~0u when excluded.
    const bool sym = (mode & MODE_SYMMETRIC) != 0;
    const bool cross = (mode & MODE_CROSS) != 0;
    const u32 rounds = max(1u, mode >> 8);
    u32 key[RI][CJ];
    unsigned long long colkey[CJ];
#pragma unroll
    for (u32 j = 0; j < CJ; ++j) colkey[j] = ~0ull;
#pragma unroll
    for (u32 i = 0; i < RI; ++i) {
        const u32 r = r0 + tr + 16 * i;
#pragma unroll
        for (u32 j = 0; j < CJ; ++j) {
            const u32 c = tc + 16 * j;
            key[i][j] = ~0u;
            if (r >= R || c >= A || sh.ids[r] == sh.ids[c] || (cross && r < A)) continue;
            float d = acc[i][j];
            if (JM == JOIN_IP) d = -d;
            if (JM == JOIN_COS) d = 1.0f - d * (sh.inv_norm[r] * sh.inv_norm[c]);
            if (!(d < sh.worst[r] || (sym && d < sh.worst[c]))) continue;
            key[i][j] = ordered(d);
            const unsigned long long ck = ((u64)key[i][j] << 32) | r;
            if (r >= A && ck < colkey[j]) colkey[j] = ck;
        }
    }
    // Rows (NEW row: its nearest other NEW; OLD row: its nearest NEW), `rounds` times: the
    // minimum over the 16 threads of a half-warp that share tr, offered, then excluded.
    for (u32 round = 0; round < rounds; ++round) {
#pragma unroll
        for (u32 i = 0; i < RI; ++i) {
            const u32 r = r0 + tr + 16 * i;
            unsigned long long v = ~0ull;
#pragma unroll
            for (u32 j = 0; j < CJ; ++j) {
                const unsigned long long w = ((u64)key[i][j] << 32) | (tc + 16 * j);
                if (key[i][j] != ~0u && w < v) v = w;
            }
#pragma unroll
            for (u32 o = 8; o > 0; o >>= 1) {
                const unsigned long long w = __shfl_xor_sync(0xffffffffu, v, o);
                v = w < v ? w : v;
            }
            if (v != ~0ull) {
                const u32 c = (u32)(v & 0xffffffffu);
#pragma unroll
                for (u32 j = 0; j < CJ; ++j)
                    if (tc + 16 * j == c) key[i][j] = ~0u;
                if (tc == i) {
                    const float d = from_ordered((u32)(v >> 32));
                    emit(sh.ids[r], sh.worst[r], sh.ids[c], d, k, inbox_d, inbox_i, inbox_cnt, M,
                         overflow);
                    if (sym)
                        emit(sh.ids[c], sh.worst[c], sh.ids[r], d, k, inbox_d, inbox_i,
                             inbox_cnt, M, overflow);
                }
            }
        }
    }
    // Columns (NEW sample: its nearest OLD): the two tr of a warp, then across warps in shared
    // memory.
#pragma unroll
    for (u32 j = 0; j < CJ; ++j) {
        unsigned long long v = colkey[j];
        const unsigned long long w = __shfl_xor_sync(0xffffffffu, v, 16);
        v = w < v ? w : v;
        if ((tid & 16u) == 0 && v != ~0ull) atomicMin(&sh.colmin[tc + 16 * j], v);
    }
    __syncthreads();
    if (tid < A && sh.colmin[tid] != ~0ull) {
        const unsigned long long v = sh.colmin[tid];
        const u32 r = (u32)(v & 0xffffffffu);
        const float d = from_ordered((u32)(v >> 32));
        emit(sh.ids[tid], sh.worst[tid], sh.ids[r], d, k, inbox_d, inbox_i, inbox_cnt, M,
             overflow);
        if (sym)
            emit(sh.ids[r], sh.worst[r], sh.ids[tid], d, k, inbox_d, inbox_i, inbox_cnt, M,
                 overflow);
    }
}

template <typename T, u32 JM>
__device__ void join(const T* data, const T* data_b, u32 split, u32 stride, i32 metric,
                     const float* norms,
                     const u32* new_s, const u32* new_cnt, const u32* old_s, const u32* old_cnt,
                     u32 S, const float* list_d, u32 k, float* inbox_d, u32* inbox_i,
                     u32* inbox_cnt, u32 M, unsigned long long* overflow, u32 mode) {
    __shared__ __align__(16) JoinShared sh;
    const u32 s = blockIdx.x;
    const u32 tid = threadIdx.x;
    const u32 A = min(new_cnt[s], MAX_SAMPLES);
    const u32 B = min(old_cnt[s], MAX_SAMPLES);
    const u32 R = A + B;
    if (A == 0) return;  // no NEW sample: nothing to join (block-uniform)
    if (tid < A) sh.ids[tid] = new_s[(u64)s * S + tid];
    if (tid < B) sh.ids[A + tid] = old_s[(u64)s * S + tid];
    if (tid < JOIN_COLS) sh.colmin[tid] = ~0ull;
    __syncthreads();
    if (JM == JOIN_COS && tid < R) {
        const float sq = norms[sh.ids[tid]];
        sh.inv_norm[tid] = sq > 0.0f ? 1.0f / sqrtf(sq) : 0.0f;
    }
    if (tid < R) sh.worst[tid] = list_d[(u64)sh.ids[tid] * k + k - 1];
    // Block-uniform choice of the register tile: rows per thread (R <= 16 RI), columns (A <= 16 CJ).
    // The cross mode computes the OLD rows only (B <= 64 of them).
    if (mode & MODE_CROSS) {
        if (B == 0) return;  // no OLD sample: no cross pair (block-uniform)
        if (A <= 32)
            join_tile<T, JM, 4, 2, true>(data, data_b, split, stride, metric, sh, R, A, list_d,
                                         k, inbox_d, inbox_i, inbox_cnt, M, overflow, mode);
        else
            join_tile<T, JM, 4, 4, true>(data, data_b, split, stride, metric, sh, R, A, list_d,
                                         k, inbox_d, inbox_i, inbox_cnt, M, overflow, mode);
    } else if (R <= 64) {
        if (A <= 32)
            join_tile<T, JM, 4, 2, false>(data, data_b, split, stride, metric, sh, R, A, list_d,
                                          k, inbox_d, inbox_i, inbox_cnt, M, overflow, mode);
        else
            join_tile<T, JM, 4, 4, false>(data, data_b, split, stride, metric, sh, R, A, list_d,
                                          k, inbox_d, inbox_i, inbox_cnt, M, overflow, mode);
    } else {
        if (A <= 32)
            join_tile<T, JM, 8, 2, false>(data, data_b, split, stride, metric, sh, R, A, list_d,
                                          k, inbox_d, inbox_i, inbox_cnt, M, overflow, mode);
        else
            join_tile<T, JM, 8, 4, false>(data, data_b, split, stride, metric, sh, R, A, list_d,
                                          k, inbox_d, inbox_i, inbox_cnt, M, overflow, mode);
    }
}

// The body of the join kernels of one element type, which differ only in the metric `JM` they
// are compiled for: the join over the kernel's argument struct.
template <typename T, u32 JM>
__device__ __forceinline__ void join_kernel(const GnndJoinArgs& a) {
    join<T, JM>(as_elements<T>(a.data), as_elements<T>(a.data_b), a.split, a.stride, a.metric,
                a.norms, a.new_s, a.new_cnt, a.old_s, a.old_cnt, a.S, a.list_d, a.k, a.inbox_d,
                a.inbox_i, a.inbox_cnt, a.M, a.overflow, a.mode);
}

}  // namespace gnnd
}  // namespace weft

using namespace weft;
using namespace weft::gnnd;

// Sampling, forward part and reverse append (see the file comment). One warp per list s.
// new_s / old_s: n rows of S = 2 p ids: [0, p) forward, [p, 2 p) reverse. split: 0 for a build;
// for a merge (GGM) the first vertex of the second subset: OLD entries from the other subset than
// s are then not sampled (NEW entries are all cross-subset there, so every NEW x OLD pair is).
extern "C" __global__ void gnnd_sample(const __grid_constant__ GnndSampleArgs a) {
    u32* __restrict__ list_i = a.list_i;
    u32* __restrict__ new_s = a.new_s;
    u32* __restrict__ old_s = a.old_s;
    u32* __restrict__ fwd_new = a.fwd_new;
    u32* __restrict__ fwd_old = a.fwd_old;
    u32* __restrict__ rev_new = a.rev_new;
    u32* __restrict__ rev_old = a.rev_old;
    const u32 n = a.n, k = a.k, p = a.p, split = a.split;
    const u32 lane = threadIdx.x & 31u;
    const u32 s = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    if (s >= n) return;
    const u32 S = 2 * p;
    u32 nn = 0, no = 0;
    for (u32 j0 = 0; j0 < k && (nn < p || no < p); j0 += 32) {
        const u32 j = j0 + lane;
        const u32 id = j < k ? list_i[(u64)s * k + j] : INVALID;
        const bool valid = id != INVALID;
        const bool is_new = valid && (id & NEW_FLAG);
        const bool is_old = valid && !(id & NEW_FLAG) && ((id >= split) == (s >= split));
        const u32 bn = __ballot_sync(0xffffffffu, is_new);
        const u32 bo = __ballot_sync(0xffffffffu, is_old);
        const u32 below_me = (1u << lane) - 1u;
        const u32 rn = nn + __popc(bn & below_me);
        const u32 ro = no + __popc(bo & below_me);
        if (is_new && rn < p) {
            const u32 v = id & ID_MASK;
            new_s[(u64)s * S + rn] = v;
            list_i[(u64)s * k + j] = v;  // sampled NEW entries become OLD
            const u32 pos = atomicAdd(&rev_new[v], 1u);
            if (pos < p) new_s[(u64)v * S + p + pos] = s;
        }
        if (is_old && ro < p) {
            old_s[(u64)s * S + ro] = id;
            const u32 pos = atomicAdd(&rev_old[id], 1u);
            if (pos < p) old_s[(u64)id * S + p + pos] = s;
        }
        nn += __popc(bn);
        no += __popc(bo);
    }
    if (lane == 0) {
        fwd_new[s] = min(nn, p);
        fwd_old[s] = min(no, p);
    }
}

// Compacts the samples of list s: forward then reverse, duplicates removed, and OLD ids that are
// also NEW removed. Writes the counts to fwd_new / fwd_old and resets the reverse counters.
extern "C" __global__ void gnnd_dedup(const __grid_constant__ GnndDedupArgs a) {
    u32* __restrict__ new_s = a.new_s;
    u32* __restrict__ old_s = a.old_s;
    u32* __restrict__ fwd_new = a.fwd_new;
    u32* __restrict__ fwd_old = a.fwd_old;
    u32* __restrict__ rev_new = a.rev_new;
    u32* __restrict__ rev_old = a.rev_old;
    const u32 n = a.n, p = a.p;
    const u32 lane = threadIdx.x & 31u;
    const u32 s = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    if (s >= n) return;
    const u32 S = 2 * p;
    u32 kept_new[2];
    u32 count_new = 0;
    for (int kind = 0; kind < 2; ++kind) {
        u32* row = (kind == 0 ? new_s : old_s) + (u64)s * S;
        const u32 f = kind == 0 ? fwd_new[s] : fwd_old[s];
        const u32 r = min(kind == 0 ? rev_new[s] : rev_old[s], p);
        // Entry e < f + r: forward e, else reverse e - f. Lane holds e = lane and lane + 32.
        u32 v[2];
        bool keep[2];
        for (int h = 0; h < 2; ++h) {
            const u32 e = lane + 32 * h;
            v[h] = e < f ? row[e] : (e < f + r ? row[p + e - f] : INVALID);
            keep[h] = v[h] != INVALID && v[h] != s;
        }
        const u32 total = f + r;
        for (u32 i = 0; i < total; ++i) {
            const u32 vi = __shfl_sync(0xffffffffu, v[i / 32], i % 32);
            for (int h = 0; h < 2; ++h)
                if (lane + 32 * h > i && v[h] == vi) keep[h] = false;
        }
        if (kind == 1) {
            for (u32 i = 0; i < count_new; ++i) {
                const u32 vi = __shfl_sync(0xffffffffu, kept_new[i / 32], i % 32);
                for (int h = 0; h < 2; ++h)
                    if (v[h] == vi) keep[h] = false;
            }
        }
        __syncwarp();
        u32 out = 0;
        u32 compact[2] = {INVALID, INVALID};
        for (int h = 0; h < 2; ++h) {
            const u32 b = __ballot_sync(0xffffffffu, keep[h]);
            const u32 pos = out + __popc(b & ((1u << lane) - 1u));
            if (keep[h]) row[pos] = v[h];
            out += __popc(b);
        }
        __syncwarp();
        if (kind == 0) {
            for (int h = 0; h < 2; ++h) {
                const u32 e = lane + 32 * h;
                compact[h] = e < out ? row[e] : INVALID;
            }
            kept_new[0] = compact[0];
            kept_new[1] = compact[1];
            count_new = out;
        }
        if (lane == 0) {
            if (kind == 0) {
                fwd_new[s] = out;
            } else {
                fwd_old[s] = out;
            }
        }
    }
    __syncwarp();
    if (lane == 0) {
        rev_new[s] = 0;
        rev_old[s] = 0;
    }
}

// Inserts the inbox of list s into the list (one warp per list, the list in shared memory):
// candidates not closer than the worst entry, or already present, are rejected; an insertion
// shifts the tail by one (the worst entry falls off) and is flagged NEW. Empties the inbox and
// adds the insertions to *updates. Dynamic shared memory: warps per block * k * 8 bytes.
extern "C" __global__ void gnnd_merge(const __grid_constant__ GnndMergeArgs a) {
    float* __restrict__ list_d = a.list_d;
    u32* __restrict__ list_i = a.list_i;
    const float* __restrict__ inbox_d = a.inbox_d;
    const u32* __restrict__ inbox_i = a.inbox_i;
    u32* __restrict__ inbox_cnt = a.inbox_cnt;
    unsigned long long* __restrict__ updates = a.updates;
    const u32 n = a.n, k = a.k, M = a.M;
    extern __shared__ float4 merge_smem[];
    const u32 lane = threadIdx.x & 31u;
    const u32 w = threadIdx.x / 32;
    const u32 s = blockIdx.x * (blockDim.x / 32) + w;
    if (s >= n) return;
    float* sd = reinterpret_cast<float*>(merge_smem) + (u64)w * 2 * k;
    u32* si = reinterpret_cast<u32*>(sd + k);
    const u32 cnt = min(inbox_cnt[s], M);
    if (cnt == 0) return;
    for (u32 j = lane; j < k; j += 32) {
        sd[j] = list_d[(u64)s * k + j];
        si[j] = list_i[(u64)s * k + j];
    }
    __syncwarp();
    u32 inserted = 0;
    for (u32 c = 0; c < cnt; ++c) {
        const float d = inbox_d[(u64)s * M + c];
        const u32 v = inbox_i[(u64)s * M + c];
        if (v == s || !pair_less(d, v, sd[k - 1], raw_id(si[k - 1]))) continue;
        bool dup = false;
        u32 lt = 0;
        for (u32 j = lane; j < k; j += 32) {
            const u32 id = raw_id(si[j]);
            dup |= id == v;
            lt += pair_less(sd[j], id, d, v) ? 1u : 0u;
        }
        if (__any_sync(0xffffffffu, dup)) continue;
#pragma unroll
        for (u32 o = 16; o > 0; o >>= 1) lt += __shfl_xor_sync(0xffffffffu, lt, o);
        // Shift [lt, k - 1) to [lt + 1, k), from the top down in chunks of 32.
        for (int hi = (int)k - 1; hi > (int)lt; hi -= 32) {
            const int j = hi - (int)lane;
            float dv = 0.0f;
            u32 iv = 0;
            const bool act = j > (int)lt;
            if (act) {
                dv = sd[j - 1];
                iv = si[j - 1];
            }
            __syncwarp();
            if (act) {
                sd[j] = dv;
                si[j] = iv;
            }
            __syncwarp();
        }
        if (lane == 0) {
            sd[lt] = d;
            si[lt] = v | NEW_FLAG;
        }
        __syncwarp();
        ++inserted;
    }
    for (u32 j = lane; j < k; j += 32) {
        list_d[(u64)s * k + j] = sd[j];
        list_i[(u64)s * k + j] = si[j];
    }
    if (lane == 0) {
        inbox_cnt[s] = 0;
        if (inserted > 0) atomicAdd(updates, (unsigned long long)inserted);
    }
}

// Clears the NEW flags (the finished graph): ids &= ID_MASK except INVALID padding.
extern "C" __global__ void gnnd_finish(const __grid_constant__ GnndFinishArgs a) {
    u32* __restrict__ list_i = a.list_i;
    const u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < a.len) list_i[i] = raw_id(list_i[i]);
}

#define WEFT_GNND_INSTANTIATE(T, NAME)                                                             \
    extern "C" __global__ void gnnd_init_##NAME(const __grid_constant__ GnndInitArgs a) {          \
        gnnd::init<T>(as_elements<T>(a.data), a.n, a.stride, a.metric, a.k, a.seed, a.list_d,      \
                      a.list_i, a.inbox_d, a.inbox_i, a.inbox_cnt, a.M);                           \
    }                                                                                              \
    extern "C" __global__ void gnnd_cross_init_##NAME(                                             \
        const __grid_constant__ GnndCrossInitArgs a) {                                             \
        gnnd::cross_init<T>(as_elements<T>(a.a), as_elements<T>(a.b), a.split, a.n, a.stride,      \
                            a.metric, a.half, a.seed, a.inbox_d, a.inbox_i, a.inbox_cnt, a.M);     \
    }                                                                                              \
    extern "C" __global__ void __launch_bounds__(gnnd::JOIN_THREADS) gnnd_join_l2_##NAME(          \
        const __grid_constant__ GnndJoinArgs a) {                                                  \
        gnnd::join_kernel<T, gnnd::JOIN_L2>(a);                                                    \
    }                                                                                              \
    extern "C" __global__ void __launch_bounds__(gnnd::JOIN_THREADS) gnnd_join_ip_##NAME(          \
        const __grid_constant__ GnndJoinArgs a) {                                                  \
        gnnd::join_kernel<T, gnnd::JOIN_IP>(a);                                                    \
    }                                                                                              \
    extern "C" __global__ void __launch_bounds__(gnnd::JOIN_THREADS) gnnd_join_cos_##NAME(         \
        const __grid_constant__ GnndJoinArgs a) {                                                  \
        gnnd::join_kernel<T, gnnd::JOIN_COS>(a);                                                   \
    }

WEFT_GNND_INSTANTIATE(float, f32)
WEFT_GNND_INSTANTIATE(f16_t, f16)
WEFT_GNND_INSTANTIATE(u8, u8)
WEFT_GNND_INSTANTIATE(i8, i8)
