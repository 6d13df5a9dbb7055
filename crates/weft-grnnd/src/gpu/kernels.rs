//! The generated bindings of this crate's kernel modules (see `build.rs`).

/// `kernels/grnnd`: GRNND's start, update rounds, reverse edges, finalisation, entry point
/// and reachability.
#[allow(dead_code)]
pub(crate) mod grnnd {
    include!(concat!(env!("OUT_DIR"), "/grnnd.rs"));
}
