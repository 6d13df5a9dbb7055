// exact/exact.cu: brute-force k-NN.
//
// Pipeline (crates/weft-exact/src/gpu/exact.rs drives it):
//   1. exact_norms_<dtype>: squared norms of the query and base rows (L2 and cosine);
//   2. exact_distances_<dtype>: a tile of (queries x base rows) distances into a buffer, by
//      128 x 128 block tiles, 8 x 8 per thread, 16 dimensions at a time through shared memory;
//   3. exact_select_f32: one block per query folds a row of that buffer into the query's running
//      top-K list (threshold filter into a shared-memory buffer, bitonic sort when it fills).
#include "weft/distance.cuh"
#include "weft/topk.cuh"
#include "weft/types.cuh"
#include "args.cuh"

namespace weft {
namespace exact {

constexpr u32 NORM_WARPS = 8;  // rows (one per warp) per block of exact_norms
constexpr u32 TM = 8;          // outputs per thread along each axis
constexpr u32 TQ = 16 * TM;    // queries per block tile
constexpr u32 TB = 16 * TM;    // base rows per block tile
constexpr u32 DK = 16;         // dimensions per shared-memory stage
constexpr u32 PAD = 4;         // shared-memory row padding (floats)
constexpr u32 SELECT_THREADS = 256;

template <typename T>
__device__ __forceinline__ void norms(const T* __restrict__ x, u32 rows, u32 stride,
                                      float* __restrict__ out) {
    const u32 row = blockIdx.x * NORM_WARPS + threadIdx.x / 32;
    if (row >= rows) return;
    const float s = warp_sq_norm<T>(x + (u64)row * stride, stride);
    if ((threadIdx.x & 31u) == 0) out[row] = s;
}

// Loads rows [row0, row0 + 128) x dims [k0, k0 + DK) of `x` (rows beyond `rows` as zeros) into
// `tile[DK][128 + PAD]` as f32, transposed, with 16-byte loads.
template <typename T>
__device__ __forceinline__ void load_tile(const T* __restrict__ x, u32 rows, u32 stride, u32 row0,
                                          u32 k0, float (*tile)[TQ + PAD]) {
    constexpr u32 P = Elem<T>::PER_VEC;
    constexpr u32 VPR = DK / P;  // 16-byte vectors per row and stage
    for (u32 v = threadIdx.x; v < TQ * VPR; v += 256) {
        const u32 r = v / VPR;
        const u32 c = v % VPR;
        float vals[P];
        if (row0 + r < rows) {
            const uint4 raw =
                *reinterpret_cast<const uint4*>(x + (u64)(row0 + r) * stride + k0 + c * P);
            Elem<T>::unpack(raw, vals);
        } else {
#pragma unroll
            for (u32 e = 0; e < P; ++e) vals[e] = 0.0f;
        }
#pragma unroll
        for (u32 e = 0; e < P; ++e) tile[c * P + e][r] = vals[e];
    }
}

template <typename T>
__device__ __forceinline__ void distances(const T* __restrict__ q, u32 nq,
                                          const T* __restrict__ b, u32 nb, u32 stride,
                                          const float* __restrict__ qnorm,
                                          const float* __restrict__ bnorm, i32 metric,
                                          float* __restrict__ out, u32 ldo) {
    __shared__ __align__(16) float qs[DK][TQ + PAD];
    __shared__ __align__(16) float bs[DK][TB + PAD];
    const u32 tx = threadIdx.x % 16;
    const u32 ty = threadIdx.x / 16;
    const u32 q0 = blockIdx.y * TQ;
    const u32 b0 = blockIdx.x * TB;
    // Thread (tx, ty) owns queries ty*4 + {0..3} and 64 + ty*4 + {0..3} of the tile, and base
    // rows likewise with tx: 16-byte shared-memory reads, conflict-free across each 8 threads.
    float acc[TM][TM];
#pragma unroll
    for (u32 i = 0; i < TM; ++i)
#pragma unroll
        for (u32 j = 0; j < TM; ++j) acc[i][j] = 0.0f;

    for (u32 k0 = 0; k0 < stride; k0 += DK) {
        load_tile<T>(q, nq, stride, q0, k0, qs);
        load_tile<T>(b, nb, stride, b0, k0, bs);
        __syncthreads();
#pragma unroll
        for (u32 kk = 0; kk < DK; ++kk) {
            const float4 a0 = *reinterpret_cast<const float4*>(&qs[kk][ty * 4]);
            const float4 a1 = *reinterpret_cast<const float4*>(&qs[kk][64 + ty * 4]);
            const float4 c0 = *reinterpret_cast<const float4*>(&bs[kk][tx * 4]);
            const float4 c1 = *reinterpret_cast<const float4*>(&bs[kk][64 + tx * 4]);
            const float a[TM] = {a0.x, a0.y, a0.z, a0.w, a1.x, a1.y, a1.z, a1.w};
            const float c[TM] = {c0.x, c0.y, c0.z, c0.w, c1.x, c1.y, c1.z, c1.w};
#pragma unroll
            for (u32 i = 0; i < TM; ++i)
#pragma unroll
                for (u32 j = 0; j < TM; ++j) acc[i][j] = fmaf(a[i], c[j], acc[i][j]);
        }
        __syncthreads();
    }

#pragma unroll
    for (u32 i = 0; i < TM; ++i) {
        const u32 qi = q0 + (i < 4 ? ty * 4 + i : 64 + ty * 4 + (i - 4));
        if (qi >= nq) continue;
        const float nqi = metric == METRIC_IP ? 0.0f : qnorm[qi];
        float* orow = out + (u64)qi * ldo;
#pragma unroll
        for (u32 h = 0; h < 2; ++h) {
            const u32 bj = b0 + h * 64 + tx * 4;
            float d[4];
#pragma unroll
            for (u32 e = 0; e < 4; ++e) {
                const float nbj = (metric == METRIC_IP || bj + e >= nb) ? 0.0f : bnorm[bj + e];
                d[e] = distance_from_dot(metric, acc[i][h * 4 + e], nqi, nbj);
            }
            if (bj + 3 < nb && (ldo % 4) == 0) {
                *reinterpret_cast<float4*>(orow + bj) = make_float4(d[0], d[1], d[2], d[3]);
            } else {
#pragma unroll
                for (u32 e = 0; e < 4; ++e)
                    if (bj + e < nb) orow[bj + e] = d[e];
            }
        }
    }
}

// Merges the candidates in slots [K, K + count) into the sorted top-K list in slots [0, K):
// sorts the smallest power-of-two prefix that holds both (at most S slots), padding it with
// (INFINITY, INVALID).
__device__ __forceinline__ void flush(float* sd, u32* si, u32 K, u32 S, u32 count) {
    const u32 used = K + count;
    u32 n = K;
    while (n < used) n <<= 1;
    n = n < S ? n : S;
    for (u32 i = used + threadIdx.x; i < n; i += blockDim.x) {
        sd[i] = inf_f32();
        si[i] = INVALID;
    }
    block_bitonic_sort(sd, si, n);
}

}  // namespace exact
}  // namespace weft

using namespace weft;

#define WEFT_EXACT_INSTANTIATE(T, NAME)                                                          \
    extern "C" __global__ void __launch_bounds__(exact::NORM_WARPS * 32)                         \
        exact_norms_##NAME(const __grid_constant__ ExactNormsArgs a) {                           \
        exact::norms<T>(as_elements<T>(a.x), a.rows, a.stride, a.out);                           \
    }                                                                                            \
    extern "C" __global__ void __launch_bounds__(256)                                            \
        exact_distances_##NAME(const __grid_constant__ ExactDistancesArgs a) {                   \
        exact::distances<T>(as_elements<T>(a.q), a.nq, as_elements<T>(a.b), a.nb, a.stride,      \
                            a.qnorm, a.bnorm, a.metric, a.out, a.ldo);                           \
    }

WEFT_EXACT_INSTANTIATE(float, f32)
WEFT_EXACT_INSTANTIATE(f16_t, f16)
WEFT_EXACT_INSTANTIATE(u8, u8)
WEFT_EXACT_INSTANTIATE(i8, i8)

// Folds row q of `dist` (`ncols` distances of base rows base_offset.., `ldd` apart) into query
// q's running list top_d/top_i (`list` = K sorted pairs, a power of two >= k). Candidates that beat the
// k-th best so far go to a shared-memory buffer; when it could overflow, the list and the buffer
// are sorted together and the best K kept. With exclude_self, base id query_offset + q is
// skipped (k-NN graphs). Launch: grid = queries, block = SELECT_THREADS, dynamic shared memory =
// `slots` = S * 8 bytes, S a power of two >= K + 4 * SELECT_THREADS.
extern "C" __global__ void __launch_bounds__(exact::SELECT_THREADS)
    exact_select_f32(const __grid_constant__ ExactSelectF32Args a) {
    const float* __restrict__ dist = a.dist;
    float* __restrict__ top_d = a.top_d;
    u32* __restrict__ top_i = a.top_i;
    const u32 ldd = a.ldd, ncols = a.ncols, k = a.k;
    const u32 K = a.list;
    const u32 S = a.slots;
    extern __shared__ float4 smem4[];
    float* sd = reinterpret_cast<float*>(smem4);
    u32* si = reinterpret_cast<u32*>(sd + S);
    __shared__ u32 count;
    __shared__ float thr;

    const u32 q = blockIdx.x;
    const u32 tid = threadIdx.x;
    float* td = top_d + (u64)q * K;
    u32* ti = top_i + (u64)q * K;
    for (u32 i = tid; i < K; i += blockDim.x) {
        sd[i] = td[i];
        si[i] = ti[i];
    }
    if (tid == 0) {
        count = 0;
        thr = td[k - 1];
    }
    __syncthreads();

    const u32 skip = a.exclude_self ? a.query_offset + q : INVALID;
    const float* row = dist + (u64)q * ldd;
    const u32 per_round = 4 * blockDim.x;
    const u32 cap = S - K;
    const bool vec_ok = (ldd % 4) == 0;
    for (u32 r0 = 0; r0 < ncols; r0 += per_round) {
        const u32 j0 = r0 + 4 * tid;
        float v[4];
        if (vec_ok && j0 + 3 < ncols) {
            const float4 f = *reinterpret_cast<const float4*>(row + j0);
            v[0] = f.x;
            v[1] = f.y;
            v[2] = f.z;
            v[3] = f.w;
        } else {
#pragma unroll
            for (u32 e = 0; e < 4; ++e) v[e] = j0 + e < ncols ? row[j0 + e] : inf_f32();
        }
        const float t = thr;
#pragma unroll
        for (u32 e = 0; e < 4; ++e) {
            const u32 id = a.base_offset + j0 + e;
            if (j0 + e < ncols && v[e] <= t && id != skip) {
                const u32 pos = atomicAdd(&count, 1u);
                sd[K + pos] = v[e];
                si[K + pos] = id;
            }
        }
        __syncthreads();
        const u32 c = count;
        __syncthreads();
        if (c + per_round > cap) {
            exact::flush(sd, si, K, S, c);
            if (tid == 0) {
                count = 0;
                thr = sd[k - 1];
            }
            __syncthreads();
        }
    }
    const u32 c = count;
    if (c > 0) exact::flush(sd, si, K, S, c);
    for (u32 i = tid; i < K; i += blockDim.x) {
        td[i] = sd[i];
        ti[i] = si[i];
    }
}
