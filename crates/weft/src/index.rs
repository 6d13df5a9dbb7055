//! The high-level index: data + graph + how it was built.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::Value;
use weft_core::{
    BuildCtx, DType, Dataset, DatasetView, Element, Error, Metric, Neighbors, Result, SearchStats,
    Searcher,
};
use weft_graph::storage::{self, GraphMeta, LoadOptions, StoredGraph};
use weft_io::{AnyDataset, Format, ReadOptions};
use weft_search::{BeamSearch, BeamSearchParams, ExactSearcher};

use crate::registry::{Backend, Registry, with_view};

/// How an [`Index`] answers queries.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SearchParams {
    /// Candidate list size of the beam search (`L`, at least k): larger is slower and more
    /// accurate.
    pub beam_width: usize,
    /// Ignore the graph and compare with every vector (exact, for ground truth and checks).
    pub exact: bool,
    /// Seed of the random entry points, when the graph has none.
    pub seed: u64,
    /// Stop a query after this many expanded vertices (`None`: no limit).
    pub max_hops: Option<usize>,
}

impl Default for SearchParams {
    fn default() -> Self {
        SearchParams::with_beam_width(64)
    }
}

impl SearchParams {
    /// Graph search with candidate list size `beam_width`.
    pub fn with_beam_width(beam_width: usize) -> Self {
        SearchParams {
            beam_width,
            exact: false,
            seed: 0,
            max_hops: None,
        }
    }

    /// Exact search.
    pub fn exact() -> Self {
        SearchParams {
            exact: true,
            ..SearchParams::with_beam_width(1)
        }
    }
}

/// What a search returns.
#[derive(Clone, Debug)]
pub struct SearchOutput {
    /// `queries x k` ids and distances, ascending.
    pub neighbors: Neighbors,
    /// Work counters.
    pub stats: SearchStats,
    /// Wall time of the search.
    pub elapsed: Duration,
}

/// A searchable index: the vectors, the graph built on them, and the record of how.
#[derive(Clone, Debug)]
pub struct Index {
    data: AnyDataset,
    graph: StoredGraph,
    meta: GraphMeta,
}

/// File names inside a saved index folder.
const GRAPH_FILE: &str = "graph.wgraph";

fn data_file_name(dtype: DType) -> (&'static str, Format) {
    match dtype {
        DType::F32 => ("data.fbin", Format::Fbin),
        DType::F16 => ("data.npy", Format::Npy),
        DType::U8 => ("data.u8bin", Format::U8bin),
        DType::I8 => ("data.i8bin", Format::I8bin),
    }
}

impl Index {
    /// Builds an index on `data` with the registered algorithm `algorithm` (CPU back end unless
    /// only a GPU one exists) and JSON `params` (merged over the algorithm's defaults). `k` is
    /// the neighbour count of k-NN graph builders and must be `None` for search-graph builders.
    pub fn build(
        data: AnyDataset,
        metric: Metric,
        algorithm: &str,
        params: &Value,
        k: Option<usize>,
        ctx: &BuildCtx,
    ) -> Result<Index> {
        Self::build_with(
            &Registry::available(),
            data,
            metric,
            algorithm,
            None,
            params,
            k,
            ctx,
        )
    }

    /// [`Index::build`] with an explicit registry and backend.
    #[allow(clippy::too_many_arguments)]
    pub fn build_with(
        registry: &Registry,
        data: AnyDataset,
        metric: Metric,
        algorithm: &str,
        backend: Option<Backend>,
        params: &Value,
        k: Option<usize>,
        ctx: &BuildCtx,
    ) -> Result<Index> {
        if data.rows() == 0 {
            return Err(Error::InvalidInput(
                "cannot build an index on an empty dataset".into(),
            ));
        }
        with_view!(&data, |view| view.check_finite())?;
        let builder = registry.get(algorithm, backend)?;
        let resolved = builder.resolve_params(params, data.rows(), data.dim())?;
        let graph = builder.build(&data, metric, k, &resolved, ctx)?;
        graph.validate()?;
        let info = builder.info();
        let record = serde_json::json!({ "backend": info.backend, "k": k, "params": resolved });
        let meta = GraphMeta::new(metric)
            .with_data(data.dtype(), data.dim())
            .with_params(info.name, &record)?;
        Ok(Index { data, graph, meta })
    }

    /// Builds from a borrowed view (the vectors are copied into the index).
    pub fn build_from_view<T: Element>(
        data: DatasetView<'_, T>,
        metric: Metric,
        algorithm: &str,
        params: &Value,
        k: Option<usize>,
        ctx: &BuildCtx,
    ) -> Result<Index> {
        Self::build(
            AnyDataset::from_typed(data.to_dataset()),
            metric,
            algorithm,
            params,
            k,
            ctx,
        )
    }

    /// Builds from a 2-D `ndarray` array (rows are vectors; any memory layout).
    pub fn build_from_array<T: Element>(
        data: ndarray::ArrayView2<'_, T>,
        metric: Metric,
        algorithm: &str,
        params: &Value,
        k: Option<usize>,
        ctx: &BuildCtx,
    ) -> Result<Index> {
        let owned = data.as_standard_layout();
        let view = DatasetView::try_from(owned.view())?;
        Self::build_from_view(view, metric, algorithm, params, k, ctx)
    }

    /// Assembles an index from a dataset and a graph built on it, checking that they agree.
    pub fn from_parts(data: AnyDataset, graph: StoredGraph, meta: GraphMeta) -> Result<Index> {
        let n = graph.as_view().num_nodes();
        if n != data.rows() {
            return Err(Error::dim_mismatch(
                "graph vertices vs data rows",
                data.rows(),
                n,
            ));
        }
        if let Some(dim) = meta.dim
            && dim != data.dim()
        {
            return Err(Error::dim_mismatch(
                "graph's recorded dimension vs data",
                dim,
                data.dim(),
            ));
        }
        if let Some(dtype) = meta.dtype
            && dtype != data.dtype()
        {
            return Err(Error::InvalidInput(format!(
                "the graph was built on {dtype} data but the data is {}",
                data.dtype()
            )));
        }
        Ok(Index { data, graph, meta })
    }

    /// The vectors.
    pub fn data(&self) -> &AnyDataset {
        &self.data
    }

    /// The graph.
    pub fn graph(&self) -> &StoredGraph {
        &self.graph
    }

    /// Metric, data shape and the algorithm with its parameters.
    pub fn meta(&self) -> &GraphMeta {
        &self.meta
    }

    /// The metric distances are measured with.
    pub fn metric(&self) -> Metric {
        self.meta.metric
    }

    /// Searches `queries` (same element type and dimension as the data) for `k` neighbours each.
    pub fn search<T: Element>(
        &self,
        queries: DatasetView<'_, T>,
        k: usize,
        params: &SearchParams,
    ) -> Result<SearchOutput> {
        let data: &Dataset<T> = self.data.as_typed()?;
        self.search_typed(data.view(), queries, k, params)
    }

    /// Searches queries of whichever element type the data has.
    pub fn search_any(
        &self,
        queries: &AnyDataset,
        k: usize,
        params: &SearchParams,
    ) -> Result<SearchOutput> {
        if queries.dtype() != self.data.dtype() {
            return Err(Error::InvalidInput(format!(
                "queries are {} but the indexed data is {}",
                queries.dtype(),
                self.data.dtype()
            )));
        }
        with_view!(queries, |q| self.search(q, k, params))
    }

    fn search_typed<T: Element>(
        &self,
        data: DatasetView<'_, T>,
        queries: DatasetView<'_, T>,
        k: usize,
        params: &SearchParams,
    ) -> Result<SearchOutput> {
        data.check_same_dim(&queries, "queries vs indexed data")?;
        weft_core::error::check_k(k, data.rows())?;
        queries.check_finite()?;
        let mut out = Neighbors::new(queries.rows(), k);
        let metric = self.metric();
        let start = Instant::now();
        let stats = if params.exact {
            ExactSearcher.search(
                self.graph.as_view(),
                data,
                queries,
                metric,
                &weft_core::NoParams {},
                out.as_mut(),
            )?
        } else {
            let p = BeamSearchParams {
                l: params.beam_width,
                seed: params.seed,
                max_hops: params.max_hops,
                ..BeamSearchParams::with_l(params.beam_width)
            };
            BeamSearch.search(
                self.graph.as_view(),
                data,
                queries,
                metric,
                &p,
                out.as_mut(),
            )?
        };
        Ok(SearchOutput {
            neighbors: out,
            stats,
            elapsed: start.elapsed(),
        })
    }

    /// Saves the index into folder `dir` (created if needed): `graph.wgraph` and the vectors in
    /// `data.fbin` / `data.npy` / `data.u8bin` / `data.i8bin`. Each file is written atomically.
    pub fn save(&self, dir: impl AsRef<Path>) -> Result<()> {
        let dir = dir.as_ref();
        std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
        let (name, format) = data_file_name(self.data.dtype());
        weft_io::write_any(dir.join(name), &self.data, Some(format))?;
        storage::save(dir.join(GRAPH_FILE), &self.graph, &self.meta)
    }

    /// Loads an index saved by [`Index::save`], memory-mapping the graph and the vectors (the
    /// graph's checksum is verified).
    pub fn load(dir: impl AsRef<Path>) -> Result<Index> {
        let dir = dir.as_ref();
        let graph_path = dir.join(GRAPH_FILE);
        let (graph, meta) = storage::load(&graph_path, LoadOptions::mmap())?;
        let dtype = meta
            .dtype
            .ok_or_else(|| Error::format(&graph_path, "the graph does not record its data type"))?;
        let data_path: PathBuf = dir.join(data_file_name(dtype).0);
        let data = weft_io::read_any(&data_path, &ReadOptions::new())?;
        Index::from_parts(data, graph, meta)
    }
}
