//! # weft-grnnd
//!
//! GRNND (Li, Li, Chang & Miyazaki, 2025): RNN-Descent redesigned for the GPU. It uses
//! disordered neighbour updates, fixed-capacity double-buffered pools, warp-cooperative
//! distances, and atomic insertion of packed (distance, id) entries. It shares its parameters
//! with the CPU RNN-Descent of `weft-rnndescent` ([`GrnndParams`] is the same type), so the two
//! back ends can be compared setting by setting.
//!
//! The builder, [`GrnndGpu`] (name `grnnd`), is behind the `cuda` feature, with the device side:
//! the kernels in the workspace's `kernels/grnnd/`, the host orchestration, connectivity check and
//! repair in `gpu::grnnd`, launched through weft-gpu. `docs/grnnd.md` describes the design, the
//! ambiguities of the paper and how they were resolved, and the measured figures.

#[cfg(feature = "cuda")]
pub mod gpu;

#[cfg(feature = "cuda")]
pub use gpu::GrnndGpu;

/// The parameters of GRNND: those of the CPU RNN-Descent, including the GPU-only fields
/// (back-edge ratio `rho`, update order, reverse sampling, pair cap).
pub type GrnndParams = weft_rnndescent::RnnDescentParams;
