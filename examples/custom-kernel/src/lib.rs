//! # weft-example-kernel
//!
//! A worked example of a GPU algorithm that lives outside weft-gpu (`docs/adding-an-algorithm.md`
//! walks through it): the crate keeps its CUDA source in `kernels/example_norms/`, its build
//! script binds it with weft-kernels, and [`scaled_norms`] launches it through weft-gpu's
//! public API: [`weft_gpu::DeviceBuffer`]s for the data and the result, the generated argument
//! struct and launcher, and length checks before the launch.

use weft_core::{DatasetView, Result};
use weft_gpu::launch::{need, u32_of};
use weft_gpu::{GpuContext, KernelModule, Launch};

/// The generated bindings of `kernels/example_norms/` (see the build script).
mod kernels {
    include!(concat!(env!("OUT_DIR"), "/example_norms.rs"));
}

/// Threads per block of `example_scaled_norms` (one warp per row).
const BLOCK: u32 = 256;

/// This crate's kernel modules (for reports and the NVRTC check).
pub fn kernel_modules() -> [&'static KernelModule; 1] {
    [&kernels::MODULE]
}

/// `scale * |x|^2` for every row `x` of `data`, computed on the GPU of `ctx`.
pub fn scaled_norms(ctx: &GpuContext, data: DatasetView<'_, f32>, scale: f32) -> Result<Vec<f32>> {
    let rows = data.rows();
    if rows == 0 {
        return Ok(Vec::new());
    }
    let dim = data.dim();
    let packed: Vec<f32> = (0..rows)
        .flat_map(|r| data.row(r).iter().copied())
        .collect();
    let device_data = ctx.upload(&packed)?;
    let mut out = ctx.alloc_zeros::<f32>(rows)?;
    let rows32 = u32_of(rows, "rows")?;
    let dim32 = u32_of(dim, "dimension")?;
    // The kernel reads `rows * dim` floats and writes `rows`: check before launching.
    need(
        device_data.len(),
        rows as u64 * dim as u64,
        "example_scaled_norms data",
    )?;
    need(out.len(), rows as u64, "example_scaled_norms output")?;
    // SAFETY: each pointer's length was checked above (`need`) for these sizes.
    unsafe {
        kernels::example_scaled_norms(
            ctx,
            Launch::blocks(rows32.div_ceil(BLOCK / 32), BLOCK),
            &kernels::ExampleScaledNormsArgs {
                data: device_data.input(),
                rows: rows32,
                dim: dim32,
                scale,
                out: out.output(),
            },
        )
    }?;
    ctx.download(&out, rows)
}
