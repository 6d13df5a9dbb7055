//! # weft-grnnd
//!
//! GRNND (Li et al., 2025): RNN-Descent redesigned for the GPU. It uses disordered neighbour
//! updates, fixed-capacity double-buffered pools, warp-cooperative distances, and atomic
//! insertion of packed (distance, id) entries. It shares its parameters with the CPU
//! RNN-Descent of `weft-rnndescent` ([`GrnndParams`] is the same type), so the two back ends
//! can be compared setting by setting.
//!
//! **Status:** the GPU builder is not implemented yet, so `grnnd` is not in weft's registry:
//! asking for it gives a clear "not available yet" error.

/// The parameters of GRNND: those of the CPU RNN-Descent, including the GPU-only fields
/// (back-edge ratio `rho`, update order).
pub type GrnndParams = weft_rnndescent::RnnDescentParams;
