//! The generated bindings of this crate's kernel modules (see `build.rs`).

/// `kernels/gnnd`: GNND's sampling, join, merge and the GGM cross initialisation.
#[allow(dead_code)]
pub(crate) mod gnnd {
    include!(concat!(env!("OUT_DIR"), "/gnnd.rs"));
}
