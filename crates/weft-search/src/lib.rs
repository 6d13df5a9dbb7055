//! # weft-search
//!
//! Searches over weft graphs.
//!
//! - [`BeamSearch`]: greedy best-first beam search on the CPU over any [`weft_core::GraphView`]
//!   (name `beam`), parallel over queries with rayon.
//! - [`ExactSearcher`]: brute-force search as a [`weft_core::Searcher`] (name `exact`); it ignores
//!   the graph and calls [`weft_graph::exact::exact_search`].
//! - [`medoid`]: an approximate medoid (seeded sample), the usual search entry point.

mod beam;
mod entry;
mod exact;

pub use beam::{BeamSearch, BeamSearchParams, EntryPoints};
pub use entry::medoid;
pub use exact::ExactSearcher;
