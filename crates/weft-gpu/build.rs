//! Builds and binds weft-gpu's own kernel module (the workspace's `kernels/testing`) with
//! weft-kernels. Never runs nvidia-smi or touches a GPU.

fn main() {
    weft_kernels::build_weft_kernels("crate", &["testing"]);
}
