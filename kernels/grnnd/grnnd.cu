// grnnd/grnnd.cu: GRNND (Li, Li, Chang & Miyazaki 2025), RNN-Descent on the GPU, with the
// corrections of the digest (shared/algorithms/rnndescent-grnnd.md §3.9) and the choices of
// docs/grnnd.md.
//
// Pools: two buffers of n x R packed entries, pool[v * R + s]; an entry is
//   ordered(distance) << 32 | NEW << 31 | id
// so that the unsigned order of entries is the (distance, flag, id) order and one 64-bit
// compare-and-swap replaces an entry. EMPTY = ~0 is larger than every entry. A counter per pool
// row counts slot reservations (atomicAdd); a row's valid slots are the first min(count, R).
//
// Kernels (one warp per vertex unless said otherwise; each takes its struct of args.cuh):
//   grnnd_init_<dt>      S distinct random neighbours (affine walk), written NEW
//   grnnd_update_<dt>    one UPDATE_NEIGHBORS_PARALLEL round: read pool A, write pool B; during
//                        the last outer iteration also keep each vertex's closest pruned entries
//   grnnd_reverse        reverse-edge sampling: copy pool A into B, plus ceil(rho k) reverse edges
//   grnnd_finalize       sorted, de-duplicated rows cut to the output degree, short rows filled
//                        from the pruned entries
//   grnnd_insert_test    one insertion per warp (oracle tests of the insertion)
//   grnnd_colsum_<dt>, grnnd_nearest_<dt>   the entry point: the vertex nearest to the mean
//   grnnd_bfs_step       one level of a breadth-first search over the output graph (thread per edge)
//   grnnd_fill_u32, grnnd_fill_u64          grid-stride fills
#include "weft/distance.cuh"
#include "weft/rng.cuh"
#include "weft/types.cuh"
#include "args.cuh"

namespace weft {
namespace grnnd {

constexpr u64 EMPTY = ~0ull;
constexpr u64 NEW_BIT = 0x80000000ull;
constexpr u32 ID_MASK = 0x7fffffffu;
constexpr u32 FULL = 0xffffffffu;
// Warps per block of the warp-per-vertex kernels (the host's WARPS).
constexpr u32 WARPS = 4;

// Update modes: bit 0 strict pruning, bit 1 new/old flags, bits 2-3 the pair order.
constexpr u32 MODE_STRICT = 1u;
constexpr u32 MODE_NEW_OLD = 2u;
constexpr u32 ORDER_RANDOM = 0u;
constexpr u32 ORDER_ASC = 1u;
constexpr u32 ORDER_DESC = 2u;

__device__ __forceinline__ u64 pack(float d, bool is_new, u32 id) {
    return ((u64)ordered(d + 0.0f) << 32) | (is_new ? NEW_BIT : 0ull) | (u64)id;
}
__device__ __forceinline__ u32 id_of(u64 e) { return (u32)e & ID_MASK; }
__device__ __forceinline__ float dist_of(u64 e) { return from_ordered((u32)(e >> 32)); }
__device__ __forceinline__ bool is_new(u64 e) { return (e & NEW_BIT) != 0; }

__device__ __forceinline__ u64 load_volatile(const u64* p) { return *(const volatile u64*)p; }

// Every lane gets the largest `best` over the warp's (best, bi) pairs, ties to the lowest `bi`.
// Whole warp. (pool_insert keeps its own copy of this loop: calling this there cost its
// kernels two registers.)
__device__ __forceinline__ void warp_argmax(u64& best, u32& bi) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        const u64 ob = __shfl_xor_sync(FULL, best, o);
        const u32 oi = __shfl_xor_sync(FULL, bi, o);
        if (ob > best || (ob == best && oi < bi)) {
            best = ob;
            bi = oi;
        }
    }
}

// Inserts `e` into `owner`'s row of pool (P, C) of capacity R; the whole warp calls it with the
// same arguments. The digest's corrected WARP_INSERT: ballot de-duplication by id, a slot
// reserved with atomicAdd and filled by CAS from EMPTY while the row has room, else the row's
// largest entry replaced by CAS when `e` is smaller (retried until `e` is no longer smaller or
// the CAS succeeds: every failed CAS means another warp made the row smaller, so this ends).
// With distinct ids the row ends up holding exactly the R smallest entries offered; two warps
// inserting the same id at the same time can both pass the de-duplication (rows are
// de-duplicated when read). Returns whether `e` went in.
__device__ bool pool_insert(u64* P, u32* C, u32 R, u32 owner, u64 e) {
    const u32 lane = threadIdx.x & 31u;
    const u32 id = id_of(e);
    if (id == owner) return false;
    u64* row = P + (u64)owner * R;
    for (u32 base = 0; base < R; base += 32) {
        const u32 i = base + lane;
        bool hit = false;
        if (i < R) {
            const u64 x = load_volatile(row + i);
            hit = x != EMPTY && id_of(x) == id;
        }
        if (__ballot_sync(FULL, hit)) return false;
    }
    u32 slot = 0;
    if (lane == 0) slot = atomicAdd(&C[owner], 1u);
    slot = __shfl_sync(FULL, slot, 0);
    if (slot < R) {
        u64 old = 0;
        if (lane == 0) old = atomicCAS((unsigned long long*)(row + slot), EMPTY, e);
        old = __shfl_sync(FULL, old, 0);
        if (old == EMPTY) return true;
    }
    for (;;) {
        u64 best = 0;
        u32 bi = 0;
        for (u32 i = lane; i < R; i += 32) {
            const u64 x = load_volatile(row + i);
            if (x > best || (x == best && i < bi)) {
                best = x;
                bi = i;
            }
        }
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) {
            const u64 ob = __shfl_xor_sync(FULL, best, o);
            const u32 oi = __shfl_xor_sync(FULL, bi, o);
            if (ob > best || (ob == best && oi < bi)) {
                best = ob;
                bi = oi;
            }
        }
        if (e >= best) return false;
        u64 old = 0;
        if (lane == 0) old = atomicCAS((unsigned long long*)(row + bi), best, e);
        old = __shfl_sync(FULL, old, 0);
        if (old == best) return true;
    }
}

// Keeps `x` (an entry of v's row that v's update pruned, flag cleared) among the `L` smallest
// distinct-id entries of `row`, v's pruned buffer of L slots (EMPTY when free, unsorted): an id
// already there keeps the smaller of its two entries; else `x` replaces the buffer's largest
// entry (EMPTY first) when it is smaller. Only v's warp writes v's buffer (one warp per vertex,
// one round per launch), so plain stores suffice; __syncwarp orders them for the next call.
// Whole warp, the same arguments.
__device__ void pruned_insert(u64* row, u32 L, u64 x) {
    const u32 lane = threadIdx.x & 31u;
    const u32 id = id_of(x);
    bool hit = false;
    u64 best = 0;
    u32 bi = 0;
    for (u32 i = lane; i < L; i += 32) {
        const u64 y = row[i];
        if (y != EMPTY && id_of(y) == id) {
            hit = true;
            if (x < y) row[i] = x;
        }
        if (y > best || (y == best && i < bi)) {
            best = y;
            bi = i;
        }
    }
    if (__any_sync(FULL, hit)) {
        __syncwarp();
        return;
    }
    warp_argmax(best, bi);
    if (lane == 0 && x < best) row[bi] = x;
    __syncwarp();
}

// Loads v's pool row (the first min(C[v], R) slots; EMPTY skipped) into e[], merging repeated
// ids into their first copy (NEW if any copy is NEW, the smallest distance), compacted in slot
// order; `scratch` holds R entries. Returns the entry count. Whole warp.
__device__ u32 load_row(const u64* P, const u32* C, u32 R, u32 v, u64* e, u64* scratch) {
    const u32 lane = threadIdx.x & 31u;
    const u32 cnt = min(C[v], R);
    for (u32 i = lane; i < cnt; i += 32) scratch[i] = P[(u64)v * R + i];
    __syncwarp();
    u32 k = 0;
    for (u32 base = 0; base < cnt; base += 32) {
        const u32 i = base + lane;
        u64 x = EMPTY;
        bool keep = false;
        if (i < cnt) {
            x = scratch[i];
            keep = x != EMPTY;
            if (keep) {
                const u32 id = id_of(x);
                for (u32 j = 0; j < cnt; ++j) {
                    const u64 y = scratch[j];
                    if (j == i || y == EMPTY || id_of(y) != id) continue;
                    if (j < i) {
                        keep = false;
                        break;
                    }
                    const u64 flag = (x | y) & NEW_BIT;
                    if ((y >> 32) < (x >> 32)) x = y;
                    x = (x & ~NEW_BIT) | flag;
                }
            }
        }
        const u32 ball = __ballot_sync(FULL, keep);
        if (keep) e[k + __popc(ball & ((1u << lane) - 1u))] = x;
        k += __popc(ball);
    }
    __syncwarp();
    return k;
}

// perm[r] = the index of the entry of rank r by (key[i], i), for k keys. Whole warp.
__device__ void rank_sort(const u64* key, u32 k, u32* perm) {
    const u32 lane = threadIdx.x & 31u;
    for (u32 i = lane; i < k; i += 32) {
        const u64 ki = key[i];
        u32 r = 0;
        for (u32 j = 0; j < k; ++j) {
            const u64 kj = key[j];
            r += (kj < ki || (kj == ki && j < i)) ? 1u : 0u;
        }
        perm[r] = i;
    }
    __syncwarp();
}

// Random start: min(S, n - 1) distinct ids != v (v + 1 + ((o + j g) mod (n - 1)), g coprime to
// n - 1), with their distances, NEW, in slots 0.. of v's row; the row must be EMPTY-filled.
template <typename T>
__device__ void init(const T* data, u32 n, u32 stride, i32 metric, u32 S, u64 seed, u64* P, u32* C,
                     u32 R) {
    const u32 lane = threadIdx.x & 31u;
    const u32 v = blockIdx.x * WARPS + threadIdx.x / 32;
    if (v >= n) return;
    const u32 m = n - 1;
    const u32 want = min(S, m);
    const u64 h = hash3(seed, 0x67726e6e64696eull, v);
    const AffineWalk walk(h, m);
    const T* a = data + (u64)v * stride;
    for (u32 j = 0; j < want; ++j) {
        const u32 u = (v + 1 + walk.at(j)) % n;
        const float d = warp_distance<T>(a, data + (u64)u * stride, stride, metric);
        if (lane == 0) P[(u64)v * R + j] = pack(d, true, u);
    }
    if (lane == 0) C[v] = want;
}

// One round of UPDATE_NEIGHBORS_PARALLEL for vertex v (digest §3.9): v's row of pool A, merged
// and de-duplicated, is visited pair by pair in the order of the mode (random permutation seeded
// by (seed, round, v), ascending or descending distance): for each position a and each earlier
// position b < a, the pair (perm[a], perm[b]), both alive (and, with new/old flags, not both OLD), is pruned
// when d(i, j) < max(d(v, i), d(v, j)) (<= when not strict): the farther one (the earlier in the
// order on a tie) is sent to the closer one's row of pool B as a NEW candidate at distance
// d(i, j) and dies. Survivors go to v's row of pool B, OLD (unless max_pairs stopped the round
// early: then they keep their flags). counters[0] += pairs evaluated, counters[1] += redirects.
// With fill_len > 0 (the last outer iteration of a build that fills rows), every entry that died
// in v's row is then offered to v's row of `pruned` (n x fill_len; pruned_insert: it keeps the
// fill_len closest distinct ids pruned from v's row so far, at their distance from v).
template <typename T>
__device__ void update(const T* data, u32 n, u32 stride, i32 metric, const u64* Pa, const u32* Ca,
                       u64* Pb, u32* Cb, u32 R, u32 mode, u32 max_pairs, u64 seed, u32 round,
                       unsigned long long* counters, u64* pruned, u32 fill_len) {
    extern __shared__ u64 smem[];
    const u32 lane = threadIdx.x & 31u;
    const u32 w = threadIdx.x / 32;
    const u32 v = blockIdx.x * WARPS + w;
    u64* e = smem + (u64)w * 2 * R;
    u64* okey = e + R;
    u32* perm = reinterpret_cast<u32*>(smem + (u64)WARPS * 2 * R) + (u64)w * R;
    if (v >= n) return;
    const u32 k = load_row(Pa, Ca, R, v, e, okey);
    const u32 order = (mode >> 2) & 3u;
    const u64 h = hash3(seed, 0x7570646174650000ull | round, v);
    for (u32 i = lane; i < k; i += 32) {
        const u64 x = e[i] & ~NEW_BIT;
        okey[i] = order == ORDER_ASC ? x : order == ORDER_DESC ? ~x : mix64(h ^ (u64)id_of(x));
    }
    __syncwarp();
    rank_sort(okey, k, perm);
    // The order keys are no longer needed: okey keeps the row, so that what dies can be recorded
    // after the pair loop (not inside it, where it would cost registers).
    if (fill_len != 0) {
        for (u32 i = lane; i < k; i += 32) okey[i] = e[i] & ~NEW_BIT;
        __syncwarp();
    }
    const bool strict = (mode & MODE_STRICT) != 0;
    const bool new_old = (mode & MODE_NEW_OLD) != 0;
    u32 pairs = 0, redirects = 0;
    bool capped = false;
    for (u32 a = 1; a < k && !capped; ++a) {
        const u32 i = perm[a];
        const u64 ei = e[i];
        if (ei == EMPTY) continue;
        const T* xi = data + (u64)id_of(ei) * stride;
        const float di = dist_of(ei);
        for (u32 b = 0; b < a; ++b) {
            const u32 j = perm[b];
            const u64 ej = e[j];
            if (ej == EMPTY) continue;
            if (new_old && !is_new(ei) && !is_new(ej)) continue;
            if (max_pairs != 0 && pairs >= max_pairs) {
                capped = true;
                break;
            }
            ++pairs;
            const float dij = warp_distance<T>(xi, data + (u64)id_of(ej) * stride, stride, metric);
            const float dj = dist_of(ej);
            const float far = fmaxf(di, dj);
            const bool prune = strict ? dij < far : dij <= far;
            if (!prune) continue;
            // The closer one keeps its edge; on a tie the earlier in the order (j) does.
            const bool i_closer = di < dj;
            const u32 c = i_closer ? j : i;  // index of the farther one
            const u32 keep = i_closer ? i : j;
            pool_insert(Pb, Cb, R, id_of(e[keep]), pack(dij, true, id_of(e[c])));
            ++redirects;
            __syncwarp();
            if (lane == 0) e[c] = EMPTY;
            __syncwarp();
            if (c == i) break;
        }
    }
    for (u32 s = 0; s < k; ++s) {
        u64 x = e[s];
        if (x == EMPTY) continue;
        if (!capped) x &= ~NEW_BIT;
        pool_insert(Pb, Cb, R, v, x);
    }
    if (fill_len != 0) {
        for (u32 s = 0; s < k; ++s)
            if (e[s] == EMPTY) pruned_insert(pruned + (u64)v * fill_len, fill_len, okey[s]);
    }
    if (lane == 0) {
        atomicAdd(&counters[0], (unsigned long long)pairs);
        atomicAdd(&counters[1], (unsigned long long)redirects);
    }
}

// Reverse-edge sampling, double-buffered: v's row of pool A is copied into pool B (flags kept)
// and, for m = ceil(rho k) of its k entries (the closest when `closest`, else the first in pool
// order), the reverse edge id -> v is offered to id's row of pool B, NEW, at the same distance.
__device__ void reverse(const u64* Pa, const u32* Ca, u64* Pb, u32* Cb, u32 n, u32 R, float rho,
                        u32 closest) {
    extern __shared__ u64 smem[];
    const u32 lane = threadIdx.x & 31u;
    const u32 w = threadIdx.x / 32;
    const u32 v = blockIdx.x * WARPS + w;
    u64* e = smem + (u64)w * 2 * R;
    u64* okey = e + R;
    u32* perm = reinterpret_cast<u32*>(smem + (u64)WARPS * 2 * R) + (u64)w * R;
    if (v >= n) return;
    const u32 k = load_row(Pa, Ca, R, v, e, okey);
    for (u32 s = 0; s < k; ++s) pool_insert(Pb, Cb, R, v, e[s]);
    u32 m = (u32)ceilf(rho * (float)k);
    m = min(m, k);
    if (closest) {
        for (u32 i = lane; i < k; i += 32) okey[i] = e[i] & ~NEW_BIT;
        __syncwarp();
        rank_sort(okey, k, perm);
    } else {
        for (u32 i = lane; i < k; i += 32) perm[i] = i;
        __syncwarp();
    }
    for (u32 t = 0; t < m; ++t) {
        const u64 x = e[perm[t]];
        pool_insert(Pb, Cb, R, id_of(x), (x & 0xffffffff00000000ull) | NEW_BIT | (u64)v);
    }
}

// The output graph: v's row, de-duplicated, ascending by (distance, id), cut to `degree` ids and
// padded with INVALID; counts[v] = entries before the cut. With fill_len > 0 (<= degree, <= R), a
// row of kept < fill_len entries is filled up to fill_len from v's row of `pruned` (n x fill_len
// packed entries, EMPTY when free, any order): its entries in (distance, id) order, skipping
// EMPTY, v itself, ids the row holds and all but the smallest entry of a repeated id; the kept
// entries stay, the filled row is ascending by (distance, id) and *filled += entries added.
__device__ void finalize(const u64* P, const u32* C, u32 n, u32 R, u32 degree, const u64* pruned,
                         u32 fill_len, u32* out, u32* counts, unsigned long long* filled) {
    extern __shared__ u64 smem[];
    const u32 lane = threadIdx.x & 31u;
    const u32 w = threadIdx.x / 32;
    const u32 v = blockIdx.x * WARPS + w;
    u64* e = smem + (u64)w * 2 * R;
    u64* okey = e + R;
    u32* perm = reinterpret_cast<u32*>(smem + (u64)WARPS * 2 * R) + (u64)w * R;
    if (v >= n) return;
    const u32 k = load_row(P, C, R, v, e, okey);
    for (u32 i = lane; i < k; i += 32) okey[i] = e[i] & ~NEW_BIT;
    __syncwarp();
    rank_sort(okey, k, perm);
    if (lane == 0) counts[v] = k;
    const u32 kept = min(k, degree);
    if (kept >= fill_len) {
        for (u32 t = lane; t < degree; t += 32)
            out[(u64)v * degree + t] = t < k ? id_of(e[perm[t]]) : INVALID;
        return;
    }
    // The kept entries, ascending, into okey[0, kept); then the pruned buffer into e[0, L).
    for (u32 t = lane; t < kept; t += 32) okey[t] = e[perm[t]] & ~NEW_BIT;
    __syncwarp();
    const u32 L = fill_len;
    for (u32 i = lane; i < L; i += 32) {
        const u64 x = pruned[(u64)v * L + i];
        e[i] = x == EMPTY ? EMPTY : x & ~NEW_BIT;
    }
    __syncwarp();
    // perm[i] = whether e[i] may fill the row (read-only pass), then the others become EMPTY.
    for (u32 i = lane; i < L; i += 32) {
        const u64 x = e[i];
        const u32 id = id_of(x);
        bool ok = x != EMPTY && id != v;
        for (u32 t = 0; ok && t < kept; ++t) ok = id_of(okey[t]) != id;
        for (u32 j = 0; ok && j < L; ++j) {
            const u64 y = e[j];
            ok = j == i || y == EMPTY || id_of(y) != id || y > x || (y == x && j > i);
        }
        perm[i] = ok;
    }
    __syncwarp();
    for (u32 i = lane; i < L; i += 32)
        if (!perm[i]) e[i] = EMPTY;
    __syncwarp();
    // Candidates ascending (EMPTY last), the closest fill_len - kept appended to the row.
    rank_sort(e, L, perm);
    u32 m = 0;
    for (u32 base = 0; base < L; base += 32) {
        const u32 i = base + lane;
        m += __popc(__ballot_sync(FULL, i < L && e[i] != EMPTY));
    }
    m = min(m, fill_len - kept);
    for (u32 t = lane; t < m; t += 32) okey[kept + t] = e[perm[t]];
    __syncwarp();
    const u32 len = kept + m;
    rank_sort(okey, len, perm);
    for (u32 t = lane; t < degree; t += 32)
        out[(u64)v * degree + t] = t < len ? id_of(okey[perm[t]]) : INVALID;
    if (lane == 0 && m != 0) atomicAdd(filled, (unsigned long long)m);
}

// Element -> f32 for the column sums.
__device__ __forceinline__ float to_f32(float x) { return x; }
__device__ __forceinline__ float to_f32(f16_t x) { return f16_to_f32(x.bits); }
__device__ __forceinline__ float to_f32(u8 x) { return (float)x; }
__device__ __forceinline__ float to_f32(i8 x) { return (float)x; }

// Rows per block of grnnd_colsum.
constexpr u32 COLSUM_ROWS = 1024;

// sums[c] += the sum of column c over this block's rows (threads stride the columns).
template <typename T>
__device__ void colsum(const T* data, u32 n, u32 stride, u32 dim, float* sums) {
    const u32 r0 = blockIdx.x * COLSUM_ROWS;
    const u32 r1 = min(n, r0 + COLSUM_ROWS);
    for (u32 c = threadIdx.x; c < dim; c += blockDim.x) {
        float s = 0.0f;
        for (u32 r = r0; r < r1; ++r) s += to_f32(data[(u64)r * stride + c]);
        atomicAdd(&sums[c], s);
    }
}

// best = min over rows of ordered(|x_r - mean|^2) << 32 | r (mean = sums / n): one warp per row.
template <typename T>
__device__ void nearest(const T* data, u32 n, u32 stride, u32 dim, const float* sums,
                        unsigned long long* best) {
    const u32 lane = threadIdx.x & 31u;
    const u32 r = blockIdx.x * WARPS + threadIdx.x / 32;
    if (r >= n) return;
    const float inv = 1.0f / (float)n;
    float s = 0.0f;
    for (u32 c = lane; c < dim; c += 32) {
        const float d = to_f32(data[(u64)r * stride + c]) - sums[c] * inv;
        s = fmaf(d, d, s);
    }
    s = warp_sum(s);
    if (lane == 0) atomicMin(best, ((u64)ordered(s + 0.0f) << 32) | (u64)r);
}

}  // namespace grnnd
}  // namespace weft

using namespace weft;

extern "C" __global__ void grnnd_fill_u64(const __grid_constant__ GrnndFillU64Args a) {
    for (u64 i = blockIdx.x * (u64)blockDim.x + threadIdx.x; i < a.len; i += (u64)gridDim.x * blockDim.x)
        a.p[i] = a.value;
}

extern "C" __global__ void grnnd_fill_u32(const __grid_constant__ GrnndFillU32Args a) {
    for (u64 i = blockIdx.x * (u64)blockDim.x + threadIdx.x; i < a.len; i += (u64)gridDim.x * blockDim.x)
        a.p[i] = a.value;
}

extern "C" __global__ void grnnd_reverse(const __grid_constant__ GrnndReverseArgs a) {
    grnnd::reverse(a.Pa, a.Ca, a.Pb, a.Cb, a.n, a.R, a.rho, a.closest);
}

extern "C" __global__ void grnnd_finalize(const __grid_constant__ GrnndFinalizeArgs a) {
    grnnd::finalize(a.P, a.C, a.n, a.R, a.degree, a.pruned, a.fill_len, a.out, a.counts, a.filled);
}

// Warp w inserts entries[w] into row owners[w] (oracle tests of pool_insert).
extern "C" __global__ void grnnd_insert_test(const __grid_constant__ GrnndInsertTestArgs a) {
    const u32 w = blockIdx.x * grnnd::WARPS + threadIdx.x / 32;
    if (w >= a.m) return;
    grnnd::pool_insert(a.P, a.C, a.R, a.owners[w], a.entries[w]);
}

// One BFS level: every edge u -> w of the graph with level[u] == cur and w unvisited gets
// level[w] = cur + 1 (all writers write the same value) and sets *changed.
extern "C" __global__ void grnnd_bfs_step(const __grid_constant__ GrnndBfsStepArgs a) {
    const u64 len = (u64)a.n * a.degree;
    for (u64 i = blockIdx.x * (u64)blockDim.x + threadIdx.x; i < len; i += (u64)gridDim.x * blockDim.x) {
        const u32 u = (u32)(i / a.degree);
        if (a.level[u] != a.cur) continue;
        const u32 w = a.g[i];
        if (w < a.n && a.level[w] == INVALID) {
            a.level[w] = a.cur + 1;
            *a.changed = 1;
        }
    }
}

#define WEFT_GRNND_INSTANTIATE(T, NAME)                                                            \
    extern "C" __global__ void grnnd_init_##NAME(const __grid_constant__ GrnndInitArgs a) {       \
        grnnd::init<T>(as_elements<T>(a.data), a.n, a.stride, a.metric, a.S, a.seed, a.P, a.C,   \
                       a.R);                                                                     \
    }                                                                                            \
    extern "C" __global__ void grnnd_update_##NAME(const __grid_constant__ GrnndUpdateArgs a) {   \
        grnnd::update<T>(as_elements<T>(a.data), a.n, a.stride, a.metric, a.Pa, a.Ca, a.Pb,      \
                         a.Cb, a.R, a.mode, a.max_pairs, a.seed, a.round, a.counters, a.pruned,  \
                         a.fill_len);                                                            \
    }                                                                                            \
    extern "C" __global__ void grnnd_colsum_##NAME(const __grid_constant__ GrnndColsumArgs a) {   \
        grnnd::colsum<T>(as_elements<T>(a.data), a.n, a.stride, a.dim, a.sums);                  \
    }                                                                                            \
    extern "C" __global__ void grnnd_nearest_##NAME(const __grid_constant__ GrnndNearestArgs a) { \
        grnnd::nearest<T>(as_elements<T>(a.data), a.n, a.stride, a.dim, a.sums, a.best);         \
    }

WEFT_GRNND_INSTANTIATE(float, f32)
WEFT_GRNND_INSTANTIATE(f16_t, f16)
WEFT_GRNND_INSTANTIATE(u8, u8)
WEFT_GRNND_INSTANTIATE(i8, i8)
