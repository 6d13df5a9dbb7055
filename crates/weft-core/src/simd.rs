//! The CPU distance kernels, one set per element type and instruction set.
//!
//! Each kernel is written once as a plain loop over fixed-width chunks with independent
//! accumulators, so that the compiler turns it into SIMD code, and is compiled several times:
//! for AVX-512, for AVX2 + FMA (both x86_64, chosen at run time) and for the baseline target.
//! [`Element::kernels`](crate::Element::kernels) returns the best set for the running CPU
//! ([`KernelSet`]); [`crate::distance::DistanceFn`] calls them. Nothing here depends on the
//! element trait: the sets are made per concrete type.

use half::f16;

/// Accumulator width of the main loop: 64 lanes = 4 AVX-512 or 8 AVX2 registers, enough
/// independent chains to cover the FMA latency.
const LANES: usize = 64;
/// Width of the second loop that handles what is left below [`LANES`].
const TAIL: usize = 16;

/// The instruction set a [`KernelSet`] was compiled for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Isa {
    /// x86_64 with AVX-512F (+ AVX2, FMA, F16C).
    Avx512,
    /// x86_64 with AVX2, FMA and F16C.
    Avx2,
    /// The compilation target's baseline (SSE2 on x86_64, NEON on aarch64, ...).
    Baseline,
}

impl Isa {
    /// A short name for reports.
    pub fn name(self) -> &'static str {
        match self {
            Isa::Avx512 => "avx512",
            Isa::Avx2 => "avx2+fma",
            Isa::Baseline => "baseline",
        }
    }
}

/// A kernel returning `(a.b, |a|^2, |b|^2)`.
pub type DotNormsFn<T> = fn(&[T], &[T]) -> (f32, f32, f32);

/// The raw kernels for one element type.
pub struct KernelSet<T> {
    /// Squared Euclidean distance.
    pub l2: fn(&[T], &[T]) -> f32,
    /// Dot product.
    pub dot: fn(&[T], &[T]) -> f32,
    /// `(a.b, |a|^2, |b|^2)` in one pass.
    pub dot_norms: DotNormsFn<T>,
    /// Squared Euclidean distances from one query to four rows, the query loaded once per chunk.
    pub l2_x4: fn(&[T], [&[T]; 4]) -> [f32; 4],
    /// Dot products of one query with four rows.
    pub dot_x4: fn(&[T], [&[T]; 4]) -> [f32; 4],
    /// The instruction set these were compiled for.
    pub isa: Isa,
}

impl<T> Clone for KernelSet<T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for KernelSet<T> {}

impl<T> std::fmt::Debug for KernelSet<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KernelSet").field("isa", &self.isa).finish()
    }
}

/// Four pair calls: the x4 kernel of element types without a dedicated one.
fn x4_by_pairs<T>(f: fn(&[T], &[T]) -> f32, q: &[T], rows: [&[T]; 4]) -> [f32; 4] {
    rows.map(|r| f(q, r))
}

// ---------------------------------------------------------------------------------------------
// Loop bodies. Each is `#[inline(always)]` and generic over the features it may use, so that the
// per-ISA wrappers below compile it with those features enabled.

#[inline(always)]
fn madd<const FMA: bool>(a: f32, b: f32, c: f32) -> f32 {
    if FMA { a.mul_add(b, c) } else { a * b + c }
}

#[inline(always)]
fn fold<const W: usize>(mut acc: [f32; W]) -> f32 {
    let mut w = W;
    while w > 1 {
        w /= 2;
        for j in 0..w {
            acc[j] += acc[j + w];
        }
    }
    acc[0]
}

#[inline(always)]
fn window<T, const W: usize>(s: &[T], at: usize) -> &[T; W] {
    s[at..at + W].try_into().expect("window within bounds")
}

#[inline(always)]
fn l2_step<const FMA: bool, const W: usize>(acc: &mut [f32; W], x: &[f32; W], y: &[f32; W]) {
    for j in 0..W {
        let d = x[j] - y[j];
        acc[j] = madd::<FMA>(d, d, acc[j]);
    }
}

#[inline(always)]
fn dot_step<const FMA: bool, const W: usize>(acc: &mut [f32; W], x: &[f32; W], y: &[f32; W]) {
    for j in 0..W {
        acc[j] = madd::<FMA>(x[j], y[j], acc[j]);
    }
}

#[inline(always)]
fn dot_norms_step<const FMA: bool, const W: usize>(
    acc: &mut [[f32; W]; 3],
    x: &[f32; W],
    y: &[f32; W],
) {
    for j in 0..W {
        acc[0][j] = madd::<FMA>(x[j], y[j], acc[0][j]);
        acc[1][j] = madd::<FMA>(x[j], x[j], acc[1][j]);
        acc[2][j] = madd::<FMA>(y[j], y[j], acc[2][j]);
    }
}

#[inline(always)]
fn l2_f32_body<const FMA: bool>(a: &[f32], b: &[f32]) -> f32 {
    let n = a.len().min(b.len());
    let mut acc = [0f32; LANES];
    let mut i = 0;
    while i + LANES <= n {
        l2_step::<FMA, LANES>(&mut acc, window(a, i), window(b, i));
        i += LANES;
    }
    let mut acc_t = [0f32; TAIL];
    while i + TAIL <= n {
        l2_step::<FMA, TAIL>(&mut acc_t, window(a, i), window(b, i));
        i += TAIL;
    }
    let mut s = fold(acc) + fold(acc_t);
    while i < n {
        let d = a[i] - b[i];
        s = madd::<FMA>(d, d, s);
        i += 1;
    }
    s
}

#[inline(always)]
fn dot_f32_body<const FMA: bool>(a: &[f32], b: &[f32]) -> f32 {
    let n = a.len().min(b.len());
    let mut acc = [0f32; LANES];
    let mut i = 0;
    while i + LANES <= n {
        dot_step::<FMA, LANES>(&mut acc, window(a, i), window(b, i));
        i += LANES;
    }
    let mut acc_t = [0f32; TAIL];
    while i + TAIL <= n {
        dot_step::<FMA, TAIL>(&mut acc_t, window(a, i), window(b, i));
        i += TAIL;
    }
    let mut s = fold(acc) + fold(acc_t);
    while i < n {
        s = madd::<FMA>(a[i], b[i], s);
        i += 1;
    }
    s
}

#[inline(always)]
fn dot_norms_f32_body<const FMA: bool>(a: &[f32], b: &[f32]) -> (f32, f32, f32) {
    let n = a.len().min(b.len());
    let mut acc = [[0f32; TAIL]; 3];
    let mut i = 0;
    while i + TAIL <= n {
        dot_norms_step::<FMA, TAIL>(&mut acc, window(a, i), window(b, i));
        i += TAIL;
    }
    let [d, na, nb] = acc;
    let (mut d, mut na, mut nb) = (fold(d), fold(na), fold(nb));
    while i < n {
        d = madd::<FMA>(a[i], b[i], d);
        na = madd::<FMA>(a[i], a[i], na);
        nb = madd::<FMA>(b[i], b[i], nb);
        i += 1;
    }
    (d, na, nb)
}

/// Converts IEEE half bits to f32 without branches the vectoriser cannot handle
/// (exact for normals, subnormals, infinities and NaN).
#[inline(always)]
fn f16_bits_to_f32(h: u16) -> f32 {
    const SHIFTED_EXP: u32 = 0x7c00 << 13;
    let h = h as u32;
    let mut o = (h & 0x7fff) << 13;
    let exp = SHIFTED_EXP & o;
    o += (127 - 15) << 23;
    let o = if exp == SHIFTED_EXP {
        o + ((128 - 16) << 23)
    } else if exp == 0 {
        (f32::from_bits(o + (1 << 23)) - f32::from_bits(113 << 23)).to_bits()
    } else {
        o
    };
    f32::from_bits(o | ((h & 0x8000) << 16))
}

/// Converts `src` (at most `W` halves) into `dst`, zero-filling the rest of `dst`.
#[inline(always)]
fn f16_chunk<const F16C: bool, const W: usize>(src: &[f16], dst: &mut [f32; W]) {
    #[cfg(target_arch = "x86_64")]
    if F16C && src.len() == W && W.is_multiple_of(8) {
        use std::arch::x86_64::{__m128i, _mm_loadu_si128, _mm256_cvtph_ps, _mm256_storeu_ps};
        for c in 0..W / 8 {
            // SAFETY: F16C is only true inside functions compiled with `f16c` enabled, which are
            // only called after run-time detection; the loads and stores stay inside `src` and
            // `dst` (8 halves = 16 bytes in, 8 floats out).
            unsafe {
                let v = _mm_loadu_si128(src.as_ptr().add(c * 8) as *const __m128i);
                _mm256_storeu_ps(dst.as_mut_ptr().add(c * 8), _mm256_cvtph_ps(v));
            }
        }
        return;
    }
    for j in 0..W {
        dst[j] = if j < src.len() {
            f16_bits_to_f32(src[j].to_bits())
        } else {
            0.0
        };
    }
}

/// Runs `step` over `a` and `b` converted to f32 in chunks of [`TAIL`]; the last chunk is
/// zero-padded, which adds nothing to a squared difference, a dot product or a norm.
#[inline(always)]
fn f16_drive<const F16C: bool, A>(
    a: &[f16],
    b: &[f16],
    acc: &mut A,
    step: impl Fn(&mut A, &[f32; TAIL], &[f32; TAIL]),
) {
    let n = a.len().min(b.len());
    let mut x = [0f32; TAIL];
    let mut y = [0f32; TAIL];
    let mut i = 0;
    while i < n {
        let end = (i + TAIL).min(n);
        f16_chunk::<F16C, TAIL>(&a[i..end], &mut x);
        f16_chunk::<F16C, TAIL>(&b[i..end], &mut y);
        step(acc, &x, &y);
        i = end;
    }
}

#[inline(always)]
fn l2_f16_body<const FMA: bool, const F16C: bool>(a: &[f16], b: &[f16]) -> f32 {
    let mut acc = [0f32; TAIL];
    f16_drive::<F16C, _>(a, b, &mut acc, l2_step::<FMA, TAIL>);
    fold(acc)
}

#[inline(always)]
fn dot_f16_body<const FMA: bool, const F16C: bool>(a: &[f16], b: &[f16]) -> f32 {
    let mut acc = [0f32; TAIL];
    f16_drive::<F16C, _>(a, b, &mut acc, dot_step::<FMA, TAIL>);
    fold(acc)
}

#[inline(always)]
fn dot_norms_f16_body<const FMA: bool, const F16C: bool>(a: &[f16], b: &[f16]) -> (f32, f32, f32) {
    let mut acc = [[0f32; TAIL]; 3];
    f16_drive::<F16C, _>(a, b, &mut acc, |acc, x, y| {
        dot_norms_step::<FMA, TAIL>(acc, x, y)
    });
    let [d, na, nb] = acc;
    (fold(d), fold(na), fold(nb))
}

/// Byte elements widen to i32; sums stay exact in i32 lanes up to millions of dimensions.
trait Byte: Copy {
    fn widen(self) -> i32;
}
impl Byte for u8 {
    #[inline(always)]
    fn widen(self) -> i32 {
        self as i32
    }
}
impl Byte for i8 {
    #[inline(always)]
    fn widen(self) -> i32 {
        self as i32
    }
}

#[inline(always)]
fn int_body<B: Byte, const OP: u8>(a: &[B], b: &[B]) -> [i64; 3] {
    // OP: 0 = squared difference, 1 = dot, 2 = dot and both norms.
    let n = a.len().min(b.len());
    let mut acc = [[0i32; LANES]; 3];
    let mut i = 0;
    while i + LANES <= n {
        let x: &[B; LANES] = window(a, i);
        let y: &[B; LANES] = window(b, i);
        for j in 0..LANES {
            let (p, q) = (x[j].widen(), y[j].widen());
            match OP {
                0 => acc[0][j] += (p - q) * (p - q),
                1 => acc[0][j] += p * q,
                _ => {
                    acc[0][j] += p * q;
                    acc[1][j] += p * p;
                    acc[2][j] += q * q;
                }
            }
        }
        i += LANES;
    }
    let mut out = [0i64; 3];
    for (o, lane) in out.iter_mut().zip(acc.iter()) {
        *o = lane.iter().map(|&v| v as i64).sum();
    }
    while i < n {
        let (p, q) = (a[i].widen() as i64, b[i].widen() as i64);
        match OP {
            0 => out[0] += (p - q) * (p - q),
            1 => out[0] += p * q,
            _ => {
                out[0] += p * q;
                out[1] += p * p;
                out[2] += q * q;
            }
        }
        i += 1;
    }
    out
}

// ---------------------------------------------------------------------------------------------
// Per-ISA entry points.

/// One safe entry point: the body compiled with `$features` enabled, behind a wrapper.
macro_rules! tf_entry {
    ($features:literal, $name:ident, $inner:ident, ($($arg:ident : $ty:ty),*) -> $ret:ty, $body:expr) => {
        #[target_feature(enable = $features)]
        fn $inner($($arg: $ty),*) -> $ret {
            $body
        }
        pub(super) fn $name($($arg: $ty),*) -> $ret {
            // SAFETY: these entry points are only handed out by `super::*_kernels` after
            // run-time detection of every feature in `$features`.
            unsafe { $inner($($arg),*) }
        }
    };
}

/// Declares, for one instruction set, the safe entry points of every kernel. The bodies are the
/// generic functions above, compiled with `$features` enabled.
macro_rules! isa_module {
    ($module:ident, $features:literal, $fma:literal, $f16c:literal) => {
        // The generic f32 bodies of the x86 sets are superseded by `f32_x86` but stay compiled,
        // so tests can compare the two.
        #[allow(dead_code)]
        mod $module {
            use half::f16;
            tf_entry!($features, l2_f32, l2_f32_tf, (a: &[f32], b: &[f32]) -> f32, super::l2_f32_body::<$fma>(a, b));
            tf_entry!($features, dot_f32, dot_f32_tf, (a: &[f32], b: &[f32]) -> f32, super::dot_f32_body::<$fma>(a, b));
            tf_entry!($features, dot_norms_f32, dot_norms_f32_tf, (a: &[f32], b: &[f32]) -> (f32, f32, f32), super::dot_norms_f32_body::<$fma>(a, b));
            tf_entry!($features, l2_f16, l2_f16_tf, (a: &[f16], b: &[f16]) -> f32, super::l2_f16_body::<$fma, $f16c>(a, b));
            tf_entry!($features, dot_f16, dot_f16_tf, (a: &[f16], b: &[f16]) -> f32, super::dot_f16_body::<$fma, $f16c>(a, b));
            tf_entry!($features, dot_norms_f16, dot_norms_f16_tf, (a: &[f16], b: &[f16]) -> (f32, f32, f32), super::dot_norms_f16_body::<$fma, $f16c>(a, b));
            tf_entry!($features, l2_u8, l2_u8_tf, (a: &[u8], b: &[u8]) -> f32, super::int_body::<u8, 0>(a, b)[0] as f32);
            tf_entry!($features, dot_u8, dot_u8_tf, (a: &[u8], b: &[u8]) -> f32, super::int_body::<u8, 1>(a, b)[0] as f32);
            tf_entry!($features, dot_norms_u8, dot_norms_u8_tf, (a: &[u8], b: &[u8]) -> (f32, f32, f32), super::triple(super::int_body::<u8, 2>(a, b)));
            tf_entry!($features, l2_i8, l2_i8_tf, (a: &[i8], b: &[i8]) -> f32, super::int_body::<i8, 0>(a, b)[0] as f32);
            tf_entry!($features, dot_i8, dot_i8_tf, (a: &[i8], b: &[i8]) -> f32, super::int_body::<i8, 1>(a, b)[0] as f32);
            tf_entry!($features, dot_norms_i8, dot_norms_i8_tf, (a: &[i8], b: &[i8]) -> (f32, f32, f32), super::triple(super::int_body::<i8, 2>(a, b)));
        }
    };
}

#[inline(always)]
fn triple(r: [i64; 3]) -> (f32, f32, f32) {
    (r[0] as f32, r[1] as f32, r[2] as f32)
}

/// Hand-written f32 kernels: masked or scalar tails instead of a second loop, and the
/// one-query-four-rows kernels, which the compiler does not derive from the generic bodies.
#[cfg(target_arch = "x86_64")]
mod f32_x86 {
    use std::arch::x86_64::*;

    #[inline(always)]
    fn tail_mask(left: usize) -> __mmask16 {
        ((1u32 << left.min(16)) - 1) as __mmask16
    }

    macro_rules! avx512_pair {
        ($name:ident, $inner:ident, $combine:expr) => {
            #[target_feature(enable = "avx512f")]
            fn $inner(a: &[f32], b: &[f32]) -> f32 {
                let n = a.len().min(b.len());
                let (pa, pb) = (a.as_ptr(), b.as_ptr());
                let mut acc = [_mm512_setzero_ps(); 4];
                let mut i = 0;
                // SAFETY: every load reads lanes [i, i + 16) with i + 16 <= n, or a masked tail
                // whose mask covers only lanes below n; both slices hold at least n floats.
                unsafe {
                    while i + 64 <= n {
                        for (j, acc) in acc.iter_mut().enumerate() {
                            let x = _mm512_loadu_ps(pa.add(i + 16 * j));
                            let y = _mm512_loadu_ps(pb.add(i + 16 * j));
                            *acc = $combine(x, y, *acc);
                        }
                        i += 64;
                    }
                    while i + 16 <= n {
                        let x = _mm512_loadu_ps(pa.add(i));
                        let y = _mm512_loadu_ps(pb.add(i));
                        acc[0] = $combine(x, y, acc[0]);
                        i += 16;
                    }
                    if i < n {
                        let m = tail_mask(n - i);
                        let x = _mm512_maskz_loadu_ps(m, pa.add(i));
                        let y = _mm512_maskz_loadu_ps(m, pb.add(i));
                        acc[1] = $combine(x, y, acc[1]);
                    }
                }
                let s = _mm512_add_ps(_mm512_add_ps(acc[0], acc[1]), _mm512_add_ps(acc[2], acc[3]));
                _mm512_reduce_add_ps(s)
            }
            pub(super) fn $name(a: &[f32], b: &[f32]) -> f32 {
                // SAFETY: handed out only after AVX-512F was detected.
                unsafe { $inner(a, b) }
            }
        };
    }

    macro_rules! avx512_x4 {
        ($name:ident, $inner:ident, $combine:expr) => {
            #[target_feature(enable = "avx512f,avx2")]
            fn $inner(q: &[f32], rows: [&[f32]; 4]) -> [f32; 4] {
                let n = rows.iter().fold(q.len(), |n, r| n.min(r.len()));
                let pq = q.as_ptr();
                let pr = rows.map(|r| r.as_ptr());
                let mut acc = [_mm512_setzero_ps(); 4];
                let mut i = 0;
                // SAFETY: as in the pair kernels: full loads stay below n, the tail is masked.
                unsafe {
                    while i + 16 <= n {
                        let x = _mm512_loadu_ps(pq.add(i));
                        for r in 0..4 {
                            acc[r] = $combine(x, _mm512_loadu_ps(pr[r].add(i)), acc[r]);
                        }
                        i += 16;
                    }
                    if i < n {
                        let m = tail_mask(n - i);
                        let x = _mm512_maskz_loadu_ps(m, pq.add(i));
                        for r in 0..4 {
                            acc[r] = $combine(x, _mm512_maskz_loadu_ps(m, pr[r].add(i)), acc[r]);
                        }
                    }
                }
                reduce4(acc)
            }
            pub(super) fn $name(q: &[f32], rows: [&[f32]; 4]) -> [f32; 4] {
                // SAFETY: handed out only after AVX-512F was detected.
                unsafe { $inner(q, rows) }
            }
        };
    }

    /// Horizontal sums of four registers at once (a transposing add tree: about half the
    /// shuffles of four separate reductions).
    #[inline]
    #[target_feature(enable = "avx512f,avx2")]
    fn reduce4(a: [__m512; 4]) -> [f32; 4] {
        let half = |v: __m512| {
            let lo = _mm512_castps512_ps256(v);
            let hi = _mm256_castpd_ps(_mm512_extractf64x4_pd::<1>(_mm512_castps_pd(v)));
            _mm256_add_ps(lo, hi)
        };
        let h = [half(a[0]), half(a[1]), half(a[2]), half(a[3])];
        let ab = _mm256_hadd_ps(h[0], h[1]);
        let cd = _mm256_hadd_ps(h[2], h[3]);
        let abcd = _mm256_hadd_ps(ab, cd);
        let r = _mm_add_ps(
            _mm256_castps256_ps128(abcd),
            _mm256_extractf128_ps::<1>(abcd),
        );
        let mut out = [0f32; 4];
        // SAFETY: `out` holds 4 floats.
        unsafe { _mm_storeu_ps(out.as_mut_ptr(), r) };
        out
    }

    #[inline]
    #[target_feature(enable = "avx512f")]
    fn l2_512(x: __m512, y: __m512, acc: __m512) -> __m512 {
        let d = _mm512_sub_ps(x, y);
        _mm512_fmadd_ps(d, d, acc)
    }
    #[inline]
    #[target_feature(enable = "avx512f")]
    fn dot_512(x: __m512, y: __m512, acc: __m512) -> __m512 {
        _mm512_fmadd_ps(x, y, acc)
    }

    avx512_pair!(l2_avx512, l2_avx512_tf, l2_512);
    avx512_pair!(dot_avx512, dot_avx512_tf, dot_512);
    avx512_x4!(l2_x4_avx512, l2_x4_avx512_tf, l2_512);
    avx512_x4!(dot_x4_avx512, dot_x4_avx512_tf, dot_512);

    #[inline]
    #[target_feature(enable = "avx2")]
    fn hsum256(v: __m256) -> f32 {
        let mut out = [0f32; 8];
        // SAFETY: `out` holds 8 floats.
        unsafe { _mm256_storeu_ps(out.as_mut_ptr(), v) };
        ((out[0] + out[4]) + (out[1] + out[5])) + ((out[2] + out[6]) + (out[3] + out[7]))
    }

    macro_rules! avx2_x4 {
        ($name:ident, $inner:ident, $scalar:expr, $combine:expr) => {
            #[target_feature(enable = "avx2,fma")]
            fn $inner(q: &[f32], rows: [&[f32]; 4]) -> [f32; 4] {
                let n = rows.iter().fold(q.len(), |n, r| n.min(r.len()));
                let pq = q.as_ptr();
                let pr = rows.map(|r| r.as_ptr());
                let mut acc = [_mm256_setzero_ps(); 4];
                let mut i = 0;
                // SAFETY: every load reads lanes [i, i + 8) with i + 8 <= n.
                unsafe {
                    while i + 8 <= n {
                        let x = _mm256_loadu_ps(pq.add(i));
                        for r in 0..4 {
                            acc[r] = $combine(x, _mm256_loadu_ps(pr[r].add(i)), acc[r]);
                        }
                        i += 8;
                    }
                }
                let mut out = acc.map(|a| hsum256(a));
                for r in 0..4 {
                    for j in i..n {
                        out[r] += $scalar(q[j], rows[r][j]);
                    }
                }
                out
            }
            pub(super) fn $name(q: &[f32], rows: [&[f32]; 4]) -> [f32; 4] {
                // SAFETY: handed out only after AVX2 and FMA were detected.
                unsafe { $inner(q, rows) }
            }
        };
    }

    #[inline]
    #[target_feature(enable = "avx2,fma")]
    fn l2_256(x: __m256, y: __m256, acc: __m256) -> __m256 {
        let d = _mm256_sub_ps(x, y);
        _mm256_fmadd_ps(d, d, acc)
    }
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    fn dot_256(x: __m256, y: __m256, acc: __m256) -> __m256 {
        _mm256_fmadd_ps(x, y, acc)
    }

    avx2_x4!(
        l2_x4_avx2,
        l2_x4_avx2_tf,
        |a: f32, b: f32| (a - b) * (a - b),
        l2_256
    );
    avx2_x4!(dot_x4_avx2, dot_x4_avx2_tf, |a: f32, b: f32| a * b, dot_256);
}

#[cfg(target_arch = "x86_64")]
isa_module!(
    avx512,
    "avx512f,avx512vl,avx512bw,avx2,fma,f16c",
    true,
    true
);
#[cfg(target_arch = "x86_64")]
isa_module!(avx2, "avx2,fma,f16c", true, true);

/// Baseline entry points: the same bodies with no extra features (and no FMA, which would be a
/// slow library call without hardware support).
mod baseline {
    use half::f16;
    pub(super) fn l2_f32(a: &[f32], b: &[f32]) -> f32 {
        super::l2_f32_body::<false>(a, b)
    }
    pub(super) fn dot_f32(a: &[f32], b: &[f32]) -> f32 {
        super::dot_f32_body::<false>(a, b)
    }
    pub(super) fn dot_norms_f32(a: &[f32], b: &[f32]) -> (f32, f32, f32) {
        super::dot_norms_f32_body::<false>(a, b)
    }
    pub(super) fn l2_f16(a: &[f16], b: &[f16]) -> f32 {
        super::l2_f16_body::<false, false>(a, b)
    }
    pub(super) fn dot_f16(a: &[f16], b: &[f16]) -> f32 {
        super::dot_f16_body::<false, false>(a, b)
    }
    pub(super) fn dot_norms_f16(a: &[f16], b: &[f16]) -> (f32, f32, f32) {
        super::dot_norms_f16_body::<false, false>(a, b)
    }
    pub(super) fn l2_u8(a: &[u8], b: &[u8]) -> f32 {
        super::int_body::<u8, 0>(a, b)[0] as f32
    }
    pub(super) fn dot_u8(a: &[u8], b: &[u8]) -> f32 {
        super::int_body::<u8, 1>(a, b)[0] as f32
    }
    pub(super) fn dot_norms_u8(a: &[u8], b: &[u8]) -> (f32, f32, f32) {
        super::triple(super::int_body::<u8, 2>(a, b))
    }
    pub(super) fn l2_i8(a: &[i8], b: &[i8]) -> f32 {
        super::int_body::<i8, 0>(a, b)[0] as f32
    }
    pub(super) fn dot_i8(a: &[i8], b: &[i8]) -> f32 {
        super::int_body::<i8, 1>(a, b)[0] as f32
    }
    pub(super) fn dot_norms_i8(a: &[i8], b: &[i8]) -> (f32, f32, f32) {
        super::triple(super::int_body::<i8, 2>(a, b))
    }
}

/// The best instruction set of the running CPU, honouring `WEFT_CPU_ISA=baseline|avx2|avx512`
/// (which can only lower the choice) for testing and benchmarking the fallbacks.
pub fn detect_isa() -> Isa {
    let cap = std::env::var("WEFT_CPU_ISA").ok();
    let allow = |isa: Isa| match cap.as_deref() {
        Some("baseline") => isa == Isa::Baseline,
        Some("avx2") => isa != Isa::Avx512,
        _ => true,
    };
    #[cfg(target_arch = "x86_64")]
    {
        let avx2 = is_x86_feature_detected!("avx2")
            && is_x86_feature_detected!("fma")
            && is_x86_feature_detected!("f16c");
        if avx2
            && is_x86_feature_detected!("avx512f")
            && is_x86_feature_detected!("avx512vl")
            && is_x86_feature_detected!("avx512bw")
            && allow(Isa::Avx512)
        {
            return Isa::Avx512;
        }
        if avx2 && allow(Isa::Avx2) {
            return Isa::Avx2;
        }
    }
    let _ = allow;
    Isa::Baseline
}

macro_rules! kernel_set_fn {
    ($fn_name:ident, $ty:ty, $l2:ident, $dot:ident, $dn:ident, $doc:literal) => {
        #[doc = $doc]
        pub fn $fn_name() -> KernelSet<$ty> {
            macro_rules! set {
                ($m:ident, $isa:expr) => {
                    KernelSet {
                        l2: $m::$l2,
                        dot: $m::$dot,
                        dot_norms: $m::$dn,
                        l2_x4: |q, r| x4_by_pairs($m::$l2, q, r),
                        dot_x4: |q, r| x4_by_pairs($m::$dot, q, r),
                        isa: $isa,
                    }
                };
            }
            match detect_isa() {
                #[cfg(target_arch = "x86_64")]
                Isa::Avx512 => set!(avx512, Isa::Avx512),
                #[cfg(target_arch = "x86_64")]
                Isa::Avx2 => set!(avx2, Isa::Avx2),
                _ => set!(baseline, Isa::Baseline),
            }
        }
    };
}

kernel_set_fn!(
    f16_kernels,
    f16,
    l2_f16,
    dot_f16,
    dot_norms_f16,
    "The f16 kernels for this CPU."
);
kernel_set_fn!(
    u8_kernels,
    u8,
    l2_u8,
    dot_u8,
    dot_norms_u8,
    "The u8 kernels for this CPU."
);
kernel_set_fn!(
    i8_kernels,
    i8,
    l2_i8,
    dot_i8,
    dot_norms_i8,
    "The i8 kernels for this CPU."
);

/// The f32 kernels for this CPU: hand-written AVX-512 / AVX2 kernels where they beat the
/// compiler's, the generic bodies elsewhere.
pub fn f32_kernels() -> KernelSet<f32> {
    match detect_isa() {
        #[cfg(target_arch = "x86_64")]
        Isa::Avx512 => KernelSet {
            l2: f32_x86::l2_avx512,
            dot: f32_x86::dot_avx512,
            dot_norms: avx512::dot_norms_f32,
            l2_x4: f32_x86::l2_x4_avx512,
            dot_x4: f32_x86::dot_x4_avx512,
            isa: Isa::Avx512,
        },
        #[cfg(target_arch = "x86_64")]
        Isa::Avx2 => KernelSet {
            l2: avx2::l2_f32,
            dot: avx2::dot_f32,
            dot_norms: avx2::dot_norms_f32,
            l2_x4: f32_x86::l2_x4_avx2,
            dot_x4: f32_x86::dot_x4_avx2,
            isa: Isa::Avx2,
        },
        _ => KernelSet {
            l2: baseline::l2_f32,
            dot: baseline::dot_f32,
            dot_norms: baseline::dot_norms_f32,
            l2_x4: |q, r| x4_by_pairs(baseline::l2_f32, q, r),
            dot_x4: |q, r| x4_by_pairs(baseline::dot_f32, q, r),
            isa: Isa::Baseline,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::distance::{DistanceFn, reference_distance};
    use crate::{Element, Metric};
    use proptest::prelude::*;

    fn check<T: Element>(metric: Metric, a: &[T], b: &[T]) {
        let want = reference_distance(metric, a, b);
        let scale: f64 = a
            .iter()
            .chain(b)
            .map(|v| (v.to_f32() as f64).powi(2))
            .sum::<f64>()
            + 1.0;
        let got = DistanceFn::<T>::new(metric).eval(a, b) as f64;
        let tol = match metric {
            Metric::Cosine => 1e-4,
            _ => 1e-5 * scale,
        };
        assert!(
            (got - want).abs() <= tol,
            "{metric:?} {:?}: got {got}, want {want}",
            T::DTYPE
        );
    }

    type Pair<T> = fn(&[T], &[T]) -> f32;

    fn baseline_matches<T: Element>(a: &[T], b: &[T], set: KernelSet<T>, base: (Pair<T>, Pair<T>)) {
        let (x, y) = ((set.l2)(a, b), (base.0)(a, b));
        assert!((x - y).abs() <= 1e-4 * (1.0 + y.abs()), "l2 {x} vs {y}");
        let (x, y) = ((set.dot)(a, b), (base.1)(a, b));
        assert!((x - y).abs() <= 1e-4 * (1.0 + y.abs()), "dot {x} vs {y}");
        // The four-row kernels agree with the pair kernels.
        let rows = [b, a, b, a];
        let l2 = (set.l2_x4)(a, rows);
        let dot = (set.dot_x4)(a, rows);
        for r in 0..4 {
            let (p, q) = ((set.l2)(a, rows[r]), (set.dot)(a, rows[r]));
            assert!(
                (l2[r] - p).abs() <= 1e-4 * (1.0 + p.abs()),
                "l2_x4 {} vs {p}",
                l2[r]
            );
            assert!(
                (dot[r] - q).abs() <= 1e-4 * (1.0 + q.abs()),
                "dot_x4 {} vs {q}",
                dot[r]
            );
        }
    }

    proptest! {
        #[test]
        fn f32_kernels_match_reference(dim in 0usize..300, seed in any::<u64>()) {
            let mut r = crate::rng::SplitMix64::new(seed);
            let a: Vec<f32> = (0..dim).map(|_| r.next_f32() * 4.0 - 2.0).collect();
            let b: Vec<f32> = (0..dim).map(|_| r.next_f32() * 4.0 - 2.0).collect();
            for m in Metric::ALL { check(m, &a, &b); }
            baseline_matches(&a, &b, f32_kernels(), (baseline::l2_f32, baseline::dot_f32));
        }

        #[test]
        fn handwritten_f32_match_generic(dim in 0usize..300, seed in any::<u64>()) {
            let mut r = crate::rng::SplitMix64::new(seed);
            let a: Vec<f32> = (0..dim).map(|_| r.next_f32() * 4.0 - 2.0).collect();
            let b: Vec<f32> = (0..dim).map(|_| r.next_f32() * 4.0 - 2.0).collect();
            #[cfg(target_arch = "x86_64")]
            match detect_isa() {
                Isa::Avx512 => baseline_matches(&a, &b, f32_kernels(), (avx512::l2_f32, avx512::dot_f32)),
                Isa::Avx2 => baseline_matches(&a, &b, f32_kernels(), (avx2::l2_f32, avx2::dot_f32)),
                Isa::Baseline => {}
            }
        }

        #[test]
        fn f16_kernels_match_reference(dim in 0usize..300, seed in any::<u64>()) {
            let mut r = crate::rng::SplitMix64::new(seed);
            let a: Vec<f16> = (0..dim).map(|_| f16::from_f32(r.next_f32() * 4.0 - 2.0)).collect();
            let b: Vec<f16> = (0..dim).map(|_| f16::from_f32(r.next_f32() * 4.0 - 2.0)).collect();
            for m in Metric::ALL { check(m, &a, &b); }
            baseline_matches(&a, &b, f16_kernels(), (baseline::l2_f16, baseline::dot_f16));
        }

        #[test]
        fn byte_kernels_are_exact(dim in 0usize..300, seed in any::<u64>()) {
            let mut r = crate::rng::SplitMix64::new(seed);
            let a: Vec<u8> = (0..dim).map(|_| r.next_u64() as u8).collect();
            let b: Vec<u8> = (0..dim).map(|_| r.next_u64() as u8).collect();
            for m in Metric::ALL { check(m, &a, &b); }
            let ai: Vec<i8> = a.iter().map(|&v| v as i8).collect();
            let bi: Vec<i8> = b.iter().map(|&v| v as i8).collect();
            for m in Metric::ALL { check(m, &ai, &bi); }
            prop_assert_eq!((u8_kernels().l2)(&a, &b) as f64, reference_distance(Metric::L2Squared, &a, &b));
        }

        #[test]
        fn f16_bit_conversion_is_exact(bits in any::<u16>()) {
            let want = f16::from_bits(bits).to_f32();
            let got = f16_bits_to_f32(bits);
            prop_assert!(want.to_bits() == got.to_bits() || (want.is_nan() && got.is_nan()));
        }
    }

    #[test]
    fn eval_many_matches_eval() {
        let mut r = crate::rng::SplitMix64::new(3);
        for dim in [1usize, 7, 16, 100, 128, 131] {
            let data: Vec<f32> = (0..20 * dim).map(|_| r.next_f32() - 0.5).collect();
            let view = crate::DatasetView::new(&data, 20, dim).unwrap();
            let q: Vec<f32> = (0..dim).map(|_| r.next_f32() - 0.5).collect();
            let ids: Vec<u32> = vec![3, 19, 0, 7, 7, 12, 5];
            for m in Metric::ALL {
                let f = DistanceFn::<f32>::new(m);
                let mut out = vec![0f32; ids.len()];
                f.eval_many(&q, view, &ids, &mut out);
                for (o, &id) in out.iter().zip(&ids) {
                    let want = f.eval(&q, view.row(id as usize));
                    assert!(
                        (o - want).abs() <= 1e-4 * (1.0 + want.abs()),
                        "{m:?} d{dim}: {o} vs {want}"
                    );
                }
                let mut all = vec![0f32; 20];
                f.eval_rows(&q, view, &mut all);
                for (i, o) in all.iter().enumerate() {
                    let want = f.eval(&q, view.row(i));
                    assert!((o - want).abs() <= 1e-4 * (1.0 + want.abs()));
                }
            }
        }
    }

    #[test]
    fn cosine_of_zero_vector_is_one() {
        let z = [0f32; 8];
        let a = [1f32; 8];
        assert_eq!(DistanceFn::<f32>::new(Metric::Cosine).eval(&z, &a), 1.0);
    }
}
