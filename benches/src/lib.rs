//! # weft-benches
//!
//! Shared pieces of the criterion micro-benchmarks under `benches/benches/`:
//! - [`fma_peak`]: a register-only FMA loop that measures the single-core floating-point peak
//!   of the machine, the yardstick for the distance kernels;
//! - [`data`]: seeded inputs.

pub mod data;
pub mod fma_peak;
