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

// A uniform value in [0, n) from 64 random bits (multiply-shift).
__host__ __device__ __forceinline__ u64 below(u64 bits, u64 n) { return ((bits >> 32) * n) >> 32; }

}  // namespace weft
