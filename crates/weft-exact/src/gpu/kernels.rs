//! The generated bindings of this crate's kernel module (see `build.rs`).

/// `kernels/exact`: norms, distance tiles and top-k selection of the exact search.
#[allow(dead_code)]
pub(crate) mod exact {
    include!(concat!(env!("OUT_DIR"), "/exact.rs"));
}
