//! CAGRA's whole construction on the GPU as one [`GraphBuilder`]: [`CagraPipelineGpu`], a
//! k-NN graph from any [`GpuKnnSource`] (or by the exact GPU kernels, [`KnnSource::Exact`]),
//! then [`CagraGpu`].
//!
//! A source hands its graph over on the host ([`GpuKnnGraph::Host`]: any
//! [`KnnGraphBuilder`] through [`HostKnn`]) or left on the device
//! ([`GpuKnnGraph::Device`]: GNND's `build_device`), in which case the optimiser reads it
//! there without a host round trip.

use std::sync::Arc;

use weft_core::{
    BuildCtx, DatasetView, Element, FixedDegreeGraph, GraphBuilder, GraphOptimizer, KnnGraph,
    KnnGraphBuilder, Metric, Result,
};
use weft_gpu::{DeviceKnnGraph, ExactGpu, GpuContext};

use super::CagraGpu;
use crate::pipeline::check_pipeline_input;
use crate::{CagraParams, KnnSource};

/// A k-NN graph built for the GPU optimiser, where its builder left it.
#[derive(Debug)]
pub enum GpuKnnGraph {
    /// In host memory (uploaded by the optimiser; its rows are validated on the host).
    Host(KnnGraph),
    /// In device memory, on the pipeline's GPU (read there; rows sorted by distance are the
    /// builder's guarantee).
    Device(DeviceKnnGraph),
}

/// Where [`CagraPipelineGpu`] gets its k-NN graph: any k-NN graph builder through
/// [`HostKnn`], or a builder that leaves its graph on the device (on the pipeline's GPU)
/// implementing this trait itself.
pub trait GpuKnnSource {
    /// The builder's short stable name (`nndescent`, ...).
    fn name(&self) -> &'static str;

    /// The k-NN graph of `data` under `metric` with `k` neighbours per row (each row excludes
    /// the point itself, ascending by distance). The pipeline has checked the input.
    fn knn_graph<T: Element>(
        &self,
        data: DatasetView<'_, T>,
        metric: Metric,
        k: usize,
        ctx: &BuildCtx,
    ) -> Result<GpuKnnGraph>;
}

/// Any [`KnnGraphBuilder`] (CPU or GPU) with its parameters, as a [`GpuKnnSource`] whose graph
/// comes back to the host.
#[derive(Clone, Debug)]
pub struct HostKnn<K: KnnGraphBuilder> {
    builder: K,
    params: K::Params,
}

impl<K: KnnGraphBuilder> HostKnn<K> {
    /// `builder` with `params`.
    pub fn new(builder: K, params: K::Params) -> Self {
        HostKnn { builder, params }
    }
}

impl<K: KnnGraphBuilder> GpuKnnSource for HostKnn<K> {
    fn name(&self) -> &'static str {
        self.builder.name()
    }

    fn knn_graph<T: Element>(
        &self,
        data: DatasetView<'_, T>,
        metric: Metric,
        k: usize,
        ctx: &BuildCtx,
    ) -> Result<GpuKnnGraph> {
        self.builder
            .build(data, metric, k, &self.params, ctx)
            .map(GpuKnnGraph::Host)
    }
}

/// CAGRA on the GPU (name `cagra`, GPU back end): the k-NN graph of degree
/// [`CagraParams::intermediate_degree`] from the source `S` ([`KnnSource::NnDescent`], the
/// default; the `weft` facade registers GNND with its graph left on the device) or by the exact
/// GPU kernels ([`KnnSource::Exact`], [`ExactGpu::knn_graph`]), then [`CagraGpu`] down to
/// [`CagraParams::graph_degree`], with entry points and the connectivity repair.
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
