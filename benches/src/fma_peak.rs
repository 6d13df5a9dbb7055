//! The single-core FMA peak: independent fused multiply-add chains that never touch memory,
//! at the widest vector width the CPU offers (AVX-512, else AVX2, else scalar).

/// FMA lanes one call of [`run`] executes per iteration: chains x vector width.
pub fn lanes_per_iteration() -> u64 {
    CHAINS as u64 * width() as u64
}

/// Number of independent accumulator chains (enough to cover 4-cycle latency on 2 ports).
const CHAINS: usize = 12;

/// The vector width in f32 lanes that [`run`] uses on this CPU.
pub fn width() -> usize {
    #[cfg(target_arch = "x86_64")]
    {
        if is_x86_feature_detected!("avx512f") {
            return 16;
        }
        if is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma") {
            return 8;
        }
    }
    1
}

/// Runs `iters` iterations of `CHAINS` independent vector FMAs and returns a value that
/// depends on all of them (so the work cannot be optimised away). Flops = 2 x lanes x iters.
pub fn run(iters: u64) -> f32 {
    #[cfg(target_arch = "x86_64")]
    {
        if is_x86_feature_detected!("avx512f") {
            // SAFETY: AVX-512F was detected at run time.
            return unsafe { x86::run_avx512(iters) };
        }
        if is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma") {
            // SAFETY: AVX2 and FMA were detected at run time.
            return unsafe { x86::run_avx2(iters) };
        }
    }
    let mut acc = [1.0f32; CHAINS];
    for _ in 0..iters {
        for a in acc.iter_mut() {
            *a = *a * 0.999_999 + 1e-7;
        }
    }
    acc.iter().sum()
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::*;

    use super::CHAINS;

    #[target_feature(enable = "avx512f")]
    pub(super) fn run_avx512(iters: u64) -> f32 {
        let mul = _mm512_set1_ps(0.999_999);
        let add = _mm512_set1_ps(1e-7);
        let mut acc = [_mm512_set1_ps(1.0); CHAINS];
        for _ in 0..iters {
            for a in acc.iter_mut() {
                *a = _mm512_fmadd_ps(*a, mul, add);
            }
        }
        let mut s = _mm512_setzero_ps();
        for a in acc {
            s = _mm512_add_ps(s, a);
        }
        _mm512_reduce_add_ps(s)
    }

    #[target_feature(enable = "avx2,fma")]
    pub(super) fn run_avx2(iters: u64) -> f32 {
        let mul = _mm256_set1_ps(0.999_999);
        let add = _mm256_set1_ps(1e-7);
        let mut acc = [_mm256_set1_ps(1.0); CHAINS];
        for _ in 0..iters {
            for a in acc.iter_mut() {
                *a = _mm256_fmadd_ps(*a, mul, add);
            }
        }
        let mut s = _mm256_setzero_ps();
        for a in acc {
            s = _mm256_add_ps(s, a);
        }
        let mut out = [0f32; 8];
        // SAFETY: `out` holds 8 floats, the width of one AVX register.
        unsafe { _mm256_storeu_ps(out.as_mut_ptr(), s) };
        out.iter().sum()
    }
}
