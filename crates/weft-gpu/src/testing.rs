//! Helpers for GPU tests, here and in other crates, and device-side checks of the shared kernel
//! headers (`kernels/include/weft/`) against their Rust counterparts.
//!
//! GPU tests call [`gpu_or_skip`] first: without a usable GPU it prints
//! `SKIPPED (no CUDA device: <reason>)` to stderr (past the test harness's capture, so that the
//! skip is visible) and returns `None`; with `WEFT_REQUIRE_GPU=1` it panics instead, so that a run
//! on a GPU machine cannot pass by skipping.

use std::io::Write as _;

use weft_core::{DatasetView, Element, Metric, NodeId, Result};

use crate::context::{GpuContext, probe};
use crate::launch;
use crate::matrix::DeviceMatrix;

/// Whether `WEFT_REQUIRE_GPU` asks for GPU tests to fail rather than skip.
pub fn gpu_required() -> bool {
    std::env::var("WEFT_REQUIRE_GPU").is_ok_and(|v| !v.is_empty() && v != "0")
}

/// A GPU context for test `test`, or `None` after printing why the test is skipped.
///
/// # Panics
/// When there is no usable GPU and `WEFT_REQUIRE_GPU=1` is set: that is the point of the
/// variable.
pub fn gpu_or_skip(test: &str) -> Option<GpuContext> {
    match probe() {
        Ok(ctx) => Some(ctx),
        Err(e) => {
            if gpu_required() {
                panic!("{test}: WEFT_REQUIRE_GPU is set but no CUDA device can be used: {e}");
            }
            let _ = writeln!(std::io::stderr(), "{test}: SKIPPED (no CUDA device: {e})");
            None
        }
    }
}

/// Runs kernel `testing_rng_u64`: for `i < count`, `[mix64(i ^ seed), hash3(seed, i, 7 i + 3),
/// below(hash3(seed, i, 1), n + i)]`.
pub fn rng_on_device(ctx: &GpuContext, seed: u64, count: usize, n: u64) -> Result<Vec<u64>> {
    let mut out = ctx.alloc_zeros::<u64>(3 * count)?;
    launch::testing_rng(ctx, seed, count, n, &mut out.slice_mut(0..3 * count))?;
    ctx.download(&out, 3 * count)
}

/// Runs kernel `testing_pair_distance_<dtype>`: `distance(a_i, b_i)` by the warp distance
/// routine of `weft/distance.cuh`.
pub fn pair_distances_on_device<T: Element>(
    ctx: &GpuContext,
    a: DatasetView<'_, T>,
    b: DatasetView<'_, T>,
    metric: Metric,
) -> Result<Vec<f32>> {
    a.check_same_dim(&b, "pair distance rows")?;
    if a.rows() != b.rows() {
        return Err(weft_core::Error::dim_mismatch(
            "pair rows",
            a.rows(),
            b.rows(),
        ));
    }
    let n = a.rows();
    let da = DeviceMatrix::upload(ctx, a)?;
    let db = DeviceMatrix::upload(ctx, b)?;
    let mut out = ctx.alloc_zeros::<f32>(n)?;
    launch::testing_pair_distance::<T>(
        ctx,
        &da.rows_view(0, n)?,
        &db.rows_view(0, n)?,
        n as u32,
        da.stride() as u32,
        metric,
        &mut out.slice_mut(0..n),
    )?;
    ctx.download(&out, n)
}

/// Runs kernel `testing_warp_sort_f32` on runs of 32 (distance, id) pairs.
pub fn warp_sort_on_device(
    ctx: &GpuContext,
    dists: &[f32],
    ids: &[NodeId],
) -> Result<(Vec<f32>, Vec<NodeId>)> {
    if dists.len() != ids.len() || !dists.len().is_multiple_of(32) {
        return Err(weft_core::Error::InvalidInput(
            "warp sort needs equal lengths, a multiple of 32".into(),
        ));
    }
    let n = dists.len();
    let mut d = ctx.upload(dists)?;
    let mut i = ctx.upload(ids)?;
    launch::testing_warp_sort(
        ctx,
        &mut d.slice_mut(0..n.max(1)),
        &mut i.slice_mut(0..n.max(1)),
        (n / 32) as u32,
    )?;
    Ok((ctx.download(&d, n)?, ctx.download(&i, n)?))
}
