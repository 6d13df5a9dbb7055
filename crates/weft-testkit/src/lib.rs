//! # weft-testkit
//!
//! The conformance suites that define "done" for an algorithm (see docs/adding-an-algorithm.md):
//! - [`knn`]: every [`weft_core::KnnGraphBuilder`];
//! - [`graph`]: every [`weft_core::GraphBuilder`];
//! - [`search`]: every [`weft_core::Searcher`].
//!
//! Each suite runs on seeded synthetic sets of a few thousand points (d in {8, 32, 128}, every
//! metric) and checks validity, sorted rows, recall against the exact k-NN above the declared
//! threshold, cancellation and parameter validation.

pub mod graph;
pub mod knn;
pub mod search;

/// Proptest cases per GPU oracle test: `$WEFT_GPU_CASES` when it holds a number, else
/// `default`.
pub fn gpu_cases(default: u32) -> u32 {
    std::env::var("WEFT_GPU_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}
