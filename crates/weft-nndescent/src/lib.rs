//! # weft-nndescent
//!
//! NN-Descent k-NN graph construction.
//!
//! - [`NnDescentParams`]: the parameters, shared with the GPU back end (GNND); fields say which
//!   back end reads them.
//! - [`NnDescentCpu`]: Dong et al.'s NN-Descent on the CPU (rayon), with a random-projection
//!   forest initialisation as in pynndescent, deterministic for a seed whatever the thread
//!   count (see [`cpu`]).
//! - `NnDescentGpu` (feature `cuda`): GNND, NN-Descent redesigned for the GPU (Wang, Zhao & Zeng
//!   2021), host code in `gpu::gnnd` and kernels in the workspace's `kernels/gnnd/`, launched
//!   through weft-gpu; it can leave the graph on the device for the next stage, merges
//!   two k-NN graphs (GGM), and builds graphs larger than the device memory in shards merged
//!   pairwise (`sharded`; the shards and the merge schedule: [`partition`]).
//!
//! Builders assume finite data: check it upstream with
//! [`DatasetView::check_finite`](weft_core::DatasetView::check_finite).

pub mod cpu;
#[cfg(feature = "cuda")]
pub mod gpu;
pub mod params;
pub mod partition;
mod rptree;
#[cfg(feature = "cuda")]
pub mod sharded;

pub use cpu::{BuildStats, NnDescentCpu};
#[cfg(feature = "cuda")]
pub use gpu::NnDescentGpu;
pub use params::NnDescentParams;
pub use partition::ShardSchedule;
#[cfg(feature = "cuda")]
pub use sharded::{ShardPlan, ShardedStats, StageSeconds};
