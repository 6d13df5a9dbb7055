// cagra/cagra.cu: CAGRA graph optimisation (crates/weft-cagra/src/gpu/optimizer.rs drives
// it). The output equals the CPU optimiser's (crates/weft-cagra/src/cpu.rs) bit for bit: every
// step below is independent of the order in which threads run.
//
//   1. cagra_prune: one block per node A. A's k-NN row goes into a shared-memory hash table
//      (id -> rank); every entry B of the rows of A's first m-1 neighbours D (rank j) is looked
//      up once, and a hit at rank r > j adds one detour to r (shared atomics: order-free). The
//      block then writes the min(m, degree) entries with the fewest detours, ordered by
//      (detours, rank), padding after. Also validates the row (ids in range, no self-loop, no
//      duplicate, padding only at the end) and raises *error on a bad one.
//   2. cagra_rev_count: in-degree of every node in the pruned graph.
//   3. cagra_scan_blocks / cagra_scan_sums / cagra_scan_add: exclusive prefix sum of the
//      in-degrees (n + 1 offsets; offsets[n] = edges).
//   4. cagra_rev_scatter: every edge s -> v at column c lands in v's segment as the key
//      (c << 32 | s) (position within the segment by atomics: unordered).
//   5. cagra_rev_select: one warp per node: the rank of each key in its segment (keys are
//      distinct), so the first `degree` keys by (c, s) are written in order: the capped reverse
//      row, independent of the scatter order.
//   6. cagra_merge: one warp per node: the protected first min(degree/2, m) pruned edges, the
//      reverse edges not among them, the other pruned edges that are not reverse edges;
//      truncated to `degree`, padded.
#include "weft/types.cuh"
#include "args.cuh"

namespace weft {
namespace cagra {

constexpr u32 SCAN_THREADS = 1024;
constexpr u32 SCAN_ITEMS = 4;  // per thread
constexpr u32 SCAN_TILE = SCAN_THREADS * SCAN_ITEMS;

__device__ __forceinline__ u32 slot_of(u32 id, u32 bits) { return (id * 0x9E3779B1u) >> (32u - bits); }

// Rank of `id` in the table, or INVALID.
__device__ __forceinline__ u32 lookup(const u32* keys, const u32* ranks, u32 bits, u32 id) {
    const u32 mask = (1u << bits) - 1u;
    u32 s = slot_of(id, bits);
    while (true) {
        const u32 k = keys[s];
        if (k == id) return ranks[s];
        if (k == INVALID) return INVALID;
        s = (s + 1u) & mask;
    }
}

// Inclusive scan of `v` over the warp.
__device__ __forceinline__ u32 warp_inclusive(u32 v) {
    const u32 lane = threadIdx.x & 31u;
#pragma unroll
    for (u32 o = 1; o < 32; o <<= 1) {
        const u32 t = __shfl_up_sync(0xffffffffu, v, o);
        if (lane >= o) v += t;
    }
    return v;
}

// Exclusive scan of one value per thread over a block of SCAN_THREADS; returns the prefix and
// writes the block total to *total. `warp_sums` has 32 entries.
__device__ __forceinline__ u32 block_exclusive(u32 v, u32* warp_sums, u32* total) {
    const u32 lane = threadIdx.x & 31u;
    const u32 warp = threadIdx.x >> 5;
    const u32 inc = warp_inclusive(v);
    if (lane == 31u) warp_sums[warp] = inc;
    __syncthreads();
    if (warp == 0) {
        const u32 w = warp_sums[lane];
        const u32 wi = warp_inclusive(w);
        warp_sums[lane] = wi - w;
        if (lane == 31u) *total = wi;
    }
    __syncthreads();
    return warp_sums[warp] + inc - v;
}

}  // namespace cagra
}  // namespace weft

using namespace weft;
using namespace weft::cagra;

// Each kernel takes its argument struct (args.cuh) and copies the pointers into __restrict__
// locals. Where those alone do not let the compiler read through the read-only data cache, as
// the __restrict__ parameters before them did (the k-NN rows of cagra_prune, cagra_rev_select,
// cagra_merge), the loads of data that no thread writes use __ldg.

// Dynamic shared memory: keys[1 << bits], ranks[1 << bits], row[k], cnt[k] (u32 each).
// With write_detours != 0, detours (n * k) receives the counts (tests read them back).
extern "C" __global__ void cagra_prune(const __grid_constant__ CagraPruneArgs a) {
    const u32* __restrict__ knn = a.knn;
    u32* __restrict__ pruned = a.pruned;
    u32* __restrict__ detours = a.detours;
    u32* __restrict__ error = a.error;
    const u32 n = a.n, k = a.k, degree = a.degree, bits = a.bits;
    extern __shared__ u32 smem[];
    __shared__ u32 s_m;
    __shared__ u32 s_err;
    const u32 size = 1u << bits;
    u32* keys = smem;
    u32* ranks = keys + size;
    u32* row = ranks + size;
    u32* cnt = row + k;
    const u32 node = blockIdx.x;
    const u32 tid = threadIdx.x;
    const u32 bd = blockDim.x;
    if (tid == 0) {
        s_m = k;
        s_err = 0;
    }
    for (u32 i = tid; i < size; i += bd) keys[i] = INVALID;
    __syncthreads();
    const u32* arow = knn + (u64)node * k;
    for (u32 t = tid; t < k; t += bd) {
        const u32 x = __ldg(&arow[t]);
        row[t] = x;
        cnt[t] = 0;
        if (x == INVALID) atomicMin(&s_m, t);
    }
    __syncthreads();
    const u32 m = s_m;
    const u32 mask = size - 1u;
    for (u32 t = tid; t < k; t += bd) {
        const u32 x = row[t];
        if (t >= m) {
            if (x != INVALID) atomicOr(&s_err, 1u);
            continue;
        }
        if (x >= n || x == node) {
            atomicOr(&s_err, 1u);
            continue;
        }
        u32 s = slot_of(x, bits);
        while (true) {
            const u32 prev = atomicCAS(&keys[s], INVALID, x);
            if (prev == INVALID) {
                ranks[s] = t;
                break;
            }
            if (prev == x) {
                atomicOr(&s_err, 1u);
                break;
            }
            s = (s + 1u) & mask;
        }
    }
    __syncthreads();
    if (s_err != 0) {
        if (tid == 0) atomicOr(error, 1u);
        return;
    }
    const u32 total = (m > 0 ? m - 1 : 0) * k;
    for (u32 idx = tid; idx < total; idx += bd) {
        const u32 j = idx / k;
        const u32 t = idx - j * k;
        const u32 b = __ldg(&knn[(u64)row[j] * k + t]);
        if (b >= n) continue;  // padding (a bad row is reported by its own block)
        const u32 r = lookup(keys, ranks, bits, b);
        if (r != INVALID && r > j) atomicAdd(&cnt[r], 1u);
    }
    __syncthreads();
    u32* prow = pruned + (u64)node * degree;
    for (u32 t = tid; t < m; t += bd) {
        const u64 key = ((u64)cnt[t] << 32) | t;
        u32 pos = 0;
        for (u32 s = 0; s < m; ++s) pos += (((u64)cnt[s] << 32) | s) < key ? 1u : 0u;
        if (pos < degree) prow[pos] = row[t];
    }
    for (u32 t = m + tid; t < degree; t += bd) prow[t] = INVALID;
    if (a.write_detours != 0) {
        for (u32 t = tid; t < k; t += bd) detours[(u64)node * k + t] = t < m ? cnt[t] : 0u;
    }
}

// indeg[v] += 1 for every edge s -> v of the pruned graph.
extern "C" __global__ void cagra_rev_count(const __grid_constant__ CagraRevCountArgs a) {
    const u32* __restrict__ pruned = a.pruned;
    u32* __restrict__ indeg = a.indeg;
    for (u64 e = (u64)blockIdx.x * blockDim.x + threadIdx.x; e < a.edges;
         e += (u64)gridDim.x * blockDim.x) {
        const u32 v = pruned[e];
        if (v != INVALID) atomicAdd(&indeg[v], 1u);
    }
}

// Per tile of SCAN_TILE entries: the exclusive prefix within the tile into `out`, the tile
// total into sums[blockIdx.x]. Entry i of the scanned sequence is in[i] for i < n and 0 for
// n <= i < len (len = n + 1, so that out[n] = the total).
extern "C" __global__ void cagra_scan_blocks(const __grid_constant__ CagraScanBlocksArgs a) {
    const u32* __restrict__ in = a.in;
    u32* __restrict__ out = a.out;
    u32* __restrict__ sums = a.sums;
    __shared__ u32 warp_sums[32];
    __shared__ u32 total;
    const u64 base = (u64)blockIdx.x * SCAN_TILE + (u64)threadIdx.x * SCAN_ITEMS;
    u32 v[SCAN_ITEMS];
    u32 local = 0;
#pragma unroll
    for (u32 e = 0; e < SCAN_ITEMS; ++e) {
        const u64 i = base + e;
        v[e] = i < a.n ? in[i] : 0u;
        local += v[e];
    }
    u32 prefix = block_exclusive(local, warp_sums, &total);
#pragma unroll
    for (u32 e = 0; e < SCAN_ITEMS; ++e) {
        const u64 i = base + e;
        if (i < a.len) out[i] = prefix;
        prefix += v[e];
    }
    if (threadIdx.x == 0) sums[blockIdx.x] = total;
}

// Exclusive scan of the `count` tile totals, in place, by one block.
extern "C" __global__ void cagra_scan_sums(const __grid_constant__ CagraScanSumsArgs a) {
    u32* __restrict__ sums = a.sums;
    const u32 count = a.count;
    __shared__ u32 warp_sums[32];
    __shared__ u32 total;
    u32 carry = 0;
    for (u32 base = 0; base < count; base += SCAN_THREADS) {
        const u32 i = base + threadIdx.x;
        const u32 v = i < count ? sums[i] : 0u;
        const u32 p = block_exclusive(v, warp_sums, &total);
        if (i < count) sums[i] = carry + p;
        carry += total;
        __syncthreads();
    }
}

// out[i] += sums[tile of i] for i < len.
extern "C" __global__ void cagra_scan_add(const __grid_constant__ CagraScanAddArgs a) {
    u32* __restrict__ out = a.out;
    const u32* __restrict__ sums = a.sums;
    const u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < a.len) out[i] += sums[i / SCAN_TILE];
}

// Every edge s -> v at column c of the pruned graph: keys[offsets[v] + fill[v]++] = c << 32 | s.
extern "C" __global__ void cagra_rev_scatter(const __grid_constant__ CagraRevScatterArgs a) {
    const u32* __restrict__ pruned = a.pruned;
    const u32* __restrict__ offsets = a.offsets;
    u32* __restrict__ fill = a.fill;
    u64* __restrict__ keys = a.keys;
    for (u64 e = (u64)blockIdx.x * blockDim.x + threadIdx.x; e < a.edges;
         e += (u64)gridDim.x * blockDim.x) {
        const u32 v = pruned[e];
        if (v == INVALID) continue;
        const u32 pos = offsets[v] + atomicAdd(&fill[v], 1u);
        const u64 src = e / a.degree;
        const u64 col = e - src * a.degree;
        keys[pos] = (col << 32) | src;
    }
}

// One warp per node v: rev[v][rank] = source of the key of that rank in v's segment, for the
// `degree` smallest keys; rev_cnt[v] = min(segment length, degree).
extern "C" __global__ void cagra_rev_select(const __grid_constant__ CagraRevSelectArgs a) {
    const u64* __restrict__ keys = a.keys;
    const u32* __restrict__ offsets = a.offsets;
    u32* __restrict__ rev = a.rev;
    u32* __restrict__ rev_cnt = a.rev_cnt;
    const u32 degree = a.degree;
    const u32 v = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
    const u32 lane = threadIdx.x & 31u;
    if (v >= a.n) return;
    const u32 off = __ldg(&offsets[v]);
    const u32 len = __ldg(&offsets[v + 1]) - off;
    const u64 none = ~0ull;
    for (u32 ib = 0; ib < len; ib += 32) {
        const u64 mine = ib + lane < len ? __ldg(&keys[off + ib + lane]) : none;
        u32 rank = 0;
        for (u32 jb = 0; jb < len; jb += 32) {
            const u64 theirs = jb + lane < len ? __ldg(&keys[off + jb + lane]) : none;
#pragma unroll 8
            for (u32 s = 0; s < 32; ++s) {
                const u64 o = __shfl_sync(0xffffffffu, theirs, s);
                rank += o < mine ? 1u : 0u;
            }
        }
        if (ib + lane < len && rank < degree) rev[(u64)v * degree + rank] = (u32)(mine & 0xffffffffu);
    }
    if (lane == 0) rev_cnt[v] = len < degree ? len : degree;
}

// Whether x is among list[0..len), global memory that the kernel does not write (the same
// answer on every lane reading the same list).
__device__ __forceinline__ bool contains(const u32* __restrict__ list, u32 len, u32 x) {
    for (u32 i = 0; i < len; ++i)
        if (__ldg(&list[i]) == x) return true;
    return false;
}

// One warp per node: see the file comment (step 6).
extern "C" __global__ void cagra_merge(const __grid_constant__ CagraMergeArgs a) {
    const u32* __restrict__ pruned = a.pruned;
    const u32* __restrict__ rev = a.rev;
    const u32* __restrict__ rev_cnt = a.rev_cnt;
    u32* __restrict__ out = a.out;
    const u32 degree = a.degree;
    const u32 v = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
    const u32 lane = threadIdx.x & 31u;
    if (v >= a.n) return;
    const u32* p = pruned + (u64)v * degree;
    const u32* r = rev + (u64)v * degree;
    u32* o = out + (u64)v * degree;
    const u32 rc = __ldg(&rev_cnt[v]);
    // m: the valid prefix of the pruned row.
    u32 m = degree;
    for (u32 b = 0; b < degree; b += 32) {
        const bool pad = b + lane < degree && __ldg(&p[b + lane]) == INVALID;
        const u32 ball = __ballot_sync(0xffffffffu, pad);
        if (ball != 0) {
            m = b + (u32)(__ffs(ball) - 1);
            break;
        }
    }
    const u32 hp = degree / 2 < m ? degree / 2 : m;
    for (u32 i = lane; i < hp; i += 32) o[i] = __ldg(&p[i]);
    const u32 below = (1u << lane) - 1u;
    u32 pos = hp;
    for (u32 b = 0; b < rc; b += 32) {
        const u32 t = b + lane;
        const u32 x = t < rc ? __ldg(&r[t]) : INVALID;
        const bool keep = t < rc && !contains(p, hp, x);
        const u32 ball = __ballot_sync(0xffffffffu, keep);
        const u32 at = pos + __popc(ball & below);
        if (keep && at < degree) o[at] = x;
        pos += __popc(ball);
    }
    for (u32 b = hp; b < m; b += 32) {
        const u32 s = b + lane;
        const u32 x = s < m ? __ldg(&p[s]) : INVALID;
        const bool keep = s < m && !contains(r, rc, x);
        const u32 ball = __ballot_sync(0xffffffffu, keep);
        const u32 at = pos + __popc(ball & below);
        if (keep && at < degree) o[at] = x;
        pos += __popc(ball);
    }
    for (u32 i = (pos < degree ? pos : degree) + lane; i < degree; i += 32) o[i] = INVALID;
}
