//! GRNND on the GPU: [`GrnndGpu`], behind the `cuda` feature.
//!
//! The algorithm and its kernels live in `weft_gpu::grnnd` (see `docs/grnnd.md`); this builder
//! maps [`GrnndParams`] to [`GrnndConfig`]: `s`, `r`, `t1`, `t2`, `degree`, `rho`,
//! `update_order`, `reverse_sampling`, `new_old_flags`, `strict_prune`, `max_pairs` and
//! `final_reverse_edges` carry over; the build context's seed seeds the random start and the
//! random pair order; `repair` turns the connectivity repair on or off. The output graph's entry
//! points are the device medoid (which the repair makes every vertex reachable from) followed
//! by `entry_points` points spread over the data (`weft_graph::connect::spread_entry_points`). GRNND's pools have a fixed capacity
//! `R`, so candidate lists are always cut to `R`: `truncate_updates = false` (a CPU-only
//! setting) is refused with `Error::InvalidParams`, as is `r` above
//! [`weft_gpu::grnnd::MAX_R`].
//!
//! [`GrnndGpu::build_device`] leaves the graph on the device ([`DeviceFixedGraph`]) for the GPU
//! search; [`GraphBuilder::build`] brings it back with the entry point. GPU results are valid
//! graphs but are not bit-reproducible for a seed (atomic arrival order decides which of
//! competing candidates land first).

use std::sync::Arc;

use weft_core::{
    BuildCtx, DatasetView, Element, Error, FixedDegreeGraph, GraphBuilder, Metric, Params, Result,
};
use weft_gpu::grnnd::MAX_R;
use weft_gpu::{
    DeviceFixedGraph, DeviceMatrix, GpuContext, Grnnd, GrnndConfig, GrnndStats, PairOrder,
};
use weft_rnndescent::{ReverseSampling, UpdateOrder};

use crate::GrnndParams;

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

    /// The GRNND settings `params` give for the seed `seed` (after validating them for `rows`
    /// points of `dim` dimensions, the GPU limits included).
    pub fn config(params: &GrnndParams, rows: usize, dim: usize, seed: u64) -> Result<GrnndConfig> {
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
        Ok(GrnndConfig {
            s: params.s,
            r: params.r,
            t1: params.t1,
            t2: params.t2,
            degree: params.degree,
            rho: params.rho,
            order: match params.update_order {
                UpdateOrder::Random => PairOrder::Random,
                UpdateOrder::Ascending => PairOrder::Ascending,
                UpdateOrder::Descending => PairOrder::Descending,
            },
            reverse_closest: params.reverse_sampling == ReverseSampling::Closest,
            new_old: params.new_old_flags,
            strict: params.strict_prune,
            max_pairs: params.max_pairs,
            final_reverse: params.final_reverse_edges,
            repair: params.repair,
            seed,
        })
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
        let config = Self::config(params, data.rows(), data.dim(), ctx.seed())?;
        self.grnnd().build_device(data, metric, &config, ctx)
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
        let config = Self::config(params, data.rows(), data.dim(), ctx.seed())?;
        let (graph, stats) = self.grnnd().build(data, metric, &config, ctx)?;
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
