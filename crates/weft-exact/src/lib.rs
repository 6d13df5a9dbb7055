//! # weft-exact
//!
//! Exact (brute-force) k-nearest-neighbour search: the one home of ground truth in weft.
//!
//! - [`cpu`]: exact k-NN on the CPU ([`exact_search`], [`exact_knn_graph`],
//!   [`exact_neighbors_of`]) and the `exact` k-NN graph builder [`ExactKnn`].
//! - `gpu` (feature `cuda`): exact k-NN on the GPU, `ExactGpu` (search, k-NN graphs, the
//!   `exact-gpu` builder and searcher) over the kernel module `kernels/exact`.
//! - [`filtered`]: exact search restricted to the ids a [`weft_core::Filter`] allows
//!   ([`exact_search_filtered`]), and the bounded sorted lists the CPU graph searches keep too.
//! - [`searcher`]: brute-force search as a [`weft_core::Searcher`], [`ExactSearcher`] (name
//!   `exact`).
//! - [`recall`]: graph recall against an exact k-NN graph (full or sampled, the sample's exact
//!   neighbours computed here) and search recall against ground truth.
//!
//! weft-exact sits above the graph storage (weft-graph) and the GPU runtime (weft-gpu) and below
//! every builder and search: the builders' pipelines and tests, the searches and the facade take
//! their ground truth from here.

pub mod cpu;
pub mod filtered;
#[cfg(feature = "cuda")]
pub mod gpu;
pub mod recall;
pub mod searcher;

pub use cpu::{ExactKnn, exact_knn_graph, exact_neighbors_of, exact_search};
pub use filtered::exact_search_filtered;
#[cfg(feature = "cuda")]
pub use gpu::{ExactGpu, ExactPlan};
pub use recall::{Recall, SampledTruth, Ties};
pub use searcher::ExactSearcher;
