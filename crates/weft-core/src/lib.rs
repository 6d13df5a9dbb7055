//! # weft-core
//!
//! The seam of the weft workspace: the types and traits every other crate speaks.
//!
//! - [`NodeId`] / [`INVALID`]: vertex ids and the padding value of short rows.
//! - [`Element`]: the vector element types (`f32`, [`half::f16`], `u8`, `i8`).
//! - [`Metric`] and the CPU distance kernels in [`distance`] (vectorised, runtime-dispatched).
//! - [`DatasetView`] / [`Dataset`]: row-major vector sets, with `ndarray` interop.
//! - [`KnnGraph`], [`FixedDegreeGraph`] and [`GraphView`]: the graphs the traits exchange.
//! - [`Error`]: the one error type, `#[non_exhaustive]`.
//! - [`Filter`]: the ids a filtered search may return (a bitset over the data's ids).
//! - [`BuildCtx`]: seed, thread count, cancellation and progress for long work.
//! - The traits [`KnnGraphBuilder`], [`GraphOptimizer`], [`GraphBuilder`] and [`Searcher`].
//!
//! weft-core never names a GPU library: GPU back ends implement these traits in their own crates.

pub mod buffer;
pub mod ctx;
pub mod dataset;
pub mod distance;
pub mod element;
pub mod error;
pub mod filter;
pub mod graph;
pub mod huge_pages;
pub mod metric;
pub mod neighbors;
pub mod params;
pub mod prefetch;
pub mod rng;
pub mod simd;
pub mod temp_files;
pub mod traits;

pub use buffer::{ByteSource, SharedSlice};
pub use ctx::{BuildCtx, CancelToken, NoProgress, Progress};
pub use dataset::{Dataset, DatasetView};
pub use element::{DType, Element, ElementFamily, PerElement};
pub use error::{Error, Result};
pub use filter::Filter;
pub use graph::{FixedDegreeGraph, GraphView, KnnGraph};
pub use metric::Metric;
pub use neighbors::{Neighbors, NeighborsMut, SearchStats};
pub use params::{NoParams, Params};
pub use traits::{GraphBuilder, GraphOptimizer, KnnGraphBuilder, Searcher};

/// A vertex id: the row number of a vector in its dataset.
pub type NodeId = u32;

/// The id that pads rows shorter than a graph's degree. Also `INVALID` in
/// `kernels/include/weft/types.cuh`.
pub const INVALID: NodeId = u32::MAX;

/// The largest number of vectors a graph can index (ids must stay below [`INVALID`]).
pub const MAX_NODES: usize = INVALID as usize;
