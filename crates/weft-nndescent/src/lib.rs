//! # weft-nndescent
//!
//! NN-Descent k-NN graph construction.
//!
//! - [`NnDescentParams`]: the parameters, shared with the GPU back end (GNND); fields say which
//!   back end reads them.
//! - [`NnDescentCpu`]: Dong et al.'s NN-Descent on the CPU (rayon), with a random-projection
//!   forest initialisation as in pynndescent, deterministic for a seed whatever the thread
//!   count (see [`cpu`]).
//!
//! Builders assume finite data: check it upstream with
//! [`DatasetView::check_finite`](weft_core::DatasetView::check_finite).

pub mod cpu;
pub mod params;
mod rptree;

pub use cpu::{BuildStats, NnDescentCpu};
pub use params::NnDescentParams;
