// GGNN hierarchical construction on the GPU (crates/weft-gpu/src/ggnn.rs; docs/ggnn.md).
//
// The kernels port weft_ggnn::GgnnCpu phase by phase:
//   ggnn_top_*     brute force inside each segment of a layer (one block per segment, one warp
//                  per point): the k nearest segment members, ties by id, and the real 1-NN
//                  distance.
//   ggnn_select    weighted upward sampling: key -ln(u) / (d_nn1 + FLT_EPSILON) with
//                  u from hash3(seed, layer, local id) in f64, largest keys first, ties by id
//                  (one thread per point; its rank in its segment is counted).
//   ggnn_merge_*   top-down hierarchical search of every point of a layer for itself (one warp
//                  per point) with the bounded cache of the CPU reference; writes a scratch
//                  graph (Jacobi).
//   ggnn_sym_*     the symmetric-link searches (one warp per point); inverse links are handed
//                  out with atomics (the one place where the GPU order differs from the CPU's
//                  sequential (z, i) order), into per-node link lists.
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

namespace weft {
namespace ggnn {

// Warps per block of ggnn_top_*, ggnn_merge_* and ggnn_sym_* (the host's GGNN_WARPS).
constexpr u32 WARPS = 4;
// The constraint ball's centre between z and x_i (weft_ggnn::MIDPOINT).
constexpr float MIDPOINT = 0.4f;
// f32::EPSILON as f64.
constexpr double FLT_EPS = 1.1920928955078125e-07;

__device__ __forceinline__ u32 lane_id() { return threadIdx.x & 31u; }

__device__ __forceinline__ float warp_sum(float s) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
    return s;
}

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

// Order-preserving u32 of a float (total order, as f32::total_cmp for non-NaN values).
__device__ __forceinline__ u32 order_key(float d) {
    const u32 b = __float_as_uint(d);
    return (b & 0x80000000u) ? ~b : (b | 0x80000000u);
}

// One warp: the distance between rows a and b; every lane returns it.
template <typename T>
__device__ __forceinline__ float dist(const T* a, const T* b, u32 stride, i32 metric) {
    constexpr int P = Elem<T>::PER_VEC;
    const uint4* va = reinterpret_cast<const uint4*>(a);
    const uint4* vb = reinterpret_cast<const uint4*>(b);
    const u32 nvec = stride / P;
    float s0 = 0.0f, s1 = 0.0f, s2 = 0.0f;
    if (metric == METRIC_L2) {
        for (u32 v = lane_id(); v < nvec; v += 32) {
            float x[P], y[P];
            Elem<T>::unpack(va[v], x);
            Elem<T>::unpack(vb[v], y);
#pragma unroll
            for (int i = 0; i < P; ++i) {
                const float d = x[i] - y[i];
                s0 = fmaf(d, d, s0);
            }
        }
        return warp_sum(s0);
    }
    for (u32 v = lane_id(); v < nvec; v += 32) {
        float x[P], y[P];
        Elem<T>::unpack(va[v], x);
        Elem<T>::unpack(vb[v], y);
#pragma unroll
        for (int i = 0; i < P; ++i) {
            s0 = fmaf(x[i], y[i], s0);
            s1 = fmaf(x[i], x[i], s1);
            s2 = fmaf(y[i], y[i], s2);
        }
    }
    s0 = warp_sum(s0);
    if (metric == METRIC_IP) return -s0;
    s1 = warp_sum(s1);
    s2 = warp_sum(s2);
    return cosine_from_parts(s0, s1, s2);
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

// The bounded cache of the CPU reference (crates/weft-ggnn/src/cache.rs), one per warp, in
// shared memory: a sorted best list, a sorted bounded queue (each drops its worst entry when
// full) and a FIFO visited ring. A candidate is skipped while its id is in any of the three
// (checked by scanning them). Every member function is called by the whole warp; the lengths
// are warp-uniform registers.
struct Cache {
    float* bd;
    u32* bi;
    u32 bcap, nb;
    float* qd;
    u32* qi;
    u32 qcap, nq;
    u32* vis;
    u32 vcap, nv, vh;

    __device__ void init(u32* smem, u32 best, u32 prioq, u32 visited) {
        bd = reinterpret_cast<float*>(smem);
        bi = smem + best;
        qd = reinterpret_cast<float*>(smem + 2 * best);
        qi = smem + 2 * best + prioq;
        vis = smem + 2 * best + 2 * prioq;
        bcap = best;
        qcap = prioq;
        vcap = visited;
        reset();
    }

    __device__ void reset() { nb = nq = nv = vh = 0; }

    // The worst distance of a full best list, infinity while it is not full.
    __device__ float best_last() const { return nb < bcap ? inf_f32() : bd[bcap - 1]; }

    // The best distance so far (infinity when empty).
    __device__ float best_first() const { return nb > 0 ? bd[0] : inf_f32(); }

    __device__ bool contains(u32 id) const {
        bool f = false;
        for (u32 j = lane_id(); j < nb; j += 32) f |= bi[j] == id;
        for (u32 j = lane_id(); j < nq; j += 32) f |= qi[j] == id;
        for (u32 j = lane_id(); j < nv; j += 32) f |= vis[j] == id;
        return __any_sync(0xffffffffu, f);
    }

    // Inserts (d, id) before equal distances into a sorted list of capacity cap, dropping its
    // worst entry when full; nothing when it would land past the end.
    __device__ static void insert(float* ld, u32* li, u32& len, u32 cap, float d, u32 id) {
        const u32 lane = lane_id();
        u32 pos = 0;
        for (u32 base = 0; base < len; base += 32) {
            const u32 j = base + lane;
            const bool lt = j < len && ld[j] < d;
            pos += __popc(__ballot_sync(0xffffffffu, lt));
        }
        if (pos >= cap) return;
        const u32 newlen = len < cap ? len + 1 : cap;
        // Entries pos..newlen-2 move up by one, the highest chunk first.
        for (int top = (int)newlen - 2; top >= (int)pos; top -= 32) {
            const int j = top - (int)lane;
            const bool act = j >= (int)pos;
            float dv = 0.0f;
            u32 iv = 0;
            if (act) {
                dv = ld[j];
                iv = li[j];
            }
            __syncwarp();
            if (act) {
                ld[j + 1] = dv;
                li[j + 1] = iv;
            }
            __syncwarp();
        }
        if (lane == 0) {
            ld[pos] = d;
            li[pos] = id;
        }
        len = newlen;
        __syncwarp();
    }

    // Into both the best list and the queue.
    __device__ void push(u32 id, float d) {
        insert(bd, bi, nb, bcap, d, id);
        insert(qd, qi, nq, qcap, d, id);
    }

    // The queue's head if its distance is below crit (INVALID otherwise), recorded as visited.
    __device__ u32 pop(float crit) {
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
        if (vcap > 0) {
            if (nv < vcap) {
                if (lane_id() == 0) vis[nv] = id;
                nv += 1;
            } else {
                if (lane_id() == 0) vis[vh] = id;
                vh = (vh + 1) % vcap;
            }
        }
        __syncwarp();
        return id;
    }

    // Moves to the layer below: best ids through down[], the queue reseeded from the best
    // list, the visited ring cleared; distances kept.
    __device__ void transform(const u32* down) {
        for (u32 j = lane_id(); j < nb; j += 32) bi[j] = down[bi[j]];
        __syncwarp();
        nq = nb < qcap ? nb : qcap;
        for (u32 j = lane_id(); j < nq; j += 32) {
            qd[j] = bd[j];
            qi[j] = bi[j];
        }
        nv = 0;
        vh = 0;
        __syncwarp();
    }
};

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
            const float d = dist<T>(q, data + (u64)glob[u] * stride, stride, metric);
            const u32 key = order_key(d);
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

// Merge ltop -> lm for the point of layer lm of this warp (Algorithm 4 of the paper, as
// GgnnCpu::merge): score the S points of its ancestor segment in layer ltop, then for each
// layer li = ltop-1 .. lm map the best list down, reseed the queue, clear the visited ring and
// expand (at most max_pops pops); push the point itself at distance 0 on reaching lm. The row
// is the best k without the point itself.
template <typename T>
__device__ void merge(const T* data, u32 stride, i32 metric, const u32* ids, const u32* glob,
                      const u32* sel, const u32* row_off, u32 k, u32 lm, u32 ltop, u32 n_lm,
                      u32 s0, u32 s0_off, u32 S, u32 levels, float slack, u32 bcap, u32 qcap,
                      u32 vcap, u32 max_pops, u32* out_ids, float* out_nn1) {
    extern __shared__ u32 smem[];
    const u32 warp = threadIdx.x >> 5;
    const u32 v = blockIdx.x * WARPS + warp;
    if (v >= n_lm) return;
    Cache c;
    c.init(smem + warp * (2 * bcap + 2 * qcap + vcap), bcap, qcap, vcap);
    const u32 off_lm = row_off[lm];
    const T* q = data + (u64)glob[off_lm + v] * stride;
    const u32 top_seg = seg_of(v, s0, s0_off) / levels;
    const u32 off_top = row_off[ltop];
    for (u32 e = top_seg * S; e < (top_seg + 1) * S; ++e) {
        const float d = dist<T>(q, data + (u64)glob[off_top + e] * stride, stride, metric);
        if (d < c.best_last() + slack) c.push(e, d);
    }
    for (int li = (int)ltop - 1; li >= (int)lm; --li) {
        c.transform(sel + row_off[li + 1]);
        if ((u32)li == lm && !c.contains(v)) c.push(v, 0.0f);
        const u32 off = row_off[li];
        for (u32 pops = 0; pops < max_pops; ++pops) {
            const u32 a = c.pop(c.best_last() + slack);
            if (a == INVALID) break;
            const u32* row = ids + (u64)(off + a) * k;
            for (u32 j = 0; j < k; ++j) {
                const u32 cand = row[j];
                if (cand == INVALID || cand == a || c.contains(cand)) continue;
                const float d =
                    dist<T>(q, data + (u64)glob[off + cand] * stride, stride, metric);
                if (d < c.best_last() + slack) c.push(cand, d);
            }
        }
    }
    // The row: the best k without v (the best list is warp-uniform shared memory).
    u32 j = 0;
    float nn = 0.0f;
    for (u32 e = 0; e < c.nb; ++e) {
        const u32 id = c.bi[e];
        if (id == v || j >= k) continue;
        if (lane_id() == 0) out_ids[(u64)v * k + j] = id;
        ++j;
        if (nn == 0.0f) nn = real_dist(metric, c.bd[e]);
    }
    for (u32 e = j + lane_id(); e < k; e += 32) out_ids[(u64)v * k + e] = INVALID;
    if (lane_id() == 0) out_nn1[v] = nn;
}

// Symmetric linking of layer l for the point z of this warp (Algorithm 5 with the midpoint
// constraint, as GgnnCpu::sym): for each x_i of z's first half, a short search for z from x_i
// over first halves; when z is not reached, z is offered to the search's best candidates in
// order, and the first with a free slot (an atomic counter below kf) takes it.
template <typename T>
__device__ void sym(const T* data, u32 stride, i32 metric, const u32* ids, const u32* glob,
                    u32 off, u32 n, u32 k, u32 kl, u32 kf, float slack, u32 bcap, u32 qcap,
                    u32 vcap, u32 max_pops, u32* links, u32* link_cnt,
                    unsigned long long* dropped) {
    extern __shared__ u32 smem[];
    const u32 warp = threadIdx.x >> 5;
    const u32 z = blockIdx.x * WARPS + warp;
    if (z >= n) return;
    Cache c;
    c.init(smem + warp * (2 * bcap + 2 * qcap + vcap), bcap, qcap, vcap);
    const T* zq = data + (u64)glob[off + z] * stride;
    for (u32 i = 0; i < kl; ++i) {
        const u32 x = ids[(u64)(off + z) * k + i];
        if (x == INVALID) continue;
        c.reset();
        const T* xr = data + (u64)glob[off + x] * stride;
        c.push(x, dist<T>(zq, xr, stride, metric));
        const float r_m = mid_dist<T>(zq, xr, xr, stride, metric);
        bool connected = false;
        for (u32 pops = 0; pops < max_pops; ++pops) {
            const u32 a = c.pop(c.best_last() + slack);
            if (a == INVALID) break;
            const u32* nn = ids + (u64)(off + a) * k;
            bool has = false;
            for (u32 j = lane_id(); j < kl; j += 32) has |= nn[j] == z;
            if (__any_sync(0xffffffffu, has)) {
                connected = true;
                break;
            }
            for (u32 j = 0; j < kl; ++j) {
                const u32 cand = nn[j];
                if (cand == INVALID || cand == a || c.contains(cand)) continue;
                const T* cr = data + (u64)glob[off + cand] * stride;
                const float dz = dist<T>(zq, cr, stride, metric);
                if (dz >= c.best_first() + slack) continue;
                if (mid_dist<T>(zq, xr, cr, stride, metric) < r_m + slack) c.push(cand, dz);
            }
        }
        if (connected || c.nb == 0) continue;
        if (lane_id() == 0) {
            bool placed = false;
            for (u32 e = 0; e < c.nb && !placed; ++e) {
                const u32 p = c.bi[e];
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
}

}  // namespace ggnn
}  // namespace weft

using namespace weft;

// Weighted upward sampling of layer t + 1 from layer t (one thread per point of layer t).
extern "C" __global__ void ggnn_select(u32 n_t, u32 off_t, u32 off_up, u32 s0, u32 s0_off,
                                       u32 g, u32 S, u32 sg, u32 sg_off, u64 seed, u32 t,
                                       const float* nn1, u32* glob, u32* sel) {
    const u32 v = blockIdx.x * blockDim.x + threadIdx.x;
    if (v >= n_t) return;
    const u32 b = ggnn::seg_of(v, s0, s0_off);
    const u32 start = ggnn::seg_start(b, s0, s0_off);
    const u32 len = ggnn::seg_len(b, s0, s0_off);
    const double scale = 1.0 / 9007199254740992.0;
    double keys_v = 0.0;
    {
        const u64 bits = hash3(seed, (u64)t, (u64)v);
        const double u = ((double)(bits >> 11) + 0.5) * scale;
        keys_v = -log(u) / ((double)nn1[off_t + v] + ggnn::FLT_EPS);
    }
    u32 rank = 0;
    for (u32 w = start; w < start + len; ++w) {
        if (w == v) continue;
        const u64 bits = hash3(seed, (u64)t, (u64)w);
        const double u = ((double)(bits >> 11) + 0.5) * scale;
        const double key = -log(u) / ((double)nn1[off_t + w] + ggnn::FLT_EPS);
        if (key > keys_v || (key == keys_v && w < v)) ++rank;
    }
    const u32 c = b % g;
    const u32 parent = b / g;
    const u32 m = sg + (c < sg_off ? 1u : 0u);
    if (rank < m) {
        const u32 dest = parent * S + c * sg + (c < sg_off ? c : sg_off) + rank;
        sel[off_up + dest] = v;
        glob[off_up + dest] = glob[off_t + v];
    }
}

// Each row's second half after a symmetric-link pass (one thread per row of the layer at
// row offset off): the row's first half, then its links sorted by id, then its previous
// second-half entries, skipping padding, itself and repeats; padding. Into out (layer-local).
extern "C" __global__ void ggnn_sym_rebuild(const u32* ids, u32 off, u32 n, u32 k, u32 kl,
                                            u32 kf, u32* links, const u32* link_cnt, u32* out) {
    const u32 v = blockIdx.x * blockDim.x + threadIdx.x;
    if (v >= n) return;
    const u32* row = ids + (u64)(off + v) * k;
    u32* o = out + (u64)v * k;
    u32* lk = links + (u64)v * kf;
    const u32 cnt = link_cnt[v] < kf ? link_cnt[v] : kf;
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
    for (u32 j = 0; j < kl; ++j) o[j] = row[j];
    u32 j = kl;
    for (u32 e = 0; e < cnt + (k - kl) && j < k; ++e) {
        const u32 c = e < cnt ? lk[e] : row[kl + (e - cnt)];
        if (c == INVALID || c == v) continue;
        bool dup = false;
        for (u32 r = 0; r < j && !dup; ++r) dup = o[r] == c;
        if (dup) continue;
        o[j++] = c;
    }
    for (; j < k; ++j) o[j] = INVALID;
}

// dst[i] = src[i] for i < len.
extern "C" __global__ void ggnn_copy_u32(u32* dst, const u32* src, u64 len) {
    for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < len;
         i += (u64)gridDim.x * blockDim.x)
        dst[i] = src[i];
}

// dst[i] = value for i < len.
extern "C" __global__ void ggnn_fill_u32(u32* dst, u64 len, u32 value) {
    for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < len;
         i += (u64)gridDim.x * blockDim.x)
        dst[i] = value;
}

#define WEFT_GGNN_INSTANTIATE(T, NAME)                                                           \
    extern "C" __global__ void __launch_bounds__(ggnn::WARPS * 32)                               \
        ggnn_top_##NAME(const T* data, u32 stride, i32 metric, const u32* glob, u32 off,         \
                        u32 s0, u32 s0_off, u32 k, u32* ids, float* nn1) {                       \
        ggnn::top<T>(data, stride, metric, glob + off, s0, s0_off, k, ids + (u64)off * k,        \
                     nn1 + off);                                                                 \
    }                                                                                            \
    extern "C" __global__ void __launch_bounds__(ggnn::WARPS * 32) ggnn_merge_##NAME(            \
        const T* data, u32 stride, i32 metric, const u32* ids, const u32* glob, const u32* sel, \
        const u32* row_off, u32 k, u32 lm, u32 ltop, u32 n_lm, u32 s0, u32 s0_off, u32 S,       \
        u32 levels, float slack, u32 bcap, u32 qcap, u32 vcap, u32 max_pops, u32* out_ids,      \
        float* nn1, u32 off_lm) {                                                                \
        ggnn::merge<T>(data, stride, metric, ids, glob, sel, row_off, k, lm, ltop, n_lm, s0,     \
                       s0_off, S, levels, slack, bcap, qcap, vcap, max_pops, out_ids,           \
                       nn1 + off_lm);                                                            \
    }                                                                                            \
    extern "C" __global__ void __launch_bounds__(ggnn::WARPS * 32) ggnn_sym_##NAME(              \
        const T* data, u32 stride, i32 metric, const u32* ids, const u32* glob, u32 off, u32 n, \
        u32 k, u32 kl, u32 kf, float slack, u32 bcap, u32 qcap, u32 vcap, u32 max_pops,         \
        u32* links, u32* link_cnt, unsigned long long* dropped) {                               \
        ggnn::sym<T>(data, stride, metric, ids, glob, off, n, k, kl, kf, slack, bcap, qcap,      \
                     vcap, max_pops, links, link_cnt, dropped);                                  \
    }

WEFT_GGNN_INSTANTIATE(float, f32)
WEFT_GGNN_INSTANTIATE(f16_t, f16)
WEFT_GGNN_INSTANTIATE(u8, u8)
WEFT_GGNN_INSTANTIATE(i8, i8)
