// weft/types.cuh: the scalar types and constants shared with Rust (crates/weft-core).
//
// Self-contained on purpose: no system or CUDA headers, so that NVRTC compiles every module
// without include paths.
#pragma once

namespace weft {

typedef unsigned char u8;
typedef signed char i8;
typedef unsigned short u16;
typedef unsigned int u32;
typedef int i32;
typedef unsigned long long u64;

// A vertex id: the row number of a vector (weft_core::NodeId).
typedef u32 NodeId;

// The id that pads rows shorter than a graph's degree (weft_core::INVALID = u32::MAX).
constexpr NodeId INVALID = 0xffffffffu;

// IEEE-754 single-precision +infinity, without <cmath>.
__device__ __forceinline__ float inf_f32() { return __int_as_float(0x7f800000); }

// An order-preserving map of floats to u32: ordered(a) < ordered(b) whenever a < b, for every
// non-NaN float (negative values, such as inner-product distances, included); -0 maps below +0,
// as in f32::total_cmp.
__device__ __forceinline__ u32 ordered(float f) {
    const u32 b = __float_as_uint(f);
    return (b & 0x80000000u) ? ~b : (b | 0x80000000u);
}

// The inverse of ordered().
__device__ __forceinline__ float from_ordered(u32 key) {
    return __uint_as_float((key & 0x80000000u) ? (key & 0x7fffffffu) : ~key);
}

// The f16 storage type (half::f16 in Rust): raw bits, converted with PTX `cvt`.
struct f16_t {
    u16 bits;
};

// f16 bits -> f32, exact (PTX cvt.f32.f16).
__device__ __forceinline__ float f16_to_f32(u16 h) {
    float f;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
    return f;
}

// f32 -> f16 bits, rounded to nearest even (PTX cvt.rn.f16.f32): half::f16::from_f32 bit for
// bit on every non-NaN value (values of magnitude >= 65520 become infinities).
__device__ __forceinline__ u16 f32_to_f16(float f) {
    u16 h;
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
    return h;
}

// Metric codes: the same as weft_core::Metric::code().
enum MetricCode : i32 { METRIC_L2 = 0, METRIC_IP = 1, METRIC_COSINE = 2 };

// A kernel argument struct's element data (declared as bytes, `const u8*`) as elements of the
// kernel's element type.
template <typename T>
__device__ __forceinline__ const T* as_elements(const u8* p) {
    return reinterpret_cast<const T*>(p);
}

// Ceil division.
__host__ __device__ __forceinline__ u32 div_up(u32 a, u32 b) { return (a + b - 1) / b; }

}  // namespace weft
