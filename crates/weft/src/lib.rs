//! # weft
//!
//! The facade of the weft workspace: one dependency for users who want to build proximity graphs
//! and search them without picking crates one by one.
//!
//! - [`Index`]: build from a [`DatasetView`], an `ndarray` array or a vector file with a named
//!   algorithm and JSON parameters, search, save to a folder, load by memory map.
//! - [`Registry`]: the algorithms available in this build, by name ([`Registry::available`]);
//!   algorithms planned but not implemented yet are listed apart and never pretend to work.
//! - Re-exports of the crates underneath ([`core`], [`io`], [`graph`], [`search`]) and of the
//!   types most programs need.
//!
//! ```no_run
//! use weft::{BuildCtx, Index, Metric, SearchParams};
//! # fn main() -> weft::Result<()> {
//! let base = weft::io::read::<f32>("base.fbin", &weft::io::ReadOptions::new())?;
//! let queries = weft::io::read::<f32>("queries.fbin", &weft::io::ReadOptions::new())?;
//! let params = serde_json::json!({ "degree": 32 });
//! let index = Index::build(base.into(), Metric::L2Squared, "rnndescent", &params, None, &BuildCtx::new(42))?;
//! let result = index.search(queries.view(), 10, &SearchParams::with_beam_width(64))?;
//! println!("nearest to query 0: {:?}", result.neighbors.row_ids(0));
//! # Ok(()) }
//! ```

pub mod index;
pub mod registry;

pub use index::{Index, SearchOutput, SearchParams};
pub use registry::{AlgorithmInfo, Backend, DynBuilder, GpuStatus, Produces, Registry};

/// The GPU runtime (device probe, context, exact GPU k-NN), with the `cuda` feature.
#[cfg(feature = "cuda")]
pub use weft_gpu as gpu;

pub use weft_core as core;
pub use weft_graph as graph;
pub use weft_io as io;
pub use weft_search as search;

pub use weft_core::{
    BuildCtx, CancelToken, DType, Dataset, DatasetView, Element, Error, FixedDegreeGraph,
    GraphView, INVALID, KnnGraph, Metric, Neighbors, NodeId, Progress, Result, SearchStats,
};
pub use weft_graph::storage::{GraphMeta, StoredGraph};
pub use weft_io::AnyDataset;
