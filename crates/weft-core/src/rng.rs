//! Seeded randomness.
//!
//! - [`rng_for`]: a `Xoshiro256PlusPlus` for stream `stream` of seed `seed`; algorithms derive one
//!   stream per (iteration, vertex) or per thread-independent work item, so results do not depend
//!   on the number of threads.
//! - [`mix64`] / [`hash3`]: the stateless counter-based generator shared with the CUDA kernels
//!   (`kernels/include/weft/rng.cuh` computes the same values bit for bit).
//! - [`SplitMix64`]: a tiny sequential generator for tests and simple draws.

use rand_core::SeedableRng;
pub use rand_xoshiro::Xoshiro256PlusPlus;

/// SplitMix64's output function (Stafford variant 13): a bijective 64-bit mixer.
#[inline]
pub const fn mix64(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// A counter-based random value for `(seed, a, b)`: the same on the CPU and in the kernels.
#[inline]
pub const fn hash3(seed: u64, a: u64, b: u64) -> u64 {
    mix64(mix64(mix64(seed ^ 0x9e37_79b9_7f4a_7c15).wrapping_add(a)).wrapping_add(b))
}

/// A uniform value in `[0, n)` from 64 random bits (multiply-shift; bias below 2^-32 for n < 2^32).
#[inline]
pub const fn below(bits: u64, n: u64) -> u64 {
    ((bits >> 32) * n) >> 32
}

/// The generator for stream `stream` of `seed`.
pub fn rng_for(seed: u64, stream: u64) -> Xoshiro256PlusPlus {
    Xoshiro256PlusPlus::seed_from_u64(hash3(seed, stream, 0x5eed))
}

/// A minimal sequential generator (SplitMix64).
#[derive(Clone, Debug)]
pub struct SplitMix64 {
    state: u64,
}

impl SplitMix64 {
    /// A generator started at `seed`.
    pub const fn new(seed: u64) -> Self {
        SplitMix64 { state: seed }
    }

    /// The next 64 random bits.
    #[inline]
    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        mix64(self.state)
    }

    /// A uniform f32 in `[0, 1)`.
    #[inline]
    pub fn next_f32(&mut self) -> f32 {
        (self.next_u64() >> 40) as f32 * (1.0 / (1u64 << 24) as f32)
    }

    /// A uniform f64 in `[0, 1)`.
    #[inline]
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// A uniform integer in `[0, n)`; `n` must be positive.
    #[inline]
    pub fn below(&mut self, n: u64) -> u64 {
        debug_assert!(n > 0);
        if n <= u32::MAX as u64 {
            below(self.next_u64(), n)
        } else {
            self.next_u64() % n
        }
    }

    /// A standard normal value (Box-Muller).
    pub fn next_gaussian(&mut self) -> f64 {
        loop {
            let u = self.next_f64();
            if u > 0.0 {
                let v = self.next_f64();
                return (-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * v).cos();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mix64_known_values() {
        // SplitMix64 seeded with 0: the first output is mix64(0x9e3779b97f4a7c15).
        assert_eq!(SplitMix64::new(0).next_u64(), 0xe220_a839_7b1d_cdaf);
        assert_eq!(mix64(0), 0);
    }

    #[test]
    fn below_stays_in_range() {
        let mut r = SplitMix64::new(7);
        for n in [1u64, 2, 3, 10, 1000, 1 << 31] {
            for _ in 0..1000 {
                assert!(r.below(n) < n);
            }
        }
    }
}
