// weft/distance.cuh: element access with 16-byte loads, and distances per metric.
//
// Device matrices (weft_gpu::DeviceMatrix) store rows `stride` elements apart, with `stride` a
// multiple of 16 elements and the padding zeroed; rows start 16-byte aligned. So every row can be
// read in whole 16-byte vectors, and zero padding changes no dot product or norm.
#pragma once
#include "weft/types.cuh"

namespace weft {

// Per element type: how many elements one 16-byte vector holds, and how to widen them to f32.
template <typename T>
struct Elem;

template <>
struct Elem<float> {
    static constexpr int PER_VEC = 4;
    __device__ __forceinline__ static void unpack(const uint4& v, float* out) {
        out[0] = __uint_as_float(v.x);
        out[1] = __uint_as_float(v.y);
        out[2] = __uint_as_float(v.z);
        out[3] = __uint_as_float(v.w);
    }
};

template <>
struct Elem<f16_t> {
    static constexpr int PER_VEC = 8;
    __device__ __forceinline__ static void unpack(const uint4& v, float* out) {
        const u32 w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            out[2 * i] = f16_to_f32((u16)(w[i] & 0xffffu));
            out[2 * i + 1] = f16_to_f32((u16)(w[i] >> 16));
        }
    }
};

template <>
struct Elem<u8> {
    static constexpr int PER_VEC = 16;
    __device__ __forceinline__ static void unpack(const uint4& v, float* out) {
        const u32 w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
        for (int i = 0; i < 16; ++i) out[i] = (float)((w[i / 4] >> (8 * (i % 4))) & 0xffu);
    }
};

template <>
struct Elem<i8> {
    static constexpr int PER_VEC = 16;
    __device__ __forceinline__ static void unpack(const uint4& v, float* out) {
        const u32 w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
        for (int i = 0; i < 16; ++i) out[i] = (float)(i8)((w[i / 4] >> (8 * (i % 4))) & 0xffu);
    }
};

// Cosine distance from a dot product and two squared norms: weft_core::distance::cosine_from_parts.
__device__ __forceinline__ float cosine_from_parts(float dot, float na, float nb) {
    const float denom = sqrtf(na * nb);
    return denom > 0.0f ? 1.0f - dot / denom : 1.0f;
}

// The distance from a dot product and squared norms (L2 by expansion, clamped at 0).
__device__ __forceinline__ float distance_from_dot(i32 metric, float dot, float na, float nb) {
    if (metric == METRIC_L2) return fmaxf(na + nb - 2.0f * dot, 0.0f);
    if (metric == METRIC_IP) return -dot;
    return cosine_from_parts(dot, na, nb);
}

// The sum of `s` over the 32 lanes of a full warp (xor butterfly); every lane returns it.
__device__ __forceinline__ float warp_sum(float s) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
    return s;
}

// One warp computes the distance between rows `a` and `b` (`stride` elements, a multiple of 16,
// zero-padded, 16-byte aligned) with 16-byte loads; every lane returns the result. Only the sums
// the metric needs are accumulated (L2: sum (a-b)^2; otherwise a.b, |a|^2, |b|^2), each lane's
// share in order with fused multiply-adds, then summed with warp_sum.
template <typename T>
__device__ __forceinline__ float warp_distance(const T* a, const T* b, u32 stride, i32 metric) {
    constexpr int P = Elem<T>::PER_VEC;
    const u32 lane = threadIdx.x & 31u;
    const uint4* va = reinterpret_cast<const uint4*>(a);
    const uint4* vb = reinterpret_cast<const uint4*>(b);
    const u32 nvec = stride / P;
    float s0 = 0.0f, s1 = 0.0f, s2 = 0.0f;
    if (metric == METRIC_L2) {
        for (u32 v = lane; v < nvec; v += 32) {
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
    for (u32 v = lane; v < nvec; v += 32) {
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

// The block's threads widen a row of `nvec` 16-byte vectors of T into f32 `out` (blockDim-strided;
// the caller synchronises before reading `out`).
template <typename T>
__device__ __forceinline__ void block_widen_row(const uint4* row, u32 nvec, float* out) {
    constexpr u32 P = Elem<T>::PER_VEC;
    for (u32 v = threadIdx.x; v < nvec; v += blockDim.x) {
        float x[P];
        Elem<T>::unpack(row[v], x);
#pragma unroll
        for (u32 i = 0; i < P; ++i) out[v * P + i] = x[i];
    }
}

// One full warp computes the sum of squares of `len` f32 values (each lane's share in order with
// fused multiply-adds, then warp_sum); every lane returns it.
__device__ __forceinline__ float warp_sq_norm_f32(const float* v, u32 len) {
    float s = 0.0f;
    for (u32 i = threadIdx.x & 31u; i < len; i += 32) s = fmaf(v[i], v[i], s);
    return warp_sum(s);
}

// 16-byte loads one lane of a team issues together in team_query_distance.
constexpr u32 TEAM_LOADS = 4;

// This lane's share of team_query_distance's sums: L2 (`L2` true) sum (q-x)^2 into s0; else q.x
// into s0 and |x|^2 into s1. Lane `team_lane` reads vectors team_lane, team_lane + team, ...,
// TEAM_LOADS of them in flight before any arithmetic.
template <typename T, bool L2>
__device__ __forceinline__ void team_lane_sums(const uint4* row, const float* qv, u32 nvec, u32 team, u32 team_lane,
                                               float& s0, float& s1) {
    constexpr u32 P = Elem<T>::PER_VEC;
    for (u32 v0 = team_lane; v0 < nvec; v0 += team * TEAM_LOADS) {
        uint4 r[TEAM_LOADS];
#pragma unroll
        for (u32 j = 0; j < TEAM_LOADS; ++j) {
            const u32 v = v0 + j * team;
            r[j] = v < nvec ? row[v] : make_uint4(0u, 0u, 0u, 0u);
        }
#pragma unroll
        for (u32 j = 0; j < TEAM_LOADS; ++j) {
            const u32 v = v0 + j * team;
            if (v >= nvec) break;
            float x[P];
            Elem<T>::unpack(r[j], x);
#pragma unroll
            for (u32 i = 0; i < P; ++i) {
                if (L2) {
                    const float d = qv[v * P + i] - x[i];
                    s0 = fmaf(d, d, s0);
                } else {
                    s0 = fmaf(qv[v * P + i], x[i], s0);
                    s1 = fmaf(x[i], x[i], s1);
                }
            }
        }
    }
}

// One team of `team` lanes (a power of two, at most 32, teams aligned within the warp; `team_lane`
// the lane's index in its team) computes the distance between a query, held as f32 in shared
// memory (`qv`, `nvec * PER_VEC` values; `qnorm` its squared norm, for cosine), and the row `row`
// of `nvec` 16-byte vectors of T; a team without a candidate passes `row = nullptr` and takes part
// with zeros. Every lane of the warp must call it: the reduction shuffles over the whole warp.
// Each lane issues TEAM_LOADS loads before any arithmetic (the searches that use it are bound by
// memory latency, so the loads of a row must overlap) and accumulates only the sums the metric
// needs, with fused multiply-adds in element order; every lane of the team returns the distance.
template <typename T>
__device__ __forceinline__ float team_query_distance(const uint4* row, const float* qv, u32 nvec, u32 team,
                                                     u32 team_lane, i32 metric, float qnorm) {
    float s0 = 0.0f, s1 = 0.0f;
    if (row != nullptr) {
        if (metric == METRIC_L2)
            team_lane_sums<T, true>(row, qv, nvec, team, team_lane, s0, s1);
        else
            team_lane_sums<T, false>(row, qv, nvec, team, team_lane, s0, s1);
    }
    for (u32 o = team >> 1; o > 0; o >>= 1) s0 += __shfl_xor_sync(0xffffffffu, s0, o);
    if (metric == METRIC_L2) return s0;
    if (metric == METRIC_IP) return -s0;
    for (u32 o = team >> 1; o > 0; o >>= 1) s1 += __shfl_xor_sync(0xffffffffu, s1, o);
    return cosine_from_parts(s0, qnorm, s1);
}

// One warp computes |row|^2 (f32 accumulation); every lane returns it.
template <typename T>
__device__ __forceinline__ float warp_sq_norm(const T* row, u32 stride) {
    constexpr int P = Elem<T>::PER_VEC;
    const u32 lane = threadIdx.x & 31u;
    const uint4* v = reinterpret_cast<const uint4*>(row);
    float s = 0.0f;
    for (u32 i = lane; i < stride / P; i += 32) {
        float x[P];
        Elem<T>::unpack(v[i], x);
#pragma unroll
        for (int j = 0; j < P; ++j) s = fmaf(x[j], x[j], s);
    }
    return warp_sum(s);
}

}  // namespace weft
