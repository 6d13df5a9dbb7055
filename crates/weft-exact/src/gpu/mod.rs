//! Exact k-NN on the GPU, behind the `cuda` feature: [`ExactGpu`] (brute-force search and exact
//! k-NN graphs; L2, inner product, cosine; f32, f16, u8, i8; k up to [`MAX_K`]) over this
//! crate's kernel module `kernels/exact` (see `docs/kernels.md`), and [`launch::exact_norms`],
//! the squared-norms kernel other GPU crates share.

use weft_gpu::KernelModule;

mod exact;
/// The generated bindings of this crate's kernel module (weft-kernels, from the kernels'
/// argument structs).
mod kernels;
pub mod launch;

pub use exact::{ExactGpu, ExactPlan, MAX_K};

/// This crate's kernel modules (for the NVRTC check and kernel listings).
pub fn kernel_modules() -> Vec<&'static KernelModule> {
    vec![&kernels::exact::MODULE]
}

#[cfg(test)]
mod tests {
    #[test]
    fn nvrtc_compiles_every_module() {
        weft_gpu::testing::assert_nvrtc_compiles(
            "nvrtc_compiles_every_module",
            &super::kernel_modules(),
        );
    }
}
