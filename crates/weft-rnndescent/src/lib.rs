//! # weft-rnndescent
//!
//! RNN-Descent (N. Ono, Y. Matsui, "Relative NN-Descent", ACM MM 2023) on the CPU with rayon:
//! [`RnnDescentCpu`] builds a flat search graph directly from the data by combining NN-Descent's
//! neighbour-of-neighbour propagation with the relative-neighbourhood-graph (RNG) pruning rule.
//!
//! [`RnnDescentParams`] is shared with GRNND on the GPU (crate `weft-grnnd`); the fields marked
//! "GPU only" there are ignored here.
//!
//! ```
//! use weft_core::{BuildCtx, DatasetView, GraphBuilder, Metric};
//! use weft_rnndescent::{RnnDescentCpu, RnnDescentParams};
//!
//! let data: Vec<f32> = (0..200 * 4).map(|i| ((i * 7919) % 1000) as f32).collect();
//! let view = DatasetView::new(&data, 200, 4).unwrap();
//! let graph = RnnDescentCpu
//!     .build(view, Metric::L2Squared, &RnnDescentParams::default(), &BuildCtx::new(7))
//!     .unwrap();
//! graph.validate().unwrap();
//! ```

mod build;
mod params;

pub use build::{BuildStats, RnnDescentCpu};
pub use params::{ReverseSampling, RnnDescentParams, UpdateOrder};
