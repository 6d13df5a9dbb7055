//! Seeded benchmark inputs.

use weft_core::Element;
use weft_core::rng::SplitMix64;

/// `rows` vectors of dimension `dim`, row-major, uniform in [-1, 1) (scaled to the type's range
/// for integer types).
pub fn random_rows<T: Element>(rows: usize, dim: usize, seed: u64) -> Vec<T> {
    let mut r = SplitMix64::new(seed);
    let scale = match T::DTYPE {
        weft_core::DType::U8 | weft_core::DType::I8 => 100.0,
        _ => 1.0,
    };
    (0..rows * dim)
        .map(|_| {
            let v = (r.next_f32() * 2.0 - 1.0) * scale;
            T::from_f32(if T::DTYPE == weft_core::DType::U8 {
                v.abs()
            } else {
                v
            })
        })
        .collect()
}
