//! NN-Descent on the GPU (GNND): [`NnDescentGpu`], behind the `cuda` feature.
//!
//! The algorithm and its kernels live in `weft_gpu::gnnd` (see `docs/gnnd.md`); this builder
//! maps [`NnDescentParams`] to [`GnndConfig`]: `gpu_sample` is the sample count p, `max_iters`
//! and `delta` bound the iterations, the build context's seed seeds the random initial graph;
//! offers are symmetric, four per sample row, into inboxes of `max(k, 8 p)` slots (the settings
//! measured best in `docs/gnnd.md`). The CPU-only fields (`rho`, `max_candidates`, `n_trees`,
//! `leaf_size`) are ignored.
//!
//! [`NnDescentGpu::build_device`] leaves the graph on the device ([`DeviceKnnGraph`]) for the
//! next stage; [`KnnGraphBuilder::build`] brings it back. GPU results are valid k-NN graphs but
//! are not bit-reproducible for a seed (atomic arrival order decides the reverse samples).

use std::sync::Arc;

use weft_core::{
    BuildCtx, DatasetView, Element, KnnGraph, KnnGraphBuilder, Metric, Params, Result,
};
use weft_gpu::{DeviceKnnGraph, DeviceMatrix, Gnnd, GnndConfig, GnndStats, GpuContext};

use crate::NnDescentParams;

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

    /// The GNND settings `params` give for the seed `seed`.
    pub fn config(params: &NnDescentParams, seed: u64) -> GnndConfig {
        GnndConfig {
            sample: params.gpu_sample,
            max_iters: params.max_iters,
            delta: params.delta,
            inbox: 0,
            symmetric: true,
            row_offers: 4,
            seed,
        }
    }

    fn gnnd(&self) -> Gnnd<'_> {
        let g = Gnnd::new(&self.ctx);
        match self.budget {
            Some(b) => g.with_budget(b),
            None => g,
        }
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
        self.gnnd()
            .build_device(data, metric, k, &Self::config(params, ctx.seed()), ctx)
    }

    /// Like [`KnnGraphBuilder::build`], with the build statistics.
    pub fn build_with_stats<T: Element>(
        &self,
        data: DatasetView<'_, T>,
        metric: Metric,
        k: usize,
        params: &NnDescentParams,
        ctx: &BuildCtx,
    ) -> Result<(KnnGraph, GnndStats)> {
        params.validate(data.rows(), data.dim())?;
        self.gnnd()
            .build(data, metric, k, &Self::config(params, ctx.seed()), ctx)
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
