//! # weft
//!
//! The facade of the weft workspace: one dependency for users who want to build proximity graphs
//! and search them without picking crates one by one.
//!
//! - [`Index`]: build with [`Index::builder`] from an [`Algorithm`] holding its typed
//!   parameters (or, for command lines and config files, with [`Index::build`]: an algorithm
//!   name and JSON parameters), from a vector file, a [`Dataset`] or a [`DatasetView`], an
//!   `ndarray` array or a flat slice with its dimension (any [`IndexData`]); search queries
//!   given the same ways (any [`Vectors`]) into [`Neighbors`] (ids and distances, also as
//!   `ndarray` views) or into the caller's arrays ([`Index::search_into`]) or slices
//!   ([`Index::search_into_buffers`]), optionally restricted to the ids a [`Filter`] allows
//!   ([`SearchParams::with_filter`]); save to a folder, load by memory map.
//! - [`Backend`]: where builds and searches run; [`Backend::Auto`], the default of both, is the
//!   GPU when this build has GPU support and a GPU is usable, else the CPU.
//! - [`Registry`]: the algorithms available in this build, by name ([`Registry::available`]);
//!   algorithms planned but not implemented yet are listed apart and never pretend to work.
//! - Re-exports of the crates underneath ([`core`], [`io`], [`graph`], [`exact`], [`search`]), of the
//!   types most programs need, and of the two external crates of the API, [`ndarray`] and
//!   [`half`] (`f16` vectors): use `weft::ndarray` and `weft::half` and your arrays are always of
//!   the versions weft takes, with no version of your own to keep in step.
//!
//! ```no_run
//! use weft::{Algorithm, Index, Metric, RnnDescentParams, SearchParams};
//! # fn main() -> weft::Result<()> {
//! let base = weft::io::read::<f32>("base.fbin", &weft::io::ReadOptions::new())?;
//! let queries = weft::io::read::<f32>("queries.fbin", &weft::io::ReadOptions::new())?;
//! let params = RnnDescentParams { degree: 32, ..RnnDescentParams::default() };
//! let index = Index::builder(Algorithm::RnnDescent(params))
//!     .metric(Metric::L2Squared)
//!     .seed(42)
//!     .build(base)?;
//! let result = index.search(queries.view(), 10, &SearchParams::with_beam_width(64))?;
//! println!("nearest to query 0: {:?}", result.neighbors.ids_view().row(0));
//! println!("their distances: {:?}", result.neighbors.distances_view().row(0));
//! # Ok(()) }
//! ```
//!
//! Queries and data can be `ndarray` arrays or plain slices as well; all spellings give the same
//! results, and queries of another dimension than the data are an [`Error::DimensionMismatch`]:
//!
//! ```
//! use weft::ndarray::Array2;
//! use weft::{Algorithm, Index, SearchParams};
//! # fn main() -> weft::Result<()> {
//! let base = Array2::from_shape_fn((200, 8), |(i, j)| ((i * 31 + j * 7) % 97) as f32);
//! let index = Index::builder(Algorithm::exact(5)).build(base.view())?; // copied into the index
//! let flat: Vec<f32> = base.slice(weft::ndarray::s![..10, ..]).iter().copied().collect();
//! let params = SearchParams::exact();
//! let from_array = index.search(base.slice(weft::ndarray::s![..10, ..]), 5, &params)?;
//! let from_slice = index.search((&flat[..], 8), 5, &params)?;
//! assert_eq!(from_array.neighbors.ids_view(), from_slice.neighbors.ids_view());
//! assert!(matches!(
//!     index.search((&flat[..], 4), 5, &params),
//!     Err(weft::Error::DimensionMismatch { .. })
//! ));
//! # Ok(()) }
//! ```

pub mod algorithm;
pub mod builder;
pub mod index;
pub mod input;
pub mod registry;
pub mod routes;
mod save;
pub mod sharded;

pub use algorithm::{
    Algorithm, CagraParams, GgnnParams, GrnndParams, KnnSource, NnDescentParams, RnnDescentParams,
};
pub use builder::IndexBuilder;
pub use index::{BuildRequest, Index, SearchOutput, SearchParams, SearchReport};
pub use input::{IndexData, Vectors};
pub use registry::{AlgorithmInfo, Backend, DynBuilder, GpuStatus, Produces, Registry};
pub use routes::{SEARCH_ROUTES, SearchRoute, search_route};
pub use sharded::ShardedIndex;

/// The GPU runtime (device probe, context, device buffers, kernel loading), with the `cuda`
/// feature.
#[cfg(feature = "cuda")]
pub use weft_gpu as gpu;

/// Every CUDA kernel module built into this binary, from every crate that ships kernels
/// (weft-gpu, weft-exact, weft-nndescent, weft-grnnd, weft-cagra, weft-ggnn, weft-search), sorted by name:
/// for reports (which have cubins) and the NVRTC check.
#[cfg(feature = "cuda")]
pub fn kernel_modules() -> Vec<&'static weft_gpu::KernelModule> {
    let mut all: Vec<&'static weft_gpu::KernelModule> = weft_gpu::kernel_modules().to_vec();
    all.extend(weft_exact::gpu::kernel_modules());
    all.extend(weft_nndescent::gpu::kernel_modules());
    all.extend(weft_grnnd::gpu::kernel_modules());
    all.extend(weft_cagra::gpu::kernel_modules());
    all.extend(weft_ggnn::gpu::kernel_modules());
    all.extend(weft_search::gpu::kernel_modules());
    all.sort_by_key(|m| m.name);
    all
}

/// The `ndarray` crate weft's API takes and returns arrays of (re-exported: no version of your
/// own to match).
pub use ndarray;

/// The `half` crate of weft's `f16` element type (re-exported: no version of your own to match).
pub use half;

pub use weft_core as core;
pub use weft_exact as exact;
pub use weft_graph as graph;
pub use weft_io as io;
pub use weft_search as search;

pub use weft_core::Filter;
pub use weft_core::{
    BuildCtx, CancelToken, DType, Dataset, DatasetView, Element, Error, FixedDegreeGraph,
    GraphView, INVALID, KnnGraph, Metric, Neighbors, NeighborsMut, NodeId, Progress, Result,
    SearchStats,
};
pub use weft_graph::storage::{GraphMeta, StoredGraph};
pub use weft_io::AnyDataset;
