//! With the `cuda` feature: builds and binds this crate's CUDA kernel module (`kernels/exact` at
//! the top of the workspace) with weft-kernels (typed launchers generated from the kernels'
//! argument structs, cubins when nvcc is available, the source for NVRTC always). Never touches
//! a GPU.

fn main() {
    if std::env::var_os("CARGO_FEATURE_CUDA").is_some() {
        weft_kernels::build_weft_kernels("weft_gpu", &["exact"]);
    }
}
