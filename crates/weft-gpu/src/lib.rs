//! # weft-gpu
//!
//! The GPU runtime of weft, and the only crate that names cudarc.
//!
//! - [`probe`] finds a device and returns a [`GpuContext`], or the reason there is none (it
//!   never panics, also on machines without the CUDA driver).
//! - [`GpuContext`]: device, stream, memory accounting ([`GpuContext::check_fits`] says
//!   [`weft_core::Error::OutOfDeviceMemory`] before allocating) and the per-context cache of
//!   loaded kernel modules.
//! - [`DeviceMatrix`]: vectors on the device, rows padded to 16 elements for 16-byte loads.
//! - Kernel delivery ([`KernelLoadPath`]): cubins built by nvcc at build time when it was
//!   available, else the embedded sources compiled by NVRTC at run time and cached on disk; see
//!   `docs/kernels.md`.
//! - [`ExactGpu`]: brute-force k-NN search and exact k-NN graphs (L2, inner product, cosine;
//!   f32, f16, u8, i8; k up to [`exact::MAX_K`]).
//! - [`Gnnd`]: GPU NN-Descent (GNND) k-NN graphs, left on the device as a [`DeviceKnnGraph`]
//!   or brought back.
//! - [`GgnnBuild`]: the GGNN hierarchical construction (device side of `weft_ggnn::GgnnGpu`).
//! - [`GgnnSearchDevice`]: the GGNN query (one block per query, tau slack stop rule).
//! - [`Grnnd`]: GRNND (GPU RNN-Descent) search graphs of fixed degree, left on the device as a
//!   [`DeviceFixedGraph`] or brought back.
//! - [`CagraOptimizer`]: CAGRA graph optimisation (detour pruning, reverse edges, merge) of a
//!   k-NN graph on the host or on the device.
//! - [`CagraSearchDevice`]: CAGRA-style graph search (single- and multi-CTA, filters, k up to
//!   1024) over a [`DeviceFixedGraph`] or a host graph.
//! - [`testing`]: the skip-or-fail helper for GPU tests and device-side checks of the kernel
//!   headers.
//!
//! Every kernel launch goes through one checked wrapper (`launch.rs`); every CUDA call's result
//! is checked and mapped to [`weft_core::Error::Gpu`] with context.

pub mod cagra;
pub mod cagra_search;
pub mod context;
pub mod device_graph;
pub mod exact;
pub mod ggnn;
pub mod ggnn_search;
pub mod gnnd;
pub mod grnnd;
pub mod loader;
pub mod matrix;
pub mod nvrtc;
pub mod testing;

mod launch;
mod search_common;

pub use cagra::{CagraOptimizer, CagraStages, DeviceFixedGraph};
pub use cagra_search::{CagraSearchConfig, CagraSearchDevice, CagraSearchMode};
pub use context::{DeviceInfo, GpuContext, driver_library_present, probe, probe_device};
pub use device_graph::DeviceKnnGraph;
pub use exact::{ExactGpu, ExactPlan};
pub use ggnn::{GgnnBuild, GgnnConfig, GgnnPhaseTime, GgnnShape, GgnnTuning};
pub use ggnn_search::{GgnnSearchConfig, GgnnSearchDevice, GgnnSearchSession};
pub use gnnd::{Gnnd, GnndConfig, GnndStats};
pub use grnnd::{Grnnd, GrnndConfig, GrnndStats, PairOrder};
pub use loader::{KernelLoadPath, KernelMode};
pub use matrix::DeviceMatrix;

/// Writes a diagnostic line to stderr when `WEFT_GPU_LOG` is set (kernel delivery, cache
/// problems).
pub(crate) fn log(msg: &str) {
    if std::env::var_os("WEFT_GPU_LOG").is_some_and(|v| !v.is_empty() && v != "0") {
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), "weft-gpu: {msg}");
    }
}
