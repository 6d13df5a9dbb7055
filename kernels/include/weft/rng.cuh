// weft/rng.cuh: the stateless counter-based generator of weft_core::rng, bit for bit.
//
// mix64 is SplitMix64's output function (Stafford variant 13); hash3(seed, a, b) and
// below(bits, n) are weft_core::rng::hash3 and weft_core::rng::below. Unsigned 64-bit
// arithmetic wraps in C++ exactly as Rust's wrapping_mul / wrapping_add.
#pragma once
#include "weft/types.cuh"

namespace weft {

__host__ __device__ __forceinline__ u64 mix64(u64 z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

__host__ __device__ __forceinline__ u64 hash3(u64 seed, u64 a, u64 b) {
    return mix64(mix64(mix64(seed ^ 0x9e3779b97f4a7c15ull) + a) + b);
}

// A uniform value in [0, n) from 64 random bits (multiply-shift); 0 when n = 0.
__host__ __device__ __forceinline__ u64 below(u64 bits, u64 n) { return ((bits >> 32) * n) >> 32; }

// A random step coprime to m (m >= 1) from 64 random bits: below(bits, m) (1 in place of 0),
// or the first value after it (wrapping from m - 1 to 1) coprime to m, within 64 tries; 1 when
// none is found, and for m <= 1.
__host__ __device__ __forceinline__ u32 coprime_step(u64 bits, u32 m) {
    if (m <= 1) return 1;
    u32 g = (u32)below(bits, m);
    if (g == 0) g = 1;
    for (u32 tries = 0; tries < 64; ++tries) {
        u32 a = g, b = m;
        while (b != 0) {
            const u32 t = a % b;
            a = b;
            b = t;
        }
        if (a == 1) return g;
        g = g + 1 < m ? g + 1 : 1;
    }
    return 1;
}

// Distinct random offsets in [0, m): at(j) = (o + j g) mod m with g coprime to m, so at(0),
// ..., at(m - 1) are a permutation of [0, m) (random starts of GNND and GRNND: the first few
// neighbours of a vertex without repeats or a set). From the hashed key h of the vertex:
// o = below(h, m), g = coprime_step(mix64(h ^ 0x5bd1e995), m). at() needs m >= 1.
struct AffineWalk {
    u32 o, g, m;

    __host__ __device__ __forceinline__ AffineWalk(u64 h, u32 m_)
        : o((u32)below(h, m_)), g(coprime_step(mix64(h ^ 0x5bd1e995ull), m_)), m(m_) {}

    // The j-th offset.
    __host__ __device__ __forceinline__ u32 at(u32 j) const {
        return (u32)(((u64)o + (u64)j * g) % m);
    }
};

}  // namespace weft
