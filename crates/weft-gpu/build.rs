//! Builds and binds weft-gpu's own kernel modules (the workspace's `kernels/exact` and
//! `kernels/testing`) with weft-kernels. Never runs nvidia-smi or touches a GPU.

fn main() {
    weft_kernels::build_weft_kernels("crate", &["exact", "testing"]);
}
