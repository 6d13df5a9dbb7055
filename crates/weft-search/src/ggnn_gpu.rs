//! The GGNN query on the GPU: [`GgnnSearchGpu`], a [`Searcher`] over
//! `weft_gpu::ggnn_search::GgnnSearchDevice` (kernel and design: `weft_gpu::ggnn_search`,
//! `docs/ggnn.md`).

use weft_core::{
    DatasetView, Element, Error, FixedDegreeGraph, GraphView, Metric, NeighborsMut, NodeId, Params,
    Result, SearchStats, Searcher,
};
use weft_gpu::GpuContext;
use weft_gpu::ggnn_search::{GgnnSearchConfig, GgnnSearchDevice};
use weft_graph::hier::HierGraph;

use crate::check::check_search_inputs;
use crate::copy::copy_results;
use crate::ggnn::{GgnnSearchParams, fallback_entry_points};

/// The GGNN query on a GPU (name `ggnn_gpu`): one thread block per query, the CPU search's
/// parameters ([`GgnnSearchParams`]) and stop rule (squared slack for L2, linear for inner
/// product and cosine), over a `HierGraph` (its layer 0 entered from the hierarchy's entry
/// points) or a [`FixedDegreeGraph`] (its entry points; without any, the same entry points as
/// [`crate::GgnnSearch`]: [`GgnnSearchParams::entry_points`] points spread over the data,
/// picked on the host once per call, or with `entry_points = 0` 32 random points per query
/// drawn as the CPU draws them). The data, graph and queries are uploaded for each call;
/// `weft_gpu::ggnn_search::GgnnSearchDevice::search_device_with` searches sets already on the
/// device with reused buffers.
///
/// GPU-only knobs: threads per block (32, 64 or 128) and lanes per distance (2 to 32), each 0
/// for automatic; invalid values give [`Error::InvalidParams`] at search time.
#[derive(Clone, Copy, Debug)]
pub struct GgnnSearchGpu<'c> {
    ctx: &'c GpuContext,
    block_threads: usize,
    team_size: usize,
}

impl<'c> GgnnSearchGpu<'c> {
    /// The search on `ctx`, with automatic block and team sizes.
    pub fn new(ctx: &'c GpuContext) -> Self {
        GgnnSearchGpu {
            ctx,
            block_threads: 0,
            team_size: 0,
        }
    }

    /// Threads per query block: 32, 64 or 128 (0: automatic).
    pub fn with_block_threads(mut self, threads: usize) -> Self {
        self.block_threads = threads;
        self
    }

    /// Lanes per distance: 2, 4, 8, 16 or 32 (0: automatic).
    pub fn with_team_size(mut self, lanes: usize) -> Self {
        self.team_size = lanes;
        self
    }

    /// The device configuration of `params` with this searcher's knobs (for callers that keep
    /// data and graph on the device and call `GgnnSearchDevice` themselves).
    pub fn device_config(&self, params: &GgnnSearchParams) -> GgnnSearchConfig {
        GgnnSearchConfig {
            tau: params.tau,
            best: params.best,
            prioq: params.prioq,
            visited: params.visited,
            max_iterations: params.max_iterations,
            max_nn1: params.max_nn1,
            seed: params.seed,
            block_threads: self.block_threads,
            team_size: self.team_size,
            prefetch_rows: true,
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn run<G: GraphView + ?Sized, T: Element>(
        &self,
        view: &G,
        base: &FixedDegreeGraph,
        entries: &[NodeId],
        data: DatasetView<'_, T>,
        queries: DatasetView<'_, T>,
        metric: Metric,
        params: &GgnnSearchParams,
        mut out: NeighborsMut<'_>,
    ) -> Result<SearchStats> {
        let k = check_search_inputs(view, data, queries, &out, |n, dim| params.validate(n, dim))?;
        data.check_finite()?;
        queries.check_finite()?;
        if base.n() != data.rows() {
            return Err(Error::dim_mismatch(
                "graph vertices vs data rows",
                data.rows(),
                base.n(),
            ));
        }
        let cfg = self.device_config(params);
        let spread = if entries.is_empty() {
            fallback_entry_points(data, metric, params)?
        } else {
            None
        };
        let entries = spread.as_deref().unwrap_or(entries);
        let (nb, stats) = GgnnSearchDevice::new(self.ctx)
            .search(data, base, entries, queries, metric, k, &cfg)?;
        copy_results(&nb, &mut out);
        Ok(stats)
    }
}

impl Searcher<HierGraph> for GgnnSearchGpu<'_> {
    type Params = GgnnSearchParams;

    fn name(&self) -> &'static str {
        "ggnn_gpu"
    }

    fn search<T: Element>(
        &self,
        graph: &HierGraph,
        data: DatasetView<'_, T>,
        queries: DatasetView<'_, T>,
        metric: Metric,
        params: &GgnnSearchParams,
        out: NeighborsMut<'_>,
    ) -> Result<SearchStats> {
        self.run(
            graph,
            graph.base(),
            graph.entry_points(),
            data,
            queries,
            metric,
            params,
            out,
        )
    }
}

impl Searcher<FixedDegreeGraph> for GgnnSearchGpu<'_> {
    type Params = GgnnSearchParams;

    fn name(&self) -> &'static str {
        "ggnn_gpu"
    }

    fn search<T: Element>(
        &self,
        graph: &FixedDegreeGraph,
        data: DatasetView<'_, T>,
        queries: DatasetView<'_, T>,
        metric: Metric,
        params: &GgnnSearchParams,
        out: NeighborsMut<'_>,
    ) -> Result<SearchStats> {
        self.run(
            graph,
            graph,
            graph.entry_points(),
            data,
            queries,
            metric,
            params,
            out,
        )
    }
}
