// GGNN hierarchical construction on the GPU (crates/weft-ggnn/src/gpu/device.rs; docs/ggnn.md).
//
// The kernels port weft_ggnn::GgnnCpu phase by phase:
//   ggnn_top_*     brute force inside each segment of a layer (one block per segment, one warp
//                  per point): the k nearest segment members, ties by id, and the real 1-NN
//                  distance.
//   ggnn_select    weighted upward sampling: key -ln(u) / (d_nn1 + FLT_EPSILON) with
//                  u from hash3(seed, layer, local id) in f64, largest keys first, ties by id
//                  (one thread per point; its rank in its segment is counted).
//   ggnn_merge_*   top-down hierarchical search of every point of a layer for itself (one warp
//                  per point) with the sorted best list, bounded queue and visited ring of the
//                  CPU reference and a per-warp seen set in place of its membership test; the
//                  candidates of a popped row are scored in parallel (teams of lanes) and
//                  merged as a batch; writes a scratch graph (Jacobi). Warps take the points in
//                  the locality order when the host passes one (the result does not depend on
//                  the order) and record the best layer-1 / layer-2 points as its next keys.
//   ggnn_order_*   that order: layer 0's points counting-sorted by the rank of their best
//                  layer-1 point. ggnn_nn1_stats: the 1-NN sum and maximum in a fixed order.
//   ggnn_sym_*     the symmetric-link searches (one warp per point, the same search state);
//                  inverse links are handed out with atomics (where the GPU order differs from
//                  the CPU's sequential (z, i) order), into per-node link lists.
//   ggnn_sym_rebuild  each row's second half: the node's links sorted by id, then its previous
//                  second-half entries, padding (one thread per row, into the scratch graph).
//
// Storage ("row space"): the layers are stacked; layer l's local id v is row row_off[l] + v of
// ids (k slots each), glob (global id), sel (local id in layer l - 1) and nn1.
//
// Segments of a layer are described by (s0, s0_off): segment b holds s0 + [b < s0_off] points
// starting at b * s0 + min(b, s0_off); the upper layers pass (S, 0).
#include "weft/types.cuh"
#include "weft/distance.cuh"
#include "weft/rng.cuh"
#include "weft/hashset.cuh"
#include "args.cuh"

namespace weft {
namespace ggnn {

// Warps per block of ggnn_top_* (the host's WARPS).
constexpr u32 WARPS = 4;
// The most warps per block of ggnn_merge_* and ggnn_sym_* (the host's SEARCH_WARPS; a launch
// may use fewer when the per-warp search state needs more shared memory).
constexpr u32 SEARCH_WARPS = 4;
// Blocks of SEARCH_WARPS warps per SM the merge and sym kernels are compiled for (register
// budgets: 9 blocks of 4 warps leave 56 registers a thread, 36 warps an SM, as many as the
// default search state's shared memory allows; 8 blocks leave 64).
constexpr u32 MERGE_BLOCKS = 9;
constexpr u32 SYM_BLOCKS = 9;
// The constraint ball's centre between z and x_i (weft_ggnn::MIDPOINT).
constexpr float MIDPOINT = 0.4f;
// f32::EPSILON as f64.
constexpr double FLT_EPS = 1.1920928955078125e-07;

__device__ __forceinline__ u32 lane_id() { return threadIdx.x & 31u; }

// First local id of segment b.
__device__ __forceinline__ u32 seg_start(u32 b, u32 s0, u32 s0_off) {
    return b * s0 + (b < s0_off ? b : s0_off);
}

// Points of segment b.
__device__ __forceinline__ u32 seg_len(u32 b, u32 s0, u32 s0_off) { return s0 + (b < s0_off ? 1u : 0u); }

// The segment holding local id v (weft_ggnn::Sizing::segment_of).
__device__ __forceinline__ u32 seg_of(u32 v, u32 s0, u32 s0_off) {
    const u32 big = s0_off * (s0 + 1);
    if (v < big) return v / (s0 + 1);
    return s0_off + (v - big) / (s0 > 0 ? s0 : 1);
}

// A metric distance as a real distance (square root for squared L2, magnitude otherwise).
__device__ __forceinline__ float real_dist(i32 metric, float d) {
    return metric == METRIC_L2 ? sqrtf(fmaxf(d, 0.0f)) : fabsf(d);
}

// One warp: the distance between m = z + MIDPOINT (x - z) (in f32, without contraction, as
// the CPU reference computes it) and row c.
template <typename T>
__device__ __forceinline__ float mid_dist(const T* z, const T* x, const T* c, u32 stride,
                                          i32 metric) {
    constexpr int P = Elem<T>::PER_VEC;
    const uint4* vz = reinterpret_cast<const uint4*>(z);
    const uint4* vx = reinterpret_cast<const uint4*>(x);
    const uint4* vc = reinterpret_cast<const uint4*>(c);
    const u32 nvec = stride / P;
    float s0 = 0.0f, s1 = 0.0f, s2 = 0.0f;
    for (u32 v = lane_id(); v < nvec; v += 32) {
        float a[P], b[P], y[P];
        Elem<T>::unpack(vz[v], a);
        Elem<T>::unpack(vx[v], b);
        Elem<T>::unpack(vc[v], y);
#pragma unroll
        for (int i = 0; i < P; ++i) {
            const float m = __fadd_rn(a[i], __fmul_rn(MIDPOINT, __fsub_rn(b[i], a[i])));
            if (metric == METRIC_L2) {
                const float d = m - y[i];
                s0 = fmaf(d, d, s0);
            } else {
                s0 = fmaf(m, y[i], s0);
                s1 = fmaf(m, m, s1);
                s2 = fmaf(y[i], y[i], s2);
            }
        }
    }
    s0 = warp_sum(s0);
    if (metric == METRIC_L2) return s0;
    if (metric == METRIC_IP) return -s0;
    s1 = warp_sum(s1);
    s2 = warp_sum(s2);
    return cosine_from_parts(s0, s1, s2);
}

// The most queue heads one merge step expands (the host's MAX_HEADS).
constexpr u32 MAX_HEADS = 2;
// Chunks of 32 row entries a merge step reads before using any (the rest are read in turn).
constexpr u32 PRELOAD = 2;

// Slots probed by one insert into a search's seen set before the id is given up ("forgotten").
constexpr u32 MAX_PROBES = 16;
// Words of per-warp scratch: four arrays of 32 (a batch's candidate ids, their distances, their
// midpoint distances in sym, and the passing distances sorted).
constexpr u32 SCRATCH = 4 * 32;

// The per-warp search state of merge and sym, in shared memory: a sorted best list, a sorted
// bounded queue (each drops its worst entry when full) and a FIFO ring of the last pops, as in
// the CPU's bounded cache, plus a "seen" set that replaces the CPU's membership test. The seen
// set holds every id scored (or seeded) since it was last rebuilt; a candidate is scored only
// when it is new to it. When more than half its slots are taken, it is rebuilt from the best
// list, the queue and the ring: so it always holds every id the CPU would skip (those in the
// three), and more. It is a tag set of weft/hashset.cuh (2^seen_bits 16-bit slots, exact for
// ids below 2^(seen_bits + TAG_BITS): the host checks the layer sizes) or, when `wide`, a
// visited table of 2^seen_bits u32 slots probed at most MAX_PROBES times. An id that finds no
// slot is not recorded, and until the next rebuild every candidate that passes the bound is
// also checked against the two lists, so they never hold an id twice. The candidates of one
// popped row are handled as a batch: their distances are computed in parallel (teams of lanes),
// and the ones that pass are merged into both lists at once. Every member function is called by
// the whole warp; lengths are warp-uniform registers.
struct Search {
    float* bd;
    u32* bi;
    u32 bcap, nb;
    float* qd;
    u32* qi;
    u32 qcap, nq;
    u32* ring;
    u32 rcap, nr, rh;
    u32* seen;
    u32 seen_bits;  // log2 of the seen set's slots
    bool wide;      // u32 slots (a visited table) instead of 16-bit tags
    u32 fill;       // ids recorded in the seen set
    bool forgot;    // an id was not recorded since the last rebuild
    u32* cid;       // [32] fresh candidate ids of a batch, in row order
    float* cd;      // [32] their distances
    float* cm;      // [32] their midpoint distances (sym)
    float* sd;      // [32] the passing candidates' distances, sorted

    // Words of the seen set of `slots` slots.
    __host__ __device__ static u32 seen_words(u32 slots, bool wide) {
        return wide ? slots : slots / 2;
    }

    // Words of shared memory one warp needs.
    __host__ __device__ static u32 words(u32 best, u32 prioq, u32 ring_len, u32 seen_slots,
                                         bool wide) {
        return 2 * best + 2 * prioq + ring_len + seen_words(seen_slots, wide) + SCRATCH;
    }

    __device__ __forceinline__ void init(u32* smem, u32 best, u32 prioq, u32 ring_len,
                                         u32 seen_slots, bool wide_slots) {
        bd = reinterpret_cast<float*>(smem);
        bi = smem + best;
        qd = reinterpret_cast<float*>(smem + 2 * best);
        qi = smem + 2 * best + prioq;
        ring = smem + 2 * best + 2 * prioq;
        seen = ring + ring_len;
        u32* s = seen + seen_words(seen_slots, wide_slots);
        cid = s;
        cd = reinterpret_cast<float*>(s + 32);
        cm = reinterpret_cast<float*>(s + 64);
        sd = reinterpret_cast<float*>(s + 96);
        bcap = best;
        qcap = prioq;
        rcap = ring_len;
        seen_bits = __ffs(seen_slots) - 1;
        wide = wide_slots;
        nb = nq = nr = rh = fill = 0;
        forgot = false;
    }

    // Empties both lists.
    __device__ __forceinline__ void reset_lists() { nb = nq = 0; }

    // Empties the seen set (every word all ones: INVALID slots, or two empty tags).
    __device__ __forceinline__ void wipe_seen() {
        __syncwarp();
        const u32 n = seen_words(1u << seen_bits, wide);
        for (u32 j = lane_id(); j < n; j += 32) seen[j] = 0xffffffffu;
        fill = 0;
        forgot = false;
        __syncwarp();
    }

    // Empties the seen set and the ring.
    __device__ __forceinline__ void clear_seen() {
        wipe_seen();
        nr = rh = 0;
    }

    // Per lane: records `id` (when `active`) in the seen set; true when it was not there (or
    // could not be recorded: `lost`). Several lanes may insert at once.
    __device__ __forceinline__ bool see(u32 id, bool active, bool& lost) {
        if (!active) return false;
        if (!wide) {
            const u32 r = tagset_insert(seen, seen_bits, id);
            if (r == TAG_LOST) lost = true;
            return r != TAG_SEEN;
        }
        const u32 mask = (1u << seen_bits) - 1u;
        u32 h = visited_hash(id) & mask;
        for (u32 p = 0; p < MAX_PROBES; ++p) {
            const u32 prev = atomicCAS(&seen[h], INVALID, id);
            if (prev == INVALID) return true;
            if (prev == id) return false;
            h = (h + 1) & mask;
        }
        lost = true;
        return true;
    }

    // Warp-wide: `see` for each lane, counting what was recorded; true for a new id.
    __device__ __forceinline__ bool see_all(u32 id, bool active) {
        bool lost = false;
        const bool fresh = see(id, active, lost);
        fill += __popc(__ballot_sync(0xffffffffu, fresh && !lost));
        forgot |= __any_sync(0xffffffffu, lost);
        return fresh;
    }

    // Rebuilds the seen set from the lists and the ring when more than half of it is taken or
    // an id was lost (between batches, when the lists are settled).
    __device__ __forceinline__ void maybe_rebuild() {
        if (!forgot && 2 * fill <= (1u << seen_bits)) return;
        wipe_seen();
        const u32 total = nb + nq + nr;
        for (u32 base = 0; base < total; base += 32) {
            const u32 j = base + lane_id();
            u32 id = INVALID;
            if (j < nb) id = bi[j];
            else if (j < nb + nq) id = qi[j - nb];
            else if (j < total) id = ring[j - nb - nq];
            see_all(id, j < total);
        }
        __syncwarp();
    }

    // Records a pop in the ring (the oldest entry is overwritten when full).
    __device__ __forceinline__ void record_pop(u32 id) {
        if (rcap == 0) return;
        if (nr < rcap) {
            if (lane_id() == 0) ring[nr] = id;
            nr += 1;
        } else {
            if (lane_id() == 0) ring[rh] = id;
            rh = (rh + 1) % rcap;
        }
        __syncwarp();
    }

    // The worst distance of a full best list, infinity while it is not full.
    __device__ __forceinline__ float best_last() const {
        return nb < bcap ? inf_f32() : bd[bcap - 1];
    }

    // The best distance so far (infinity when empty).
    __device__ __forceinline__ float best_first() const { return nb > 0 ? bd[0] : inf_f32(); }

    // Whether the best list holds `id` (warp-wide).
    __device__ __forceinline__ bool best_has(u32 id) const {
        bool f = false;
        for (u32 j = lane_id(); j < nb; j += 32) f |= bi[j] == id;
        return __any_sync(0xffffffffu, f);
    }

    // Per lane: whether `id` is in the best list or the queue (a sequential scan, used only
    // after the seen set forgot an id).
    __device__ __forceinline__ bool lists_have(u32 id) const {
        for (u32 j = 0; j < nb; ++j)
            if (bi[j] == id) return true;
        for (u32 j = 0; j < nq; ++j)
            if (qi[j] == id) return true;
        return false;
    }

    // Merges the batch (one candidate (d, id) per lane where `has`, ranked in sd) into the
    // sorted list (ld, li, len, cap): a candidate goes before equal distances already there;
    // entries past cap are dropped.
    __device__ __forceinline__ static void merge_into(float* ld, u32* li, u32& len, u32 cap,
                                                      const float* sd, u32 m, bool has, float d,
                                                      u32 id, u32 rank) {
        const u32 lane = lane_id();
        // The candidate's place: entries strictly below d, plus its rank in the batch.
        u32 pos = 0;
        if (has) {
            u32 lo = 0, hi = len;
            while (lo < hi) {
                const u32 mid = (lo + hi) >> 1;
                if (ld[mid] < d)
                    lo = mid + 1;
                else
                    hi = mid;
            }
            pos = lo + rank;
        }
        // Existing entries move up by the number of candidates at or below them; the highest
        // chunk first, so that no entry is overwritten before it is read.
        if (len > 0) {
            for (int base = (int)((len - 1) & ~31u); base >= 0; base -= 32) {
                const u32 j = (u32)base + lane;
                float dv = 0.0f;
                u32 iv = 0, np = cap;
                if (j < len) {
                    dv = ld[j];
                    iv = li[j];
                    u32 lo = 0, hi = m;
                    while (lo < hi) {
                        const u32 mid = (lo + hi) >> 1;
                        if (sd[mid] <= dv)
                            lo = mid + 1;
                        else
                            hi = mid;
                    }
                    np = j + lo;
                }
                __syncwarp();
                if (np < cap) {
                    ld[np] = dv;
                    li[np] = iv;
                }
                __syncwarp();
            }
        }
        if (has && pos < cap) {
            ld[pos] = d;
            li[pos] = id;
        }
        len = len + m < cap ? len + m : cap;
        __syncwarp();
    }

    // Pushes a batch into the best list and the queue: lane l holds candidate (d, id) when
    // `has` (the ids are distinct and in neither list).
    __device__ __forceinline__ void push_batch(bool has, float d, u32 id) {
        const u32 mask = __ballot_sync(0xffffffffu, has);
        if (mask == 0) return;
        const u32 lane = lane_id();
        const u32 m = __popc(mask);
        // Rank by (distance, lane).
        u32 rank = 0;
        for (u32 mm = mask; mm != 0; mm &= mm - 1) {
            const u32 o = __ffs(mm) - 1;
            const float od = __shfl_sync(0xffffffffu, d, o);
            rank += (od < d || (od == d && o < lane)) ? 1u : 0u;
        }
        __syncwarp();
        if (has) sd[rank] = d;
        __syncwarp();
        merge_into(bd, bi, nb, bcap, sd, m, has, d, id, rank);
        merge_into(qd, qi, nq, qcap, sd, m, has, d, id, rank);
    }

    // The queue's head if its distance is below crit (INVALID otherwise), removed.
    __device__ __forceinline__ u32 pop(float crit) {
        if (nq == 0) return INVALID;
        const float d = qd[0];
        const u32 id = qi[0];
        if (!(d < crit)) return INVALID;
        __syncwarp();
        for (u32 base = 0; base + 1 < nq; base += 32) {
            const u32 j = base + lane_id() + 1;
            const bool act = j < nq;
            float dv = 0.0f;
            u32 iv = 0;
            if (act) {
                dv = qd[j];
                iv = qi[j];
            }
            __syncwarp();
            if (act) {
                qd[j - 1] = dv;
                qi[j - 1] = iv;
            }
            __syncwarp();
        }
        nq -= 1;
        record_pop(id);
        return id;
    }

    // Moves to the layer below: best ids through down[], the queue reseeded from the best
    // list, the ring emptied, the seen set cleared and given the best ids; distances kept.
    __device__ __forceinline__ void transform(const u32* down) {
        __syncwarp();
        for (u32 j = lane_id(); j < nb; j += 32) bi[j] = down[bi[j]];
        __syncwarp();
        nq = nb < qcap ? nb : qcap;
        for (u32 j = lane_id(); j < nq; j += 32) {
            qd[j] = bd[j];
            qi[j] = bi[j];
        }
        clear_seen();
        for (u32 base = 0; base < nb; base += 32) {
            const u32 j = base + lane_id();
            see_all(j < nb ? bi[j] : INVALID, j < nb);
        }
        __syncwarp();
    }
};

// Lanes per candidate team are a power of two, 1..32; team t of the warp is lanes
// [t * team, (t + 1) * team).

// Sums `s` over the lanes of each team (every lane of the warp calls it).
__device__ __forceinline__ float team_sum(float s, u32 team) {
    for (u32 o = team >> 1; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
    return s;
}

// One team: its lanes' share of the distance between rows q and c (lane tl of the team reads
// vectors tl, tl + team, ...); the team's lanes sum it with team_sum. `act` false: zeros.
template <typename T>
__device__ __forceinline__ float team_dist(const T* q, const T* c, u32 nvec, u32 tl, u32 team,
                                           i32 metric, bool act) {
    constexpr int P = Elem<T>::PER_VEC;
    float s0 = 0.0f, s1 = 0.0f, s2 = 0.0f;
    if (act) {
        const uint4* vq = reinterpret_cast<const uint4*>(q);
        const uint4* vc = reinterpret_cast<const uint4*>(c);
        if (metric == METRIC_L2) {
#pragma unroll 4
            for (u32 v = tl; v < nvec; v += team) {
                float x[P], y[P];
                Elem<T>::unpack(vq[v], x);
                Elem<T>::unpack(vc[v], y);
#pragma unroll
                for (int i = 0; i < P; ++i) {
                    const float d = x[i] - y[i];
                    s0 = fmaf(d, d, s0);
                }
            }
        } else {
#pragma unroll 4
            for (u32 v = tl; v < nvec; v += team) {
                float x[P], y[P];
                Elem<T>::unpack(vq[v], x);
                Elem<T>::unpack(vc[v], y);
#pragma unroll
                for (int i = 0; i < P; ++i) {
                    s0 = fmaf(x[i], y[i], s0);
                    s1 = fmaf(x[i], x[i], s1);
                    s2 = fmaf(y[i], y[i], s2);
                }
            }
        }
    }
    s0 = team_sum(s0, team);
    if (metric == METRIC_L2) return s0;
    if (metric == METRIC_IP) return -s0;
    s1 = team_sum(s1, team);
    s2 = team_sum(s2, team);
    return cosine_from_parts(s0, s1, s2);
}

// One team: the distances from row c to z (dz) and to m = z + MIDPOINT (x - z) (dm, m in f32
// without contraction, as the CPU reference computes it), in one pass over c.
template <typename T>
__device__ __forceinline__ void team_dist2(const T* z, const T* x, const T* c, u32 nvec, u32 tl,
                                           u32 team, i32 metric, bool act, float& dz,
                                           float& dm) {
    constexpr int P = Elem<T>::PER_VEC;
    float a0 = 0.0f, a1 = 0.0f, a2 = 0.0f, b0 = 0.0f, b1 = 0.0f;
    if (act) {
        const uint4* vz = reinterpret_cast<const uint4*>(z);
        const uint4* vx = reinterpret_cast<const uint4*>(x);
        const uint4* vc = reinterpret_cast<const uint4*>(c);
#pragma unroll 2
        for (u32 v = tl; v < nvec; v += team) {
            float a[P], b[P], y[P];
            Elem<T>::unpack(vz[v], a);
            Elem<T>::unpack(vx[v], b);
            Elem<T>::unpack(vc[v], y);
#pragma unroll
            for (int i = 0; i < P; ++i) {
                const float m = __fadd_rn(a[i], __fmul_rn(MIDPOINT, __fsub_rn(b[i], a[i])));
                if (metric == METRIC_L2) {
                    const float d = a[i] - y[i];
                    a0 = fmaf(d, d, a0);
                    const float e = m - y[i];
                    b0 = fmaf(e, e, b0);
                } else {
                    a0 = fmaf(a[i], y[i], a0);
                    a1 = fmaf(a[i], a[i], a1);
                    a2 = fmaf(y[i], y[i], a2);
                    b0 = fmaf(m, y[i], b0);
                    b1 = fmaf(m, m, b1);
                }
            }
        }
    }
    a0 = team_sum(a0, team);
    b0 = team_sum(b0, team);
    if (metric == METRIC_L2) {
        dz = a0;
        dm = b0;
        return;
    }
    if (metric == METRIC_IP) {
        dz = -a0;
        dm = -b0;
        return;
    }
    a1 = team_sum(a1, team);
    a2 = team_sum(a2, team);
    b1 = team_sum(b1, team);
    dz = cosine_from_parts(a0, a1, a2);
    dm = cosine_from_parts(b0, b1, a2);
}

// Brute force inside segment blockIdx.x of one layer. Writes k ids per point (sorted by
// distance, ties by id, INVALID past the segment's other points) and the real distance to the
// nearest point at a non-zero distance (0 when none).
template <typename T>
__device__ void top(const T* data, u32 stride, i32 metric, const u32* glob, u32 s0, u32 s0_off,
                    u32 k, u32* out_ids, float* out_nn1) {
    extern __shared__ u32 smem[];
    const u32 warp = threadIdx.x >> 5;
    const u32 lane = lane_id();
    u32* lk = smem + warp * 2 * k;
    u32* li = lk + k;
    const u32 b = blockIdx.x;
    const u32 start = seg_start(b, s0, s0_off);
    const u32 len = seg_len(b, s0, s0_off);
    for (u32 p = warp; p < len; p += WARPS) {
        const u32 v = start + p;
        const T* q = data + (u64)glob[v] * stride;
        u32 cnt = 0;
        u32 nn_key = 0xffffffffu;
        float nn_d = 0.0f;
        for (u32 u = start; u < start + len; ++u) {
            if (u == v) continue;
            const float d = warp_distance<T>(q, data + (u64)glob[u] * stride, stride, metric);
            const u32 key = ordered(d);
            if (real_dist(metric, d) > 0.0f && key < nn_key) {
                nn_key = key;
                nn_d = d;
            }
            if (lane == 0) {
                const bool full = cnt >= k;
                if (!full || key < lk[k - 1] || (key == lk[k - 1] && u < li[k - 1])) {
                    u32 j = full ? k - 1 : cnt;
                    while (j > 0 && (key < lk[j - 1] || (key == lk[j - 1] && u < li[j - 1]))) {
                        lk[j] = lk[j - 1];
                        li[j] = li[j - 1];
                        --j;
                    }
                    lk[j] = key;
                    li[j] = u;
                    if (!full) ++cnt;
                }
            }
        }
        cnt = __shfl_sync(0xffffffffu, cnt, 0);
        __syncwarp();
        for (u32 j = lane; j < k; j += 32) out_ids[(u64)v * k + j] = j < cnt ? li[j] : INVALID;
        if (lane == 0) out_nn1[v] = nn_key == 0xffffffffu ? 0.0f : real_dist(metric, nn_d);
        __syncwarp();
    }
}

// Scores a batch of fresh candidates (ids in s.cid[0..m], layer-local, rows at glob[off + id],
// or the id itself when off is 0: layer 0's global ids are the identity) against q in teams;
// s.cd[i] receives candidate i's distance.
template <typename T>
__device__ __forceinline__ void score_batch(Search& s, const T* data, u32 stride, i32 metric,
                                            const T* q, const u32* glob, u32 off, u32 m,
                                            u32 team) {
    const u32 nvec = stride / Elem<T>::PER_VEC;
    const u32 lane = lane_id();
    const u32 teams = 32 / team;
    const u32 t = lane / team;
    const u32 tl = lane % team;
    for (u32 r0 = 0; r0 < m; r0 += teams) {
        const u32 i = r0 + t;
        const bool act = i < m;
        const T* c = q;
        if (act) {
            const u32 id = s.cid[i];
            c = data + (u64)(off == 0 ? id : glob[off + id]) * stride;
        }
        const float d = team_dist<T>(q, c, nvec, tl, team, metric, act);
        if (act && tl == 0) s.cd[i] = d;
    }
    __syncwarp();
}

// The fresh candidates among ids[0..len] (per lane: `cand`, or INVALID): the ones not equal to
// `self_id` and new to the seen set, compacted in row order into s.cid; returns their count.
__device__ __forceinline__ u32 fresh_batch(Search& s, u32 cand, u32 self_id) {
    const bool fresh = s.see_all(cand, cand != INVALID && cand != self_id);
    const u32 fm = __ballot_sync(0xffffffffu, fresh);
    if (fresh) s.cid[__popc(fm & ((1u << lane_id()) - 1u))] = cand;
    __syncwarp();
    return __popc(fm);
}

// Merge ltop -> lm for the point of layer lm of this warp (Algorithm 4 of the paper, as
// GgnnCpu::merge, with the seen set and batches of Search): score the S points of its ancestor
// segment in layer ltop, then for each layer li = ltop-1 .. lm map the best list down, reseed
// the queue, clear the seen set and expand (at most max_pops pops); push the point itself at
// distance 0 on reaching lm. A popped row's candidates are tested against the bound as it was
// before the row (the CPU tests each against the bound after the previous ones; the lists end
// the same, up to equal distances, because a candidate that fails the later bound lands past
// the best list's end and behind every entry that can still be popped). The row is the best k
// without the point itself. counts[2 li] and counts[2 li + 1] receive the pops and the scored
// candidates of the searches in layer li (the S entry points count in layer ltop - 1).
// Locality keys, for the host's processing order of later passes (they change no result): with
// bit 0 of key_mask, key1[v] receives the best layer-1 point of v's search (when it leaves
// layer 1 for layer 0); with bit 1, key2[v] the best layer-2 point (when it leaves layer 2 for
// layer 1).
template <typename T>
__device__ void merge(const T* data, u32 stride, i32 metric, const u32* ids, const u32* glob,
                      const u32* sel, const u32* row_off, u32 k, u32 lm, u32 ltop, u32 n_lm,
                      u32 s0, u32 s0_off, u32 S, u32 levels, float slack, u32 bcap, u32 qcap,
                      u32 rcap, u32 seen_slots, u32 wide, u32 max_pops, u32 team, u32 heads,
                      const u32* perm, u32 use_perm, u32* key1, u32* key2, u32 key_mask,
                      const u32* seeds, u32 use_seeds, u32* out_ids, float* out_nn1,
                      unsigned long long* counts) {
    extern __shared__ u32 smem[];
    const u32 warp = threadIdx.x >> 5;
    const u32 slot = blockIdx.x * (blockDim.x >> 5) + warp;
    if (slot >= n_lm) return;
    // The point of this warp: the slot's entry of the processing order when there is one (a
    // permutation of the layer; a Jacobi pass's result does not depend on it).
    const u32 v = use_perm ? perm[slot] : slot;
    const u32 lane = lane_id();
    Search s;
    s.init(smem + warp * Search::words(bcap, qcap, rcap, seen_slots, wide != 0), bcap, qcap,
           rcap, seen_slots, wide != 0);
    // Pops and scored candidates of the current layer's search (the first also counts the S
    // entry points), added to counts[2 li], counts[2 li + 1] when the layer is done.
    u32 n_pops = 0, n_scored = S;
    heads = heads < 1 ? 1 : heads > MAX_HEADS ? MAX_HEADS : heads;
    const u32 off_lm = row_off[lm];
    const T* q = data + (u64)glob[off_lm + v] * stride;
    const u32 top_seg = seg_of(v, s0, s0_off) / levels;
    const u32 off_top = row_off[ltop];
    for (u32 base = 0; base < S; base += 32) {
        const u32 m = S - base < 32 ? S - base : 32;
        if (lane < m) s.cid[lane] = top_seg * S + base + lane;
        __syncwarp();
        score_batch<T>(s, data, stride, metric, q, glob, off_top, m, team);
        const float crit = s.best_last() + slack;
        const bool has = lane < m && s.cd[lane] < crit;
        const float d = has ? s.cd[lane] : 0.0f;
        const u32 id = has ? s.cid[lane] : INVALID;
        __syncwarp();
        s.push_batch(has, d, id);
    }
    for (int li = (int)ltop - 1; li >= (int)lm; --li) {
        // The locality keys: the best point found in layer 1 or 2.
        if (lane == 0 && s.nb > 0) {
            if (li == 0 && (key_mask & 1u)) key1[v] = s.bi[0];
            if (li == 1 && (key_mask & 2u)) key2[v] = s.bi[0];
        }
        s.transform(sel + row_off[li + 1]);
        if ((u32)li == lm && !s.best_has(v)) {
            s.see_all(v, lane == 0);
            s.push_batch(lane == 0, 0.0f, v);
        }
        // The entry-seeded merge (layer 0): the point's nearest entry point, a fresh
        // candidate against the bound as it stands (GgnnCpu's push_seed).
        if (li == 0 && use_seeds) {
            const u32 e = seeds[v];
            if (e != v && e != INVALID && !s.best_has(e)) {
                const float d = warp_distance<T>(q, data + (u64)e * stride, stride, metric);
                ++n_scored;
                const bool has = d < s.best_last() + slack;
                s.see_all(e, lane == 0);
                s.push_batch(lane == 0 && has, d, e);
            }
        }
        const u32 off = row_off[li];
        for (u32 pops = 0; pops < max_pops;) {
            // Pop up to nh heads against the bound before any of their rows (warp-uniform).
            const float crit = s.best_last() + slack;
            u32 h0 = INVALID, h1 = INVALID;
            u32 nh = 0;
            while (nh < heads && pops < max_pops) {
                const u32 a = s.pop(crit);
                if (a == INVALID) break;
                if (nh == 0) h0 = a;
                else h1 = a;
                ++nh;
                ++pops;
            }
            if (nh == 0) break;
            n_pops += nh;
            // The heads' rows, concatenated: entry j is slot j % k of head j / k's row; the
            // first PRELOAD chunks of 32 are read before any of them is used.
            const u32 tot = nh * k;
            auto entry = [&](u32 j) -> u32 {
                if (j >= tot) return INVALID;
                const bool second = j >= k;
                const u32 c = ids[(u64)(off + (second ? h1 : h0)) * k + (second ? j - k : j)];
                return (c == h0 || c == h1) ? INVALID : c;
            };
            u32 pre[PRELOAD];
#pragma unroll
            for (u32 c = 0; c < PRELOAD; ++c) pre[c] = entry(c * 32 + lane);
            // Fresh candidates collect in s.cid; a full batch is scored and pushed first.
            u32 m = 0;
            auto flush = [&]() {
                if (m == 0) return;
                n_scored += m;
                score_batch<T>(s, data, stride, metric, q, glob, off, m, team);
                const float bound = s.best_last() + slack;
                bool has = lane < m && s.cd[lane] < bound;
                const float d = has ? s.cd[lane] : 0.0f;
                const u32 id = has ? s.cid[lane] : INVALID;
                if (s.forgot) {
                    // An id the seen set could not hold may be in the lists, or twice in this
                    // batch (the heads' rows can share ids): keep its first copy only.
                    const u32 same = __match_any_sync(0xffffffffu, id);
                    if (has) has = !s.lists_have(id) && __ffs(same) - 1 == lane;
                }
                __syncwarp();
                s.push_batch(has, d, id);
                m = 0;
            };
            auto gather = [&](u32 cand) {
                const bool fresh = s.see_all(cand, cand != INVALID);
                const u32 fm = __ballot_sync(0xffffffffu, fresh);
                const u32 cnt = __popc(fm);
                if (m + cnt > 32) flush();
                if (fresh) s.cid[m + __popc(fm & ((1u << lane) - 1u))] = cand;
                __syncwarp();
                m += cnt;
            };
#pragma unroll
            for (u32 c = 0; c < PRELOAD; ++c)
                if (c * 32 < tot) gather(pre[c]);
            for (u32 base = PRELOAD * 32; base < tot; base += 32) gather(entry(base + lane));
            flush();
            s.maybe_rebuild();
        }
        if (lane == 0) {
            atomicAdd(counts + 2 * li, (unsigned long long)n_pops);
            atomicAdd(counts + 2 * li + 1, (unsigned long long)n_scored);
        }
        n_pops = n_scored = 0;
    }
    // The row: the best k without v (the best list is warp-uniform shared memory).
    u32 j = 0;
    float nn = 0.0f;
    for (u32 e = 0; e < s.nb; ++e) {
        const u32 id = s.bi[e];
        if (id == v || j >= k) continue;
        if (lane == 0) out_ids[(u64)v * k + j] = id;
        ++j;
        if (nn == 0.0f) nn = real_dist(metric, s.bd[e]);
    }
    for (u32 e = j + lane; e < k; e += 32) out_ids[(u64)v * k + e] = INVALID;
    if (lane == 0) out_nn1[v] = nn;
}

// Symmetric linking of layer l for the point z of this warp (Algorithm 5 with the midpoint
// constraint, as GgnnCpu::sym, with the seen set and batches of Search): for each x_i of z's
// first half, a short search for z from x_i over first halves; when z is not reached, z is
// offered to the search's best candidates in order, and the first with a free slot (an atomic
// counter below kf) takes it. Both distances of a popped row's fresh candidates are computed in
// parallel; the push tests then run in row order, each against the best distance after the
// previous pushes, exactly as on the CPU. counts[0] and counts[1] receive the pops and the
// scored candidates (the host passes layer l's pair). The points are taken in the order perm
// when use_perm is set (which searches hand out their links first is a race in any order).
template <typename T>
__device__ void sym(const T* data, u32 stride, i32 metric, const u32* ids, const u32* glob,
                    u32 off, u32 n, u32 k, u32 kl, u32 kf, float slack, u32 bcap, u32 qcap,
                    u32 rcap, u32 seen_slots, u32 wide, u32 max_pops, u32 team,
                    const u32* perm, u32 use_perm, u32* links, u32* link_cnt,
                    unsigned long long* dropped, unsigned long long* counts) {
    extern __shared__ u32 smem[];
    const u32 warp = threadIdx.x >> 5;
    const u32 slot = blockIdx.x * (blockDim.x >> 5) + warp;
    if (slot >= n) return;
    // The point of this warp: the slot's entry of the processing order when there is one.
    const u32 z = use_perm ? perm[slot] : slot;
    const u32 lane = lane_id();
    const u32 nvec = stride / Elem<T>::PER_VEC;
    const u32 teams = 32 / team;
    const u32 t = lane / team;
    const u32 tl = lane % team;
    Search s;
    s.init(smem + warp * Search::words(bcap, qcap, rcap, seen_slots, wide != 0), bcap, qcap,
           rcap, seen_slots, wide != 0);
    u32 n_pops = 0, n_scored = 0;
    const T* zq = data + (u64)(off == 0 ? z : glob[off + z]) * stride;
    for (u32 i = 0; i < kl; ++i) {
        const u32 x = ids[(u64)(off + z) * k + i];
        if (x == INVALID) continue;
        s.reset_lists();
        s.clear_seen();
        const T* xr = data + (u64)(off == 0 ? x : glob[off + x]) * stride;
        s.see_all(x, lane == 0);
        s.push_batch(lane == 0, warp_distance<T>(zq, xr, stride, metric), x);
        const float r_m = mid_dist<T>(zq, xr, xr, stride, metric);
        bool connected = false;
        for (u32 pops = 0; pops < max_pops; ++pops) {
            const u32 a = s.pop(s.best_last() + slack);
            if (a == INVALID) break;
            ++n_pops;
            const u32* nn = ids + (u64)(off + a) * k;
            bool has_z = false;
            for (u32 j = lane; j < kl; j += 32) has_z |= nn[j] == z;
            if (__any_sync(0xffffffffu, has_z)) {
                connected = true;
                break;
            }
            for (u32 base = 0; base < kl; base += 32) {
                const u32 j = base + lane;
                const u32 m = fresh_batch(s, j < kl ? nn[j] : INVALID, a);
                if (m == 0) continue;
                n_scored += m;
                for (u32 r0 = 0; r0 < m; r0 += teams) {
                    const u32 ci = r0 + t;
                    const bool act = ci < m;
                    const T* cr = zq;
                    if (act) {
                        const u32 id = s.cid[ci];
                        cr = data + (u64)(off == 0 ? id : glob[off + id]) * stride;
                    }
                    float dz, dm;
                    team_dist2<T>(zq, xr, cr, nvec, tl, team, metric, act, dz, dm);
                    if (act && tl == 0) {
                        s.cd[ci] = dz;
                        s.cm[ci] = dm;
                    }
                }
                __syncwarp();
                // The push tests in row order (warp-uniform).
                float bf = s.best_first();
                u32 acc = 0;
                for (u32 c = 0; c < m; ++c) {
                    const float dz = s.cd[c];
                    if (dz >= bf + slack) continue;
                    if (s.cm[c] < r_m + slack) {
                        acc |= 1u << c;
                        bf = fminf(bf, dz);
                    }
                }
                bool has = lane < m && ((acc >> lane) & 1u) != 0;
                const float d = has ? s.cd[lane] : 0.0f;
                const u32 id = has ? s.cid[lane] : INVALID;
                if (s.forgot && has) has = !s.lists_have(id);
                __syncwarp();
                s.push_batch(has, d, id);
                s.maybe_rebuild();
            }
        }
        if (connected || s.nb == 0) continue;
        if (lane == 0) {
            bool placed = false;
            for (u32 e = 0; e < s.nb && !placed; ++e) {
                const u32 p = s.bi[e];
                const u32 slot = atomicAdd(link_cnt + p, 1u);
                if (slot < kf) {
                    links[(u64)p * kf + slot] = z;
                    placed = true;
                }
            }
            if (!placed) atomicAdd(dropped, 1ull);
        }
        __syncwarp();
    }
    if (lane == 0) {
        atomicAdd(counts, (unsigned long long)n_pops);
        atomicAdd(counts + 1, (unsigned long long)n_scored);
    }
}

// The nearest of the entry points `entries` (global ids) to every point of layer 0 in
// `metric`, ties to the earlier entry (one warp per point): the seeds of the entry-seeded
// merges (weft_ggnn::nearest_entries is the CPU reference).
template <typename T>
__device__ void nearest_entry(const T* data, u32 stride, i32 metric, const u32* entries,
                              u32 n_entries, u32 n, u32* out) {
    const u32 v = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
    if (v >= n || n_entries == 0) return;
    const T* q = data + (u64)v * stride;
    float best = inf_f32();
    u32 arg = entries[0];
    for (u32 e = 0; e < n_entries; ++e) {
        const u32 id = entries[e];
        const float d = warp_distance<T>(q, data + (u64)id * stride, stride, metric);
        if (d < best) {
            best = d;
            arg = id;
        }
    }
    if (lane_id() == 0) out[v] = arg;
}

}  // namespace ggnn
}  // namespace weft

using namespace weft;

// Weighted upward sampling of layer t + 1 from layer t (one thread per point of layer t).
extern "C" __global__ void ggnn_select(const __grid_constant__ GgnnSelectArgs a) {
    const u32 v = blockIdx.x * blockDim.x + threadIdx.x;
    if (v >= a.n_t) return;
    const u32 b = ggnn::seg_of(v, a.s0, a.s0_off);
    const u32 start = ggnn::seg_start(b, a.s0, a.s0_off);
    const u32 len = ggnn::seg_len(b, a.s0, a.s0_off);
    const double scale = 1.0 / 9007199254740992.0;
    double keys_v = 0.0;
    {
        const u64 bits = hash3(a.seed, (u64)a.t, (u64)v);
        const double u = ((double)(bits >> 11) + 0.5) * scale;
        keys_v = -log(u) / ((double)a.nn1[a.off_t + v] + ggnn::FLT_EPS);
    }
    u32 rank = 0;
    for (u32 w = start; w < start + len; ++w) {
        if (w == v) continue;
        const u64 bits = hash3(a.seed, (u64)a.t, (u64)w);
        const double u = ((double)(bits >> 11) + 0.5) * scale;
        const double key = -log(u) / ((double)a.nn1[a.off_t + w] + ggnn::FLT_EPS);
        if (key > keys_v || (key == keys_v && w < v)) ++rank;
    }
    const u32 c = b % a.g;
    const u32 parent = b / a.g;
    const u32 m = a.sg + (c < a.sg_off ? 1u : 0u);
    if (rank < m) {
        const u32 dest = parent * a.S + c * a.sg + (c < a.sg_off ? c : a.sg_off) + rank;
        a.sel[a.off_up + dest] = v;
        a.glob[a.off_up + dest] = a.glob[a.off_t + v];
    }
}

// Each row's second half after a symmetric-link pass (one thread per row of the layer at
// row offset off): the row's first half, then its links sorted by id, then its previous
// second-half entries, skipping padding, itself and repeats; padding. Into out (layer-local).
extern "C" __global__ void ggnn_sym_rebuild(const __grid_constant__ GgnnSymRebuildArgs a) {
    const u32 v = blockIdx.x * blockDim.x + threadIdx.x;
    if (v >= a.n) return;
    const u32* row = a.ids + (u64)(a.off + v) * a.k;
    u32* o = a.out + (u64)v * a.k;
    u32* lk = a.links + (u64)v * a.kf;
    const u32 cnt = a.link_cnt[v] < a.kf ? a.link_cnt[v] : a.kf;
    // Sort the links by id (their arrival order is a race; their set is not ordered).
    for (u32 i = 1; i < cnt; ++i) {
        const u32 x = lk[i];
        u32 j = i;
        while (j > 0 && lk[j - 1] > x) {
            lk[j] = lk[j - 1];
            --j;
        }
        lk[j] = x;
    }
    for (u32 j = 0; j < a.kl; ++j) o[j] = row[j];
    u32 j = a.kl;
    for (u32 e = 0; e < cnt + (a.k - a.kl) && j < a.k; ++e) {
        const u32 c = e < cnt ? lk[e] : row[a.kl + (e - cnt)];
        if (c == INVALID || c == v) continue;
        bool dup = false;
        for (u32 r = 0; r < j && !dup; ++r) dup = o[r] == c;
        if (dup) continue;
        o[j++] = c;
    }
    for (; j < a.k; ++j) o[j] = INVALID;
}

// dst[i] = src[i] for i < len.
extern "C" __global__ void ggnn_copy_u32(const __grid_constant__ GgnnCopyU32Args a) {
    for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < a.len;
         i += (u64)gridDim.x * blockDim.x)
        a.dst[i] = a.src[i];
}

// dst[i] = value for i < len.
extern "C" __global__ void ggnn_fill_u32(const __grid_constant__ GgnnFillU32Args a) {
    for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < a.len;
         i += (u64)gridDim.x * blockDim.x)
        a.dst[i] = a.value;
}

// The sum (in f64) and the maximum of nn1[0..n] (one block of 1024 threads): thread t sums the
// contiguous run t of the entries in order, then the 1024 partial sums are added in a fixed
// tree, so the result does not depend on scheduling. out[0] = sum, out[1] = max.
extern "C" __global__ void __launch_bounds__(1024)
    ggnn_nn1_stats(const __grid_constant__ GgnnNn1StatsArgs a) {
    __shared__ double part_sum[1024];
    __shared__ float part_max[1024];
    const u32 t = threadIdx.x;
    const u32 per = (a.n + blockDim.x - 1) / blockDim.x;
    const u32 lo = t * per < a.n ? t * per : a.n;
    const u32 hi = lo + per < a.n ? lo + per : a.n;
    double sum = 0.0;
    float mx = 0.0f;
    for (u32 i = lo; i < hi; ++i) {
        sum += (double)a.nn1[i];
        mx = fmaxf(mx, a.nn1[i]);
    }
    part_sum[t] = sum;
    part_max[t] = mx;
    __syncthreads();
    for (u32 half = blockDim.x / 2; half > 0; half >>= 1) {
        if (t < half) {
            part_sum[t] += part_sum[t + half];
            part_max[t] = fmaxf(part_max[t], part_max[t + half]);
        }
        __syncthreads();
    }
    if (t == 0) {
        a.out[0] = part_sum[0];
        a.out[1] = (double)part_max[0];
    }
}

// dst[i] = i for i < len.
extern "C" __global__ void ggnn_iota_u32(const __grid_constant__ GgnnIotaU32Args a) {
    for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < a.len;
         i += (u64)gridDim.x * blockDim.x)
        a.dst[i] = (u32)i;
}

// Layer 0's locality order on the device (a counting sort by key[v] = rank[min(key1[v], l1 - 1)]:
// each point's best layer-1 point, ranked by the host). The order inside one key is the
// atomics' arrival order: it changes no merge result and only the race of the symmetric links.

// count[key[v]] += 1 (one thread per point; count zeroed before).
extern "C" __global__ void ggnn_order_count(const __grid_constant__ GgnnOrderCountArgs a) {
    const u32 v = blockIdx.x * blockDim.x + threadIdx.x;
    if (v >= a.n) return;
    const u32 p = a.key1[v] < a.l1 ? a.key1[v] : a.l1 - 1;
    atomicAdd(&a.count[a.rank[p]], 1u);
}

// count[0..len] becomes its exclusive prefix sum (one block; each thread scans a contiguous
// run of entries, the runs' sums are scanned in shared memory).
extern "C" __global__ void __launch_bounds__(1024)
    ggnn_order_scan(const __grid_constant__ GgnnOrderScanArgs a) {
    __shared__ u32 part[1024];
    const u32 t = threadIdx.x;
    const u32 per = (a.len + blockDim.x - 1) / blockDim.x;
    const u32 lo = t * per < a.len ? t * per : a.len;
    const u32 hi = lo + per < a.len ? lo + per : a.len;
    u32 sum = 0;
    for (u32 i = lo; i < hi; ++i) sum += a.count[i];
    part[t] = sum;
    __syncthreads();
    for (u32 off = 1; off < blockDim.x; off <<= 1) {
        const u32 x = t >= off ? part[t - off] : 0u;
        __syncthreads();
        part[t] += x;
        __syncthreads();
    }
    u32 run = t > 0 ? part[t - 1] : 0u;
    for (u32 i = lo; i < hi; ++i) {
        const u32 c = a.count[i];
        a.count[i] = run;
        run += c;
    }
}

// order[cursor[key[v]]++] = v (one thread per point; cursor = the scanned counts).
extern "C" __global__ void ggnn_order_scatter(const __grid_constant__ GgnnOrderScatterArgs a) {
    const u32 v = blockIdx.x * blockDim.x + threadIdx.x;
    if (v >= a.n) return;
    const u32 p = a.key1[v] < a.l1 ? a.key1[v] : a.l1 - 1;
    a.order[atomicAdd(&a.cursor[a.rank[p]], 1u)] = v;
}

#define WEFT_GGNN_INSTANTIATE(T, NAME)                                                           \
    extern "C" __global__ void __launch_bounds__(ggnn::WARPS * 32)                               \
        ggnn_top_##NAME(const __grid_constant__ GgnnTopArgs a) {                                 \
        ggnn::top<T>(as_elements<T>(a.data), a.stride, a.metric, a.glob + a.off, a.s0, a.s0_off, \
                     a.k, a.ids + (u64)a.off * a.k, a.nn1 + a.off);                              \
    }                                                                                            \
    extern "C" __global__ void __launch_bounds__(ggnn::SEARCH_WARPS * 32, ggnn::MERGE_BLOCKS)    \
        ggnn_merge_##NAME(const __grid_constant__ GgnnMergeArgs a) {                             \
        ggnn::merge<T>(as_elements<T>(a.data), a.stride, a.metric, a.ids, a.glob, a.sel,         \
                       a.row_off, a.k, a.lm, a.ltop, a.n_lm, a.s0, a.s0_off, a.S, a.levels,      \
                       a.slack, a.bcap, a.qcap, a.rcap, a.seen_slots, a.wide, a.max_pops,        \
                       a.team, a.heads, a.perm, a.use_perm, a.key1, a.key2, a.key_mask, a.seeds, \
                       a.use_seeds, a.out_ids, a.nn1 + a.off_lm, a.counts);                      \
    }                                                                                            \
    extern "C" __global__ void __launch_bounds__(ggnn::WARPS * 32)                               \
        ggnn_nearest_entry_##NAME(const __grid_constant__ GgnnNearestEntryArgs a) {              \
        ggnn::nearest_entry<T>(as_elements<T>(a.data), a.stride, a.metric, a.entries,            \
                               a.n_entries, a.n, a.out);                                         \
    }                                                                                            \
    extern "C" __global__ void __launch_bounds__(ggnn::SEARCH_WARPS * 32, ggnn::SYM_BLOCKS)      \
        ggnn_sym_##NAME(const __grid_constant__ GgnnSymArgs a) {                                 \
        ggnn::sym<T>(as_elements<T>(a.data), a.stride, a.metric, a.ids, a.glob, a.off, a.n, a.k, \
                     a.kl, a.kf, a.slack, a.bcap, a.qcap, a.rcap, a.seen_slots, a.wide,          \
                     a.max_pops, a.team, a.perm, a.use_perm, a.links, a.link_cnt, a.dropped,     \
                     a.counts);                                                                  \
    }

WEFT_GGNN_INSTANTIATE(float, f32)
WEFT_GGNN_INSTANTIATE(f16_t, f16)
WEFT_GGNN_INSTANTIATE(u8, u8)
WEFT_GGNN_INSTANTIATE(i8, i8)
