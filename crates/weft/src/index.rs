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
#[derive(Clone, Debug, PartialEq)]
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
    /// Where the graph search runs (default: the CPU).
    pub backend: SearchBackend,
    /// Options of the GPU search (used when it runs on the GPU).
    pub gpu: GpuSearchOptions,
}

/// Where a graph search runs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum SearchBackend {
    /// The GPU when this build has GPU support and a GPU is usable; else the CPU.
    Auto,
    /// The CPU beam search.
    #[default]
    Cpu,
    /// The GPU search (CAGRA-style for fixed-degree and k-NN graphs, the GGNN search for
    /// hierarchical ones); an error when it cannot run.
    Gpu,
}

/// Options of the GPU searches. Fixed-degree and k-NN graphs use `weft_search::CagraSearchGpu`
/// (the beam width is its list size unless `itopk` is set); hierarchical (GGNN) graphs use
/// `weft_search::GgnnSearchGpu` (the beam width is its queue size, `tau` its slack,
/// `max_iterations` its expansion cap).
#[derive(Clone, Debug, PartialEq)]
pub struct GpuSearchOptions {
    /// Internal list size (`None`: the beam width).
    pub itopk: Option<usize>,
    /// Parents expanded per iteration.
    pub search_width: usize,
    /// Threads per distance (0: from the dimension).
    pub team_size: usize,
    /// Single- or multi-CTA (default automatic).
    pub mode: weft_search::CagraSearchModeParam,
    /// Iteration cap (0: automatic; for the GGNN search its default of 400 expansions).
    pub max_iterations: usize,
    /// Slack `tau` of the GGNN search (hierarchical graphs; finite, `>= 0`).
    pub tau: f32,
}

impl Default for GpuSearchOptions {
    fn default() -> Self {
        GpuSearchOptions {
            itopk: None,
            search_width: 1,
            team_size: 0,
            mode: weft_search::CagraSearchModeParam::Auto,
            max_iterations: 0,
            tau: weft_search::GgnnSearchParams::default().tau,
        }
    }
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
            backend: SearchBackend::Cpu,
            gpu: GpuSearchOptions::default(),
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
    /// Where it ran: `cpu` or `gpu`.
    pub backend: &'static str,
}

/// A searchable index: the vectors, the graph built on them, and the record of how. With the
/// `cuda` feature, the first GPU search keeps its context, the data and the graph on the device
/// (and its work buffers) for the later ones; they are freed with the index (a clone starts
/// without them).
#[derive(Clone, Debug)]
pub struct Index {
    data: AnyDataset,
    graph: StoredGraph,
    meta: GraphMeta,
    #[cfg(feature = "cuda")]
    gpu: GpuCache,
}

/// The GPU state an [`Index`] keeps between searches: nothing before the first GPU search, then
/// either the probe's error (no usable GPU; not probed again) or a
/// `weft_gpu::cagra_search::CagraSearchSession` of the data's element type (for a
/// hierarchical graph: a `weft_gpu::GgnnSearchSession`). Searches through it
/// take turns.
#[cfg(feature = "cuda")]
#[derive(Default)]
struct GpuCache(std::sync::Mutex<Option<GpuState>>);

#[cfg(feature = "cuda")]
enum GpuState {
    /// The probe failed with this message.
    Unavailable(String),
    /// The resident search session (`CagraSearchSession<T>`, or for a hierarchical graph
    /// `GgnnSearchSession<T>`, boxed).
    Ready(Box<dyn std::any::Any + Send>),
}

#[cfg(feature = "cuda")]
impl Clone for GpuCache {
    /// An empty cache: a clone uploads again on its first GPU search.
    fn clone(&self) -> Self {
        GpuCache::default()
    }
}

#[cfg(feature = "cuda")]
impl std::fmt::Debug for GpuCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let state = match self.0.try_lock().as_deref() {
            Ok(None) => "empty",
            Ok(Some(GpuState::Unavailable(_))) => "unavailable",
            Ok(Some(GpuState::Ready(_))) => "resident",
            Err(_) => "busy",
        };
        write!(f, "GpuCache({state})")
    }
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
        Ok(Index {
            data,
            graph,
            meta,
            #[cfg(feature = "cuda")]
            gpu: GpuCache::default(),
        })
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
        Ok(Index {
            data,
            graph,
            meta,
            #[cfg(feature = "cuda")]
            gpu: GpuCache::default(),
        })
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
        let mut backend = "cpu";
        let stats = if params.exact {
            ExactSearcher.search(
                self.graph.as_view(),
                data,
                queries,
                metric,
                &weft_core::NoParams {},
                out.as_mut(),
            )?
        } else if let Some(stats) = self.search_gpu(data, queries, k, params, &mut out)? {
            backend = "gpu";
            stats
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
            backend,
        })
    }

    /// The GPU search when `params.backend` asks for it and it can run (`None`: search on the
    /// CPU); an error when [`SearchBackend::Gpu`] is asked for and it cannot run.
    fn search_gpu<T: Element>(
        &self,
        data: DatasetView<'_, T>,
        queries: DatasetView<'_, T>,
        k: usize,
        params: &SearchParams,
        out: &mut Neighbors,
    ) -> Result<Option<SearchStats>> {
        let required = match params.backend {
            SearchBackend::Cpu => return Ok(None),
            SearchBackend::Auto => false,
            SearchBackend::Gpu => true,
        };
        #[cfg(feature = "cuda")]
        {
            use weft_core::{FixedDegreeGraph, Params as _};
            use weft_gpu::cagra_search::CagraSearchSession;
            if let StoredGraph::Hier(hier) = &self.graph {
                return self.search_gpu_hier(hier, data, queries, params, required, out);
            }
            let p = weft_search::CagraSearchParams {
                itopk: params.gpu.itopk.unwrap_or(params.beam_width),
                search_width: params.gpu.search_width,
                team_size: params.gpu.team_size,
                mode: params.gpu.mode,
                max_iterations: params.gpu.max_iterations,
                seed: params.seed,
                ..Default::default()
            };
            p.validate(data.rows(), data.dim())?;
            if p.itopk < k {
                return Err(Error::invalid_param(
                    "itopk",
                    format!("the list size itopk = {} is below k = {k}", p.itopk),
                ));
            }
            self.search_resident_session::<T, CagraSearchSession<T>>(
                required,
                out,
                |ctx| {
                    let converted;
                    let graph: &FixedDegreeGraph = match &self.graph {
                        StoredGraph::Fixed(g) => g,
                        StoredGraph::Knn(g) => {
                            converted = g.to_fixed_degree(g.k())?;
                            &converted
                        }
                        StoredGraph::Hier(_) => {
                            return Err(Error::Unsupported(
                                "the GPU search reads fixed-degree and k-NN graphs".into(),
                            ));
                        }
                    };
                    CagraSearchSession::new(ctx, data, graph)
                },
                |session| {
                    session.search(
                        queries,
                        self.metric(),
                        k,
                        &weft_search::CagraSearchGpu::device_config(&p),
                        None,
                    )
                },
            )
        }
        #[cfg(not(feature = "cuda"))]
        {
            let _ = (data, queries, k, out);
            if required {
                return Err(Error::Unsupported(
                    "this build of weft has no GPU support (cargo feature `cuda`)".into(),
                ));
            }
            Ok(None)
        }
    }

    /// The GGNN search on the GPU over a hierarchical graph (its layer 0 entered from the
    /// top-layer points), the parameters of `weft_search::GgnnSearchGpu`: the beam width as its
    /// queue size, `params.gpu.tau` as its slack and `params.gpu.max_iterations` (0: 400) as its
    /// expansion cap. The first search uploads the data and the base layer into a
    /// `weft_gpu::GgnnSearchSession` kept in the index's GPU cache; later ones upload only their
    /// queries. `None` when no GPU is usable and the backend is automatic.
    #[cfg(feature = "cuda")]
    fn search_gpu_hier<T: Element>(
        &self,
        hier: &weft_graph::hier::HierGraph,
        data: DatasetView<'_, T>,
        queries: DatasetView<'_, T>,
        params: &SearchParams,
        required: bool,
        out: &mut Neighbors,
    ) -> Result<Option<SearchStats>> {
        use weft_core::Params as _;
        let defaults = weft_search::GgnnSearchParams::default();
        let p = weft_search::GgnnSearchParams {
            tau: params.gpu.tau,
            prioq: params.beam_width,
            max_iterations: if params.gpu.max_iterations > 0 {
                params.gpu.max_iterations
            } else {
                defaults.max_iterations
            },
            seed: params.seed,
            ..defaults
        };
        p.validate(data.rows(), data.dim())?;
        let k = out.k();
        self.search_resident_session::<T, weft_gpu::GgnnSearchSession<T>>(
            required,
            out,
            |ctx| {
                data.check_finite()?;
                weft_gpu::GgnnSearchSession::new(ctx, data, hier.base(), hier.entry_points())
            },
            |session| {
                let cfg = weft_search::GgnnSearchGpu::new(session.context()).device_config(&p);
                session.search(queries, self.metric(), k, &cfg)
            },
        )
    }

    /// Runs `search` on the resident GPU search session of type `S` kept in the index's GPU
    /// cache (held for the whole call: searches take turns) and copies its neighbours into
    /// `out`. The first call probes the GPU and, when there is one, makes the session with
    /// `new_session`; its errors (e.g. out of device memory) are returned, not cached, while a
    /// failed probe is cached. `None` when no GPU is usable and `required` is false; an error
    /// when it is true, or when the resident session is not an `S` (other elements than `T`).
    #[cfg(feature = "cuda")]
    fn search_resident_session<T: Element, S: Send + 'static>(
        &self,
        required: bool,
        out: &mut Neighbors,
        new_session: impl FnOnce(weft_gpu::GpuContext) -> Result<S>,
        search: impl FnOnce(&mut S) -> Result<(Neighbors, SearchStats)>,
    ) -> Result<Option<SearchStats>> {
        // A search that panicked midway leaves nothing worth keeping: start again.
        let mut cache = self.gpu.0.lock().unwrap_or_else(|poisoned| {
            let mut g = poisoned.into_inner();
            *g = None;
            g
        });
        if cache.is_none() {
            *cache = Some(match weft_gpu::probe() {
                Err(e) => GpuState::Unavailable(e.to_string()),
                Ok(ctx) => GpuState::Ready(Box::new(new_session(ctx)?)),
            });
        }
        let session = match cache.as_mut() {
            Some(GpuState::Ready(state)) => state.downcast_mut::<S>(),
            Some(GpuState::Unavailable(e)) if required => {
                return Err(Error::Unsupported(format!(
                    "the GPU search backend needs a usable CUDA GPU: {e}"
                )));
            }
            _ => return Ok(None),
        };
        let Some(session) = session else {
            return Err(Error::InvalidInput(format!(
                "the resident GPU data is not of {} elements",
                T::DTYPE
            )));
        };
        let (nb, stats) = search(session)?;
        out.ids.copy_from_slice(&nb.ids);
        out.dists.copy_from_slice(&nb.dists);
        Ok(Some(stats))
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
