//! The GPU back end (behind the `cuda` feature): the device optimiser [`CagraOptimizer`]
//! (kernels in `kernels/cagra/`), [`CagraGpu`] (the [`GraphOptimizer`] over it, connected and
//! with entry points like [`CagraCpu`](crate::CagraCpu)), and the whole GPU construction
//! [`CagraPipelineGpu`] over any k-NN graph source (weft-gpu's [`weft_gpu::GpuKnnSource`]).

mod optimizer;
mod pipeline;

use weft_core::{
    BuildCtx, DatasetView, Element, FixedDegreeGraph, GraphOptimizer, KnnGraph, Metric, Params,
    Result,
};
use weft_gpu::{DeviceKnnGraph, GpuContext, KernelModule};

use crate::CagraParams;
use crate::cpu::{check_input, check_optimize_inputs, connect, connect_with_entries};
use weft_graph::connect::spread_entry_points;

pub use optimizer::{CagraOptimizer, MAX_KNN_DEGREE};
pub use pipeline::CagraPipelineGpu;

/// The generated bindings of this crate's kernel module.
pub(crate) mod kernels {
    /// `kernels/cagra`: detour counting and pruning, the reverse graph, the merge.
    #[allow(dead_code)]
    pub(crate) mod cagra {
        include!(concat!(env!("OUT_DIR"), "/cagra.rs"));
    }
}

/// This crate's kernel modules (for NVRTC checks and kernel reports).
pub fn kernel_modules() -> Vec<&'static KernelModule> {
    vec![&kernels::cagra::MODULE]
}

/// CAGRA graph optimisation on a GPU, name `cagra`: the same output as
/// [`CagraCpu`](crate::CagraCpu), bit for bit (detour counts, pruned rows, reverse rows and the
/// merged graph), from kernels in `kernels/cagra/`.
#[derive(Clone, Copy, Debug)]
pub struct CagraGpu<'c> {
    ctx: &'c GpuContext,
}

impl<'c> CagraGpu<'c> {
    /// The optimiser on `ctx`.
    pub fn new(ctx: &'c GpuContext) -> Self {
        CagraGpu { ctx }
    }

    /// Optimises `knn` (rows sorted by distance, as [`KnnGraph::validate`] checks) into a graph
    /// of out-degree `degree`, without entry points.
    pub fn optimize_knn(
        &self,
        knn: &KnnGraph,
        degree: usize,
        ctx: &BuildCtx,
    ) -> Result<FixedDegreeGraph> {
        check_input(knn, degree)?;
        ctx.check_cancelled()?;
        knn.validate()?;
        ctx.progress().begin("cagra: GPU optimisation", None);
        let graph = CagraOptimizer::new(self.ctx).optimize(knn, degree);
        ctx.progress().end();
        graph
    }

    /// Optimises a k-NN graph of `data` left on the device (by GNND or the exact GPU kernels)
    /// into a host graph of out-degree `degree` with [`CagraParams::entry_points`] spread entry
    /// points, connected from them unless [`CagraParams::repair`] is off
    /// ([`connect`]). The rows' structure is validated on the device; that they
    /// are sorted by distance is the producer's guarantee (the device distances are not read).
    pub fn optimize_device<T: Element>(
        &self,
        data: DatasetView<'_, T>,
        metric: Metric,
        knn: &DeviceKnnGraph,
        degree: usize,
        params: &CagraParams,
        ctx: &BuildCtx,
    ) -> Result<FixedDegreeGraph> {
        params.validate(knn.n(), data.dim())?;
        if knn.n() != data.rows() {
            return Err(weft_core::Error::dim_mismatch(
                "k-NN graph vertices vs data rows",
                data.rows(),
                knn.n(),
            ));
        }
        ctx.check_cancelled()?;
        ctx.progress().begin("cagra: GPU optimisation", None);
        let opt = CagraOptimizer::new(self.ctx);
        // The entry points need only the data: the host picks them while the device works.
        let (graph, entries) = ctx.install(|| {
            rayon::join(
                || {
                    opt.optimize_device(knn, degree)
                        .and_then(|g| g.download(self.ctx))
                },
                || spread_entry_points(data, metric, params.entry_points, ctx.seed()),
            )
        })?;
        ctx.progress().end();
        connect_with_entries(graph?, entries?, data, metric, params, ctx)
    }
}

impl GraphOptimizer for CagraGpu<'_> {
    type Params = CagraParams;

    fn name(&self) -> &'static str {
        "cagra"
    }

    fn optimize<T: Element>(
        &self,
        data: DatasetView<'_, T>,
        metric: Metric,
        knn: &KnnGraph,
        degree: usize,
        params: &CagraParams,
        ctx: &BuildCtx,
    ) -> Result<FixedDegreeGraph> {
        check_optimize_inputs(data, knn, params)?;
        let graph = self.optimize_knn(knn, degree, ctx)?;
        connect(graph, data, metric, params, ctx)
    }
}
