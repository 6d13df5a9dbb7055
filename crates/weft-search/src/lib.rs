//! # weft-search
//!
//! Searches over weft graphs.
//!
//! - [`BeamSearch`]: greedy best-first beam search on the CPU over any [`weft_core::GraphView`]
//!   (name `beam`), parallel over queries with rayon.
//! - [`weft_core::Filter`]: the ids a search may return (a bitset over the data's ids), taken by
//!   every search here (`filter` in each search's parameters): filtered-out points are traversed
//!   but never returned. The exact searches (`ExactSearcher`, `exact_search_filtered`) live in
//!   weft-exact.
//! - [`GgnnSearch`]: the GGNN query (bounded best list, priority queue and visited ring, tau
//!   slack stop rule) on the CPU over any [`weft_core::GraphView`] (name `ggnn`).
//! - `CagraSearchGpu` (feature `cuda`): the CAGRA-style search on the GPU (name `cagra_gpu`)
//!   over any [`weft_core::FixedDegreeGraph`], with [`CagraSearchParams`]; `CagraSearchSession`
//!   keeps data and graph on the device (module `gpu`, kernels in `kernels/cagra_search/`).
//! - `GgnnSearchGpu` (feature `cuda`): the GGNN query on the GPU (name `ggnn_gpu`), one
//!   thread block per query, with [`GgnnSearchParams`]; `GgnnSearchSession` likewise.
//! - [`medoid`]: an approximate medoid (seeded sample), the usual search entry point.
//! - [`EntryLayer`]: a small navigable graph over many entry points, searched per query by
//!   [`BeamSearch`] in place of scoring every entry point ([`entry_layer`]).
//! - [`plan`]: the rules every graph search shares (the default beam width for `k`, the one
//!   `beam_width >= k` check). Each search's own knobs are one struct ([`BeamSearchTuning`],
//!   [`CagraSearchTuning`], [`GgnnSearchTuning`], [`GgnnGpuOptions`]), which the CLI reads with `clap` (feature
//!   `clap`) and the facade and the Python package carry as they are.

mod beam;
mod cagra_gpu_params;
mod check;
mod entry;
pub mod entry_layer;
mod ggnn;
#[cfg(feature = "cuda")]
pub mod gpu;
mod inputs;
pub mod plan;

pub use beam::{BeamSearch, BeamSearchParams, BeamSearchTuning, EntryPoints, FILTER_EXACT_PER_L};
pub use cagra_gpu_params::{
    CAGRA_GPU_MAX_BEAM_WIDTH, CAGRA_GPU_MAX_SEARCH_WIDTH, CagraSearchMode, CagraSearchParams,
    CagraSearchTuning,
};
pub use cagra_gpu_params::{F16_OVERFLOW, SearchPrecision};
pub use entry::medoid;
pub use entry_layer::{EntryLayer, EntryLayerParams};
pub use ggnn::{GgnnGpuOptions, GgnnSearch, GgnnSearchParams, GgnnSearchTuning};
#[cfg(feature = "cuda")]
pub use gpu::DeviceSearchInputs;
#[cfg(feature = "cuda")]
pub use gpu::cagra::{CagraSearchDevice, CagraSearchGpu, CagraSearchSession};
#[cfg(feature = "cuda")]
pub use gpu::ggnn::{GgnnGpuGraph, GgnnSearchDevice, GgnnSearchGpu, GgnnSearchSession};
pub use inputs::SearchInputs;
