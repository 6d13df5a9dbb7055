//! Builds and binds this crate's kernel module (`kernels/example_norms/`): weft-kernels inlines
//! weft's shared headers, compiles cubins when nvcc is available, embeds the source for NVRTC,
//! and generates `$OUT_DIR/example_norms.rs` (the module static, an argument struct and a
//! launcher per kernel). Never touches a GPU.

fn main() {
    weft_kernels::build_crate_kernels("weft_gpu");
}
