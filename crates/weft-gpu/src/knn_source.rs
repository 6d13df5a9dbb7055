//! k-NN graph sources for GPU pipelines: [`GpuKnnSource`], implemented by a builder that can
//! leave its graph on the device (GNND in weft-nndescent) and, through [`HostKnn`], by any
//! [`KnnGraphBuilder`]. A consumer (the GPU CAGRA pipeline of weft-cagra) takes the graph where
//! the source left it ([`GpuKnnGraph`]): on the device it is read there, without a host round
//! trip.
//!
//! The trait lives here, in the runtime, so that the crate that builds a graph and the crate
//! that consumes it both implement or use it without depending on each other.

use weft_core::{BuildCtx, DatasetView, Element, KnnGraph, KnnGraphBuilder, Metric, Result};

use crate::DeviceKnnGraph;

/// A k-NN graph from a [`GpuKnnSource`], where its builder left it.
#[derive(Debug)]
pub enum GpuKnnGraph {
    /// In host memory (a consumer uploads it and validates its rows on the host).
    Host(KnnGraph),
    /// In device memory, on the consumer's GPU (read there; rows sorted by distance are the
    /// builder's guarantee).
    Device(DeviceKnnGraph),
}

/// A k-NN graph builder for a GPU pipeline: any [`KnnGraphBuilder`] through [`HostKnn`], or a
/// builder that leaves its graph on the device (on the pipeline's GPU) implementing this trait
/// itself.
pub trait GpuKnnSource {
    /// The builder's short stable name (`nndescent`, ...).
    fn name(&self) -> &'static str;

    /// The k-NN graph of `data` under `metric` with `k` neighbours per row (each row excludes
    /// the point itself, ascending by distance). The consumer has checked the input.
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
