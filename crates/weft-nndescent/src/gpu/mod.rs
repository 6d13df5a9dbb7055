//! NN-Descent on the GPU (GNND): [`NnDescentGpu`], behind the `cuda` feature.
//!
//! The algorithm is [`gnnd`] (host code) over this crate's kernel module `kernels/gnnd` (see
//! `docs/gnnd.md`); it reads [`NnDescentParams`] directly: `gpu_sample` is the sample count p,
//! `max_iters` and `delta` bound the iterations, the build context's seed seeds the random
//! initial graph; offers are symmetric, four per sample row, into inboxes of `max(k, 8 p)`
//! slots (the default [`gnnd::GnndTuning`], the settings measured best in `docs/gnnd.md`). The
//! CPU-only fields (`rho`, `max_candidates`, `n_trees`, `leaf_size`) are ignored.
//!
//! [`NnDescentGpu::build_device`] leaves the graph on the device ([`DeviceKnnGraph`]) for the
//! next stage, and so does [`NnDescentGpu`] as a [`GpuKnnSource`] (the k-NN source of
//! weft-cagra's GPU pipeline); [`KnnGraphBuilder::build`] brings it back. GPU results are valid k-NN graphs but
//! are not bit-reproducible for a seed (atomic arrival order decides the reverse samples).
//!
//! Out of device memory: when the vectors, the graph and the work buffers of a host-to-host
//! build exceed the budget (`gpu_mem_limit`, [`NnDescentGpu::with_budget`], else the device's
//! free memory less a margin), the build is split into shards merged pairwise with GGM
//! ([`crate::sharded`], `docs/gnnd.md`): by default locality-aware shards, each merged with its
//! three nearest shards (`shard_schedule`, [`crate::ShardSchedule`]). [`NnDescentGpu::merge`]
//! merges two k-NN graphs.

use std::sync::Arc;

use weft_core::{
    BuildCtx, DatasetView, Element, KnnGraph, KnnGraphBuilder, Metric, Params, Result,
};
use weft_gpu::{DeviceKnnGraph, DeviceMatrix, GpuContext, GpuKnnGraph, GpuKnnSource, KernelModule};

use crate::NnDescentParams;
use crate::sharded::{ShardPlan, ShardedStats, build_sharded};

pub mod gnnd;

pub use gnnd::{Gnnd, GnndStats, GnndTuning, MergeLists, MergeSide, build_kernels, merge_kernels};

/// The generated bindings of this crate's kernel modules (weft-kernels, from the kernels'
/// argument structs).
mod kernels;

/// This crate's kernel modules (for the NVRTC check and kernel listings).
pub fn kernel_modules() -> Vec<&'static KernelModule> {
    vec![&kernels::gnnd::MODULE]
}

/// GNND on one GPU (see the [module docs](self)). Name: `nndescent`.
#[derive(Clone, Debug)]
pub struct NnDescentGpu {
    ctx: Arc<GpuContext>,
    budget: Option<u64>,
}

impl NnDescentGpu {
    /// GNND on the GPU of `ctx`, within the default memory budget.
    pub fn new(ctx: Arc<GpuContext>) -> Self {
        NnDescentGpu { ctx, budget: None }
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

    /// The device budget of a build with `params`: the smaller of the builder's and
    /// `gpu_mem_limit`, if any.
    fn budget_for(&self, params: &NnDescentParams) -> Option<u64> {
        match (self.budget, params.gpu_mem_limit) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    fn gnnd(&self, params: &NnDescentParams) -> Gnnd<'_> {
        let g = Gnnd::new(&self.ctx);
        match self.budget_for(params) {
            Some(b) => g.with_budget(b),
            None => g,
        }
    }

    /// The shard plan of a host-to-host build of `data` with `params` (its `shard_schedule`;
    /// the partition of [`crate::ShardSchedule::Nearest`] is seeded with `seed`), or `None`
    /// when the build fits the device budget in one piece.
    pub fn plan<T: Element>(
        &self,
        data: DatasetView<'_, T>,
        metric: Metric,
        k: usize,
        params: &NnDescentParams,
        seed: u64,
    ) -> Result<Option<ShardPlan>> {
        params.validate(data.rows(), data.dim())?;
        weft_core::error::check_graph_k(k, data.rows())?;
        let avail = match self.budget_for(params) {
            Some(b) => b.min(self.ctx.default_budget()?),
            None => self.ctx.default_budget()?,
        };
        if GnndTuning::default().bytes_needed::<T>(data.rows(), data.dim(), k, params, true)
            <= avail
        {
            return Ok(None);
        }
        ShardPlan::for_schedule::<T>(data, metric, k, params, avail, params.shard_schedule, seed)
            .map(Some)
    }

    /// The out-of-memory build (shards merged pairwise, see [`crate::sharded`]) under `plan`,
    /// with its statistics; [`NnDescentGpu::plan`] gives the plan (a plan that does not
    /// partition the rows of `data` is `InvalidInput`).
    pub fn build_sharded<T: Element>(
        &self,
        data: DatasetView<'_, T>,
        metric: Metric,
        k: usize,
        params: &NnDescentParams,
        plan: &ShardPlan,
        ctx: &BuildCtx,
    ) -> Result<(KnnGraph, ShardedStats)> {
        params.validate(data.rows(), data.dim())?;
        weft_core::error::check_graph_k(k, data.rows())?;
        build_sharded(&self.ctx, data, metric, k, params, plan, ctx)
    }

    /// Merges the k-NN graphs of `a` and `b` (GGM, see [`gnnd`]) into the graph of `a`'s rows
    /// followed by `b`'s, using `params`' GPU fields (sample count, iterations, `delta`, budget)
    /// and the context's seed.
    pub fn merge<T: Element>(
        &self,
        a: MergeSide<'_, DatasetView<'_, T>>,
        b: MergeSide<'_, DatasetView<'_, T>>,
        metric: Metric,
        params: &NnDescentParams,
        ctx: &BuildCtx,
    ) -> Result<(KnnGraph, GnndStats)> {
        params.validate(a.vectors.rows() + b.vectors.rows(), a.vectors.dim())?;
        self.gnnd(params).merge(a, b, metric, params, ctx)
    }

    /// Builds the k-NN graph of vectors already on the device and leaves it there.
    pub fn build_device<T: Element>(
        &self,
        data: &DeviceMatrix<T>,
        metric: Metric,
        k: usize,
        params: &NnDescentParams,
        ctx: &BuildCtx,
    ) -> Result<(DeviceKnnGraph, GnndStats)> {
        params.validate(data.rows(), data.dim())?;
        self.gnnd(params).build_device(data, metric, k, params, ctx)
    }

    /// Like [`KnnGraphBuilder::build`], with the build statistics (of every shard build and
    /// merge, in order, when the build runs out of memory).
    pub fn build_with_stats<T: Element>(
        &self,
        data: DatasetView<'_, T>,
        metric: Metric,
        k: usize,
        params: &NnDescentParams,
        ctx: &BuildCtx,
    ) -> Result<(KnnGraph, GnndStats)> {
        params.validate(data.rows(), data.dim())?;
        weft_core::error::check_graph_k(k, data.rows())?;
        if let Some(plan) = self.plan::<T>(data, metric, k, params, ctx.seed())? {
            let (g, stats) = self.build_sharded(data, metric, k, params, &plan, ctx)?;
            return Ok((g, stats.total()));
        }
        self.gnnd(params).build(data, metric, k, params, ctx)
    }
}

impl KnnGraphBuilder for NnDescentGpu {
    type Params = NnDescentParams;

    fn name(&self) -> &'static str {
        "nndescent"
    }

    fn build<T: Element>(
        &self,
        data: DatasetView<'_, T>,
        metric: Metric,
        k: usize,
        params: &NnDescentParams,
        ctx: &BuildCtx,
    ) -> Result<KnnGraph> {
        self.build_with_stats(data, metric, k, params, ctx)
            .map(|(g, _)| g)
    }
}

/// GNND as the k-NN source of a GPU pipeline (weft-cagra's `CagraPipelineGpu`), with the
/// default [`NnDescentParams`]: the vectors are uploaded to the builder's GPU and the graph is
/// left there ([`GpuKnnGraph::Device`], [`NnDescentGpu::build_device`]) for the next stage to
/// read without a host round trip. Unlike [`KnnGraphBuilder::build`], a build that exceeds the
/// device budget is not split into shards.
impl GpuKnnSource for NnDescentGpu {
    fn name(&self) -> &'static str {
        KnnGraphBuilder::name(self)
    }

    fn knn_graph<T: Element>(
        &self,
        data: DatasetView<'_, T>,
        metric: Metric,
        k: usize,
        ctx: &BuildCtx,
    ) -> Result<GpuKnnGraph> {
        weft_core::error::check_graph_k(k, data.rows())?;
        let device_data = DeviceMatrix::upload(&self.ctx, data)?;
        let (knn, _) =
            self.build_device(&device_data, metric, k, &NnDescentParams::default(), ctx)?;
        Ok(GpuKnnGraph::Device(knn))
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
