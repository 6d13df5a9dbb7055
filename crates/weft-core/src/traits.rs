//! The seam traits: every construction algorithm and search implements one of these, on the CPU
//! and on the GPU, so that users and benchmarks can swap them.

use crate::{
    BuildCtx, DatasetView, Element, FixedDegreeGraph, GraphView, KnnGraph, Metric, NeighborsMut,
    Params, Result, SearchStats,
};

/// Builds a k-nearest-neighbour graph (NN-Descent, GNND, exact brute force, ...).
pub trait KnnGraphBuilder {
    /// The algorithm's parameters (one type for its CPU and GPU back ends).
    type Params: Params;

    /// A short stable name (`nndescent`, `exact`, ...).
    fn name(&self) -> &'static str;

    /// Builds the k-NN graph of `data` under `metric` (each row excludes the point itself,
    /// `1 <= k < rows`).
    fn build<T: Element>(
        &self,
        data: DatasetView<'_, T>,
        metric: Metric,
        k: usize,
        params: &Self::Params,
        ctx: &BuildCtx,
    ) -> Result<KnnGraph>;
}

/// Turns a k-NN graph into a search graph of fixed out-degree (CAGRA optimisation, ...).
pub trait GraphOptimizer {
    /// The optimiser's parameters.
    type Params: Params;

    /// A short stable name.
    fn name(&self) -> &'static str;

    /// Optimises `knn` (built on `data` under `metric`) into a graph of out-degree `degree`.
    fn optimize<T: Element>(
        &self,
        data: DatasetView<'_, T>,
        metric: Metric,
        knn: &KnnGraph,
        degree: usize,
        params: &Self::Params,
        ctx: &BuildCtx,
    ) -> Result<FixedDegreeGraph>;
}

/// Builds a search graph directly (RNN-Descent, GRNND, GGNN, ...).
pub trait GraphBuilder {
    /// The algorithm's parameters.
    type Params: Params;
    /// The graph it produces.
    type Output: GraphView;

    /// A short stable name.
    fn name(&self) -> &'static str;

    /// Builds the graph of `data` under `metric`.
    fn build<T: Element>(
        &self,
        data: DatasetView<'_, T>,
        metric: Metric,
        params: &Self::Params,
        ctx: &BuildCtx,
    ) -> Result<Self::Output>;
}

/// Answers k-NN queries over a graph `G` (or, for exact search, over the data alone).
pub trait Searcher<G: ?Sized> {
    /// The search parameters.
    type Params: Params;

    /// A short stable name.
    fn name(&self) -> &'static str;

    /// Searches `queries` against `data` through `graph`, writing `out.k()` neighbours per query
    /// into `out` (ascending by distance).
    fn search<T: Element>(
        &self,
        graph: &G,
        data: DatasetView<'_, T>,
        queries: DatasetView<'_, T>,
        metric: Metric,
        params: &Self::Params,
        out: NeighborsMut<'_>,
    ) -> Result<SearchStats>;
}
