//! # weft-benches
//!
//! The benchmark harness and the criterion micro-benchmarks.
//!
//! - The runner binary `weft-bench` (`src/bin/weft-bench.rs`), driven by `cargo xtask bench
//!   --suite quick|full`: [`datasets`] prepares data and ground truth, [`runner`] builds,
//!   measures and sweeps every selected algorithm of the `weft` registry and writes
//!   [`schema::Record`] JSON lines, [`report`] and [`plots`] turn the lines (weft's and the
//!   peers') into markdown and SVG/PNG plots.
//! - Shared pieces of the criterion benchmarks under `benches/benches/`: [`fma_peak`] (the
//!   single-core floating-point peak, the yardstick of the distance kernels) and [`data`]
//!   (seeded inputs).

pub mod data;
pub mod datasets;
pub mod fma_peak;
pub mod pareto;
pub mod plots;
pub mod report;
pub mod runner;
pub mod schema;
