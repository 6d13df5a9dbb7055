//! GRNND on the GPU: [`GrnndGpu`], behind the `cuda` feature.
//!
//! The algorithm is [`grnnd`] (host code) over this crate's kernel module `kernels/grnnd` (see
//! `docs/grnnd.md`); it reads [`GrnndParams`] directly: `s`, `r`, `t1`, `t2`, `degree`,
//! `fill_fraction` (short rows filled from pruned candidates, as on the CPU), `rho`,
//! `update_order`, `reverse_sampling`, `new_old_flags`, `strict_prune`, `max_pairs` and
//! `final_reverse_edges`; the build context's seed seeds the random start and the random pair
//! order; `repair` turns the connectivity repair on or off. The output graph's entry
//! points are the device medoid (which the repair makes every vertex reachable from) followed
//! by `entry_points` points spread over the data (`weft_graph::connect::spread_entry_points`). GRNND's pools have a fixed capacity
//! `R`, so candidate lists are always cut to `R`: `truncate_updates = false` (a CPU-only
//! setting) is refused with `Error::InvalidParams`, as is `r` above
//! [`grnnd::MAX_R`].
//!
//! [`GrnndGpu::build_device`] leaves the graph on the device ([`DeviceFixedGraph`]) for the GPU
//! search; [`GraphBuilder::build`] brings it back with the entry point. GPU results are valid
//! graphs but are not bit-reproducible for a seed (atomic arrival order decides which of
//! competing candidates land first).

use std::sync::Arc;

use weft_core::{
    BuildCtx, DatasetView, Element, Error, FixedDegreeGraph, GraphBuilder, Metric, Params, Result,
};
use weft_gpu::{DeviceFixedGraph, DeviceMatrix, GpuContext, KernelModule};

use crate::GrnndParams;

pub mod grnnd;

use grnnd::MAX_R;
pub use grnnd::{Grnnd, GrnndStats};

/// The generated bindings of this crate's kernel modules (weft-kernels, from the kernels'
/// argument structs).
mod kernels;

/// This crate's kernel modules (for the NVRTC check and kernel listings).
pub fn kernel_modules() -> Vec<&'static KernelModule> {
    vec![&kernels::grnnd::MODULE]
}

/// GRNND on one GPU (see the [module docs](self)). Name: `grnnd`.
#[derive(Clone, Debug)]
pub struct GrnndGpu {
    ctx: Arc<GpuContext>,
    budget: Option<u64>,
}

impl GrnndGpu {
    /// GRNND on the GPU of `ctx`, within the default memory budget.
    pub fn new(ctx: Arc<GpuContext>) -> Self {
        GrnndGpu { ctx, budget: None }
    }

    /// Limits device memory to `bytes` (a build that does not fit fails with
    /// `Error::OutOfDeviceMemory` before allocating).
    pub fn with_budget(mut self, bytes: u64) -> Self {
        self.budget = Some(bytes);
        self
    }

    /// The GPU this builder runs on.
    pub fn context(&self) -> &Arc<GpuContext> {
        &self.ctx
    }

    /// Checks `params` for `rows` points of `dim` dimensions, the GPU limits included: the
    /// shared validation, then what GRNND cannot honour (`truncate_updates = false`, `r` above
    /// [`MAX_R`]).
    fn check(params: &GrnndParams, rows: usize, dim: usize) -> Result<()> {
        params.validate(rows, dim)?;
        if !params.truncate_updates {
            return Err(Error::invalid_param(
                "truncate_updates",
                "GRNND's pools have a fixed capacity R, so candidate lists are always cut to R; \
                 `false` is a CPU-only setting",
            ));
        }
        if params.r > MAX_R {
            return Err(Error::invalid_param(
                "r",
                format!(
                    "the GPU pool capacity R must be at most {MAX_R}, got {}",
                    params.r
                ),
            ));
        }
        Ok(())
    }

    fn grnnd(&self) -> Grnnd<'_> {
        let g = Grnnd::new(&self.ctx);
        match self.budget {
            Some(b) => g.with_budget(b),
            None => g,
        }
    }

    /// Builds the graph of vectors already on the device and leaves it there (the entry point
    /// is `stats.entry_point`).
    pub fn build_device<T: Element>(
        &self,
        data: &DeviceMatrix<T>,
        metric: Metric,
        params: &GrnndParams,
        ctx: &BuildCtx,
    ) -> Result<(DeviceFixedGraph, GrnndStats)> {
        Self::check(params, data.rows(), data.dim())?;
        self.grnnd().build_device(data, metric, params, ctx)
    }

    /// Like [`GraphBuilder::build`], with the build statistics.
    pub fn build_with_stats<T: Element>(
        &self,
        data: DatasetView<'_, T>,
        metric: Metric,
        params: &GrnndParams,
        ctx: &BuildCtx,
    ) -> Result<(FixedDegreeGraph, GrnndStats)> {
        ctx.check_cancelled()?;
        Self::check(params, data.rows(), data.dim())?;
        let (graph, stats) = self.grnnd().build(data, metric, params, ctx)?;
        // Everything is reachable from the medoid, so from any set that holds it.
        let spread = ctx.install(|| {
            weft_graph::connect::spread_entry_points(data, metric, params.entry_points, ctx.seed())
        })??;
        let mut entries = vec![stats.entry_point];
        entries.extend(spread.into_iter().filter(|&e| e != stats.entry_point));
        Ok((graph.with_entry_points(entries), stats))
    }
}

impl GraphBuilder for GrnndGpu {
    type Params = GrnndParams;
    type Output = FixedDegreeGraph;

    fn name(&self) -> &'static str {
        "grnnd"
    }

    fn build<T: Element>(
        &self,
        data: DatasetView<'_, T>,
        metric: Metric,
        params: &GrnndParams,
        ctx: &BuildCtx,
    ) -> Result<FixedDegreeGraph> {
        self.build_with_stats(data, metric, params, ctx)
            .map(|(g, _)| g)
    }
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
