//! CAGRA's whole construction on the GPU as one [`GraphBuilder`]: [`CagraPipelineGpu`], a
//! k-NN graph from any [`GpuKnnSource`] (or by the exact GPU kernels, [`KnnSource::Exact`]),
//! then [`CagraGpu`].
//!
//! A source (weft-gpu's [`weft_gpu::knn_source`]) hands its graph over on the host
//! ([`GpuKnnGraph::Host`]: any `KnnGraphBuilder` through [`weft_gpu::HostKnn`]) or left on
//! the device ([`GpuKnnGraph::Device`]: GNND, `weft_nndescent::NnDescentGpu`), in which case
//! the optimiser reads it there without a host round trip.

use std::sync::Arc;

use weft_core::{
    BuildCtx, DatasetView, Element, FixedDegreeGraph, GraphBuilder, GraphOptimizer, Metric, Result,
};
use weft_exact::ExactGpu;
use weft_gpu::{GpuContext, GpuKnnGraph, GpuKnnSource};

use super::CagraGpu;
use crate::pipeline::check_pipeline_input;
use crate::{CagraParams, KnnSource};

/// CAGRA on the GPU (name `cagra`, GPU back end): the k-NN graph of degree
/// [`CagraParams::intermediate_degree`] from the source `S` ([`KnnSource::NnDescent`], the
/// default; the `weft` facade passes GNND, `weft_nndescent::NnDescentGpu`, which leaves its
/// graph on the device) or by the exact GPU kernels ([`KnnSource::Exact`],
/// [`ExactGpu::knn_graph`]), then [`CagraGpu`] down to [`CagraParams::graph_degree`], with
/// entry points and the connectivity repair.
#[derive(Clone, Debug)]
pub struct CagraPipelineGpu<S> {
    ctx: Arc<GpuContext>,
    knn: S,
}

impl<S: GpuKnnSource> CagraPipelineGpu<S> {
    /// The pipeline on `ctx` whose k-NN graphs `knn` builds (a device-resident source must
    /// leave them on the GPU of `ctx`).
    pub fn new(ctx: Arc<GpuContext>, knn: S) -> Self {
        CagraPipelineGpu { ctx, knn }
    }

    /// The GPU this pipeline optimises on.
    pub fn context(&self) -> &Arc<GpuContext> {
        &self.ctx
    }
}

impl<S: GpuKnnSource> GraphBuilder for CagraPipelineGpu<S> {
    type Params = CagraParams;
    type Output = FixedDegreeGraph;

    fn name(&self) -> &'static str {
        "cagra"
    }

    fn build<T: Element>(
        &self,
        data: DatasetView<'_, T>,
        metric: Metric,
        params: &CagraParams,
        ctx: &BuildCtx,
    ) -> Result<FixedDegreeGraph> {
        check_pipeline_input(data, params, ctx)?;
        let k = params.intermediate_degree;
        let knn = match params.knn {
            KnnSource::NnDescent => self.knn.knn_graph(data, metric, k, ctx)?,
            KnnSource::Exact => {
                GpuKnnGraph::Host(ExactGpu::new(&self.ctx).knn_graph(data, metric, k, ctx)?)
            }
        };
        let optimizer = CagraGpu::new(&self.ctx);
        match knn {
            GpuKnnGraph::Device(knn) => {
                optimizer.optimize_device(data, metric, &knn, params.graph_degree, params, ctx)
            }
            GpuKnnGraph::Host(knn) => {
                optimizer.optimize(data, metric, &knn, params.graph_degree, params, ctx)
            }
        }
    }
}
