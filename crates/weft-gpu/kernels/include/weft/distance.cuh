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
