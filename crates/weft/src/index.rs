//! The high-level index: data + graph + how it was built.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ndarray::ArrayViewMut2;
use serde_json::Value;
use weft_core::Filter;
use weft_core::{
    BuildCtx, CancelToken, DType, Dataset, DatasetView, Element, Error, Metric, Neighbors,
    NeighborsMut, NodeId, Result, SearchStats, Searcher,
};
use weft_exact::{ExactSearcher, exact_search_filtered};
use weft_graph::connect::{DEFAULT_ENTRY_POINTS, spread_entry_points};
use weft_graph::storage::{self, GraphKind, GraphMeta, LoadOptions, StoredGraph};
use weft_io::{AnyDataset, Format, ReadOptions};
use weft_search::{
    BeamSearch, BeamSearchParams, EntryLayer, EntryLayerParams, EntryPoints, SearchInputs,
};

use crate::input::{IndexData, Vectors};
use crate::registry::{Backend, Registry, with_view};
use crate::routes::{SearchRoute, search_route};

/// How an [`Index`] answers queries.
#[derive(Clone, Debug, PartialEq)]
pub struct SearchParams {
    /// Beam width: the candidate list size of the graph search (at least k), on every back
    /// end: the CPU beam search's `beam_width`, the GPU CAGRA search's list size and the GPU
    /// GGNN search's queue size. Larger is slower and more accurate. `None` (the default):
    /// [`weft_search::plan::default_beam_width`] of the search's `k` (64, or for `k` above 64,
    /// `k` rounded up to a multiple of 32). A width below `k` is an [`Error::InvalidParams`]
    /// named `beam_width`, on every back end.
    pub beam_width: Option<usize>,
    /// Ignore the graph and compare with every vector (exact, for ground truth and checks).
    pub exact: bool,
    /// Seed of the search's random choices: the entry points spread over the data when the graph
    /// stores none (a k-NN graph; see [`Index::search_entry_points`]) and the GPU search's random
    /// starting vertices. Default 0.
    pub seed: u64,
    /// The CPU beam search's own knobs: its budgets (`max_hops`,
    /// `max_distance_computations`) and how it picks where to start among many entry points
    /// (`entry_layer`, see [`weft_search::BeamSearchTuning::entry_layer`]: by default a small
    /// beam search over an entry layer built once per index, and seed for spread entry points,
    /// and kept for the later searches). Checked on every back end, never adjusted.
    pub beam: weft_search::BeamSearchTuning,
    /// Where the graph search runs (default [`Backend::Auto`]: the GPU search when this build
    /// has GPU support and a GPU is usable, else the CPU beam search). [`Backend::Gpu`] runs the
    /// CAGRA-style search for fixed-degree and k-NN graphs, the GGNN search for hierarchical
    /// ones, and is an error when it cannot run; [`Backend::Cpu`] the beam search.
    pub backend: Backend,
    /// The GPU CAGRA search's own knobs (fixed-degree and k-NN graphs on the GPU; the list
    /// size is [`SearchParams::beam_width`], the seed [`SearchParams::seed`]).
    pub cagra: weft_search::CagraSearchTuning,
    /// The GGNN search's own knobs (hierarchical graphs on the GPU; its queue size is
    /// [`SearchParams::beam_width`]).
    pub ggnn: weft_search::GgnnSearchTuning,
    /// The GPU GGNN search's launch knobs (block size, team size, row prefetch).
    pub ggnn_gpu: weft_search::GgnnGpuOptions,
    /// The CUDA devices the GPU search runs on (empty, the default: the index's own,
    /// [`Index::device`], and for an index without one the default device, `$WEFT_GPU_DEVICE`
    /// or else 0). A device given here that a search reaches and cannot use fails the search
    /// (also with [`Backend::Auto`]: never the CPU instead) with an [`Error::Unsupported`] that
    /// names it; a device named twice is an [`Error::InvalidParams`] on `devices`. With several,
    /// the search is replicated: each device holds the whole index and searches a contiguous
    /// part of the batch (parts as even as possible; a batch smaller than the device count
    /// uses its first devices), all at the same time. Each query's result is that of a
    /// search on one device of a batch of its part's size (the GPU CAGRA search's automatic
    /// mode picks the mode from the batch size). The index stays resident on the devices of
    /// its last GPU search: a search on other devices frees it on the ones it leaves and
    /// uploads it to the new ones.
    pub devices: Vec<usize>,
    /// Threads of the search's CPU work (`None`, the default: the current rayon pool; a
    /// `Some` starts a pool of that many threads, at least 1, for the call). A query's result
    /// does not depend on it.
    pub threads: Option<usize>,
    /// Cancels the search (`None`, the default: not cancellable). A cancelled search returns
    /// [`Error::Cancelled`] and no results: the CPU searches look at the token between batches
    /// of [`CANCEL_CHECK_ROWS`] queries, a GPU search before and after its launch. Searching in
    /// batches does not change any query's result.
    pub cancel: Option<CancelToken>,
    /// Only the ids this [`Filter`] allows are returned (`None`, the default: every id), on
    /// every back end: the CPU beam search (`weft_search::BeamSearchParams::filter`), the GPU
    /// CAGRA search (its bitset filter), the GPU GGNN search of a hierarchical graph and the
    /// exact search. Filtered-out points are still traversed so that the graph searches reach
    /// the allowed points behind them; rows are padded with [`weft_core::INVALID`] and `+inf`
    /// when fewer than `k` allowed points are found (an empty filter gives padding only). Its
    /// length must be the index's point count ([`Error::InvalidParams`] named `filter`). A
    /// selective filter needs a larger beam width for the same recall; the CPU beam search and
    /// the GGNN searches (CPU and GPU) answer a filter of at most
    /// `weft_search::FILTER_EXACT_PER_L * beam_width` ids exactly.
    pub filter: Option<Filter>,
}

/// Queries a cancellable CPU search answers between two looks at its [`CancelToken`].
pub const CANCEL_CHECK_ROWS: usize = 256;

/// The former name of [`Backend`] for searches: the same enum, one vocabulary for builds and
/// searches.
pub type SearchBackend = Backend;

impl Default for SearchParams {
    /// A graph search with the default beam width for its `k`
    /// ([`weft_search::plan::default_beam_width`]), on the GPU when one is usable.
    fn default() -> Self {
        SearchParams {
            beam_width: None,
            exact: false,
            seed: 0,
            beam: weft_search::BeamSearchTuning::default(),
            backend: Backend::Auto,
            cagra: weft_search::CagraSearchTuning::default(),
            ggnn: weft_search::GgnnSearchTuning::default(),
            ggnn_gpu: weft_search::GgnnGpuOptions::default(),
            devices: Vec::new(),
            threads: None,
            cancel: None,
            filter: None,
        }
    }
}

impl SearchParams {
    /// Graph search with candidate list size `beam_width`.
    pub fn with_beam_width(beam_width: usize) -> Self {
        SearchParams {
            beam_width: Some(beam_width),
            ..SearchParams::default()
        }
    }

    /// The beam width of a search for `k` neighbours: [`SearchParams::beam_width`], or the
    /// default for `k`; checked against `k` (the one `beam_width >= k` check,
    /// [`weft_search::plan::check_beam_width`]).
    pub fn beam_width_for(&self, k: usize) -> Result<usize> {
        let beam = weft_search::plan::beam_width_or_default(self.beam_width, k);
        weft_search::plan::check_beam_width(beam, k)?;
        Ok(beam)
    }

    /// These parameters with results restricted to the ids `filter` allows (see
    /// [`SearchParams::filter`]).
    pub fn with_filter(mut self, filter: Filter) -> Self {
        self.filter = Some(filter);
        self
    }

    /// These parameters with the search on `backend`.
    pub fn with_backend(mut self, backend: Backend) -> Self {
        self.backend = backend;
        self
    }

    /// These parameters with the CPU work on a pool of `threads` threads (at least 1).
    pub fn with_threads(mut self, threads: usize) -> Self {
        self.threads = Some(threads);
        self
    }

    /// These parameters with a search cancelled through `token`.
    pub fn with_cancel(mut self, token: CancelToken) -> Self {
        self.cancel = Some(token);
        self
    }

    /// Exact search.
    pub fn exact() -> Self {
        SearchParams {
            exact: true,
            ..SearchParams::with_beam_width(1)
        }
    }
}

/// What [`Index::search_into`] returns besides the neighbours it writes.
#[derive(Clone, Copy, Debug)]
pub struct SearchReport {
    /// Work counters.
    pub stats: SearchStats,
    /// Wall time of the search.
    pub elapsed: Duration,
    /// Where it ran: `cpu` or `gpu`.
    pub backend: &'static str,
    /// The search that ran ([`crate::routes`]: `exact`, `beam`, `cagra_gpu`, `ggnn_gpu`).
    pub route: SearchRoute,
}

/// What a search returns. [`Neighbors::ids_view`] and [`Neighbors::distances_view`] give the
/// results as `queries x k` `ndarray` views.
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
    /// The search that ran ([`crate::routes`]: `exact`, `beam`, `cagra_gpu`, `ggnn_gpu`).
    pub route: SearchRoute,
}

/// Where the graph searches of an [`Index`] start: see [`Index::search_entry_points`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case", tag = "source")]
pub enum EntrySource {
    /// The entry points stored with the graph (every search graph: cagra, rnndescent, grnnd,
    /// ggnn).
    Graph,
    /// The graph stores none (a k-NN graph: nndescent, exact; or a graph saved without them):
    /// entry points spread over the data by farthest-first traversal of a seeded sample
    /// ([`weft_graph::connect::spread_entry_points`], [`DEFAULT_ENTRY_POINTS`] of them, the
    /// mechanism of the search graphs), computed once per index and seed.
    Spread {
        /// The search seed they were sampled with.
        seed: u64,
    },
}

/// The entry points every graph search of an [`Index`] starts from (each query expands from the
/// best of them: on the CPU, with the default entry layer ([`SearchParams::beam`]), found by a small
/// beam search over an entry layer built over them when there are many, else by scoring them
/// all).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SearchEntryPoints {
    /// Where they come from.
    pub source: EntrySource,
    /// The vertices (for [`EntrySource::Graph`] a copy of the graph's own).
    pub ids: Arc<[NodeId]>,
}

/// A searchable index: the vectors, the graph built on them, and the record of how. With the
/// `cuda` feature, the first GPU search keeps its context, the data and the graph on the device
/// (and its work buffers) for the later ones; they are freed with the index (a clone starts
/// without them).
///
/// A graph that stores no entry points (a k-NN graph) is not a search graph: it is not
/// connectivity-repaired, and on clustered data it falls apart into one component per cluster.
/// Its searches (CPU and GPU) start from entry points spread over the data, computed on the first
/// search (or [`Index::search_entry_points`]) and kept for the later ones of the same seed, so
/// that every cluster holds an entry point; vertices unreachable from all of them still cannot be
/// found.
#[derive(Clone, Debug)]
pub struct Index {
    data: AnyDataset,
    graph: StoredGraph,
    meta: GraphMeta,
    /// The spread entry points of a graph without its own, once computed.
    spread: SpreadCache,
    /// The CPU beam search's entry layer, once built.
    layer: LayerCache,
    /// The CPU graph searches' copies of the data and the graph in huge pages, once made.
    huge_pages: HugePageCache,
    /// The CUDA device the GPU searches run on by default (the build's GPU; `None`: the default
    /// device).
    device: Option<usize>,
    #[cfg(feature = "cuda")]
    gpu: GpuCache,
}

/// The last spread entry points an [`Index`] computed, with their seed. A clone keeps them.
#[derive(Debug, Default)]
struct SpreadCache(Mutex<Option<(u64, Arc<[NodeId]>)>>);

impl Clone for SpreadCache {
    fn clone(&self) -> Self {
        SpreadCache(Mutex::new(self.get_any()))
    }
}

impl SpreadCache {
    fn get_any(&self) -> Option<(u64, Arc<[NodeId]>)> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    fn get(&self, seed: u64) -> Option<Arc<[NodeId]>> {
        self.get_any()
            .and_then(|(s, ids)| (s == seed).then_some(ids))
    }

    fn set(&self, seed: u64, ids: Arc<[NodeId]>) {
        *self.0.lock().unwrap_or_else(|e| e.into_inner()) = Some((seed, ids));
    }
}

/// What an entry layer was built for: the entry points (`None`: the graph's own; `Some(seed)`:
/// the spread ones of that seed) and the layer's parameters.
type LayerKey = (Option<u64>, EntryLayerParams);

/// The last entry layer an [`Index`] built for its CPU searches (`None` inside: the search
/// scores every entry point), with what it was built for. A clone keeps it.
#[derive(Debug, Default)]
struct LayerCache(Mutex<Option<(LayerKey, Option<Arc<EntryLayer>>)>>);

impl Clone for LayerCache {
    fn clone(&self) -> Self {
        LayerCache(Mutex::new(
            self.0.lock().unwrap_or_else(|e| e.into_inner()).clone(),
        ))
    }
}

impl LayerCache {
    fn get(&self, key: &LayerKey) -> Option<Option<Arc<EntryLayer>>> {
        match &*self.0.lock().unwrap_or_else(|e| e.into_inner()) {
            Some((k, layer)) if k == key => Some(layer.clone()),
            _ => None,
        }
    }

    fn set(&self, key: LayerKey, layer: Option<Arc<EntryLayer>>) {
        *self.0.lock().unwrap_or_else(|e| e.into_inner()) = Some((key, layer));
    }
}

/// The copies of an [`Index`]'s data and graph in huge pages that its CPU graph searches work
/// on ([`Index::with_huge_page_copy`]): made on the first one, kept for the later ones. A clone
/// shares them.
#[derive(Clone, Debug)]
struct HugePageCache {
    /// Whether the searches may make the copies.
    enabled: bool,
    /// Empty before the first CPU graph search; then the copies made (`None` for each one that
    /// was not: small, not Linux, not enough memory).
    copies: std::sync::OnceLock<Arc<HugePageCopies>>,
}

impl Default for HugePageCache {
    fn default() -> Self {
        HugePageCache {
            enabled: true,
            copies: std::sync::OnceLock::new(),
        }
    }
}

/// The data and the graph in huge pages, each where it was copied.
#[derive(Debug)]
struct HugePageCopies {
    data: Option<AnyDataset>,
    graph: Option<StoredGraph>,
}

/// The GPU state an [`Index`] keeps between searches: one [`GpuSlot`] per CUDA device of its
/// last GPU search. Searches on one device take turns; searches on different devices run at the
/// same time.
#[cfg(feature = "cuda")]
#[derive(Default)]
struct GpuCache(std::sync::Mutex<Vec<Arc<GpuSlot>>>);

/// What an [`Index`] keeps on one CUDA device: nothing before its first search there, then
/// either the probe's error (not probed again) or a resident [`GpuSession`] of the data's
/// element type.
#[cfg(feature = "cuda")]
struct GpuSlot {
    /// The device as asked for (`None`: the default one).
    device: Option<usize>,
    /// Its state, held for the whole of a search on it.
    state: std::sync::Mutex<Option<GpuState>>,
}

#[cfg(feature = "cuda")]
impl GpuCache {
    /// The slots of `devices`, in their order, made where missing; the slots of other devices
    /// are dropped (their sessions are freed once no search holds them).
    fn slots(&self, devices: &[Option<usize>]) -> Vec<Arc<GpuSlot>> {
        let mut all = self.0.lock().unwrap_or_else(|e| e.into_inner());
        all.retain(|slot| devices.contains(&slot.device));
        devices
            .iter()
            .map(|&device| {
                if let Some(slot) = all.iter().find(|slot| slot.device == device) {
                    return Arc::clone(slot);
                }
                let slot = Arc::new(GpuSlot {
                    device,
                    state: std::sync::Mutex::new(None),
                });
                all.push(Arc::clone(&slot));
                slot
            })
            .collect()
    }

    /// Whether a probe of `device` failed (waits for a search running there).
    fn found_unusable(&self, device: Option<usize>) -> bool {
        let slot = {
            let all = self.0.lock().unwrap_or_else(|e| e.into_inner());
            all.iter().find(|slot| slot.device == device).cloned()
        };
        slot.is_some_and(|slot| {
            let state = slot.state.lock().unwrap_or_else(|e| e.into_inner());
            matches!(state.as_ref(), Some(GpuState::Unavailable(_)))
        })
    }
}

#[cfg(feature = "cuda")]
enum GpuState {
    /// The probe of the device failed with this message.
    Unavailable(String),
    /// The resident search session, of the data's element type (boxed: it is large), and the
    /// seed of the spread entry points it was made with (`None`: the graph's own).
    Ready(Box<weft_core::PerElement<GpuSessions>>, Option<u64>),
}

/// The resident GPU search session of an index over elements `T`: the CAGRA search's for
/// fixed-degree and k-NN graphs, the GGNN search's for hierarchical ones.
#[cfg(feature = "cuda")]
// An index holds one session, already behind the cache's box: the sizes of the two variants
// (the CAGRA session with its f16 traversal state, about 1.4 KB; the GGNN one, 0.9 KB) cost
// nothing worth a second indirection.
#[allow(clippy::large_enum_variant)]
enum GpuSession<T: Element> {
    /// `weft_search::CagraSearchSession` (fixed-degree and k-NN graphs).
    Cagra(weft_search::CagraSearchSession<T>),
    /// `weft_search::GgnnSearchSession` (hierarchical graphs).
    Ggnn(weft_search::GgnnSearchSession<T>),
}

/// The family of [`GpuSession`]s, one per element type, for [`weft_core::PerElement`].
#[cfg(feature = "cuda")]
struct GpuSessions;

#[cfg(feature = "cuda")]
impl weft_core::ElementFamily for GpuSessions {
    type Of<T: Element> = GpuSession<T>;
}

/// A search session type that a [`GpuSession`] holds.
#[cfg(feature = "cuda")]
trait ResidentSession<T: Element>: Sized {
    /// The session as a [`GpuSession`].
    fn into_session(self) -> GpuSession<T>;
    /// The session of this type in `s` (`None`: `s` holds the other kind).
    fn of(s: &mut GpuSession<T>) -> Option<&mut Self>;
}

#[cfg(feature = "cuda")]
impl<T: Element> ResidentSession<T> for weft_search::CagraSearchSession<T> {
    fn into_session(self) -> GpuSession<T> {
        GpuSession::Cagra(self)
    }
    fn of(s: &mut GpuSession<T>) -> Option<&mut Self> {
        match s {
            GpuSession::Cagra(c) => Some(c),
            GpuSession::Ggnn(_) => None,
        }
    }
}

#[cfg(feature = "cuda")]
impl<T: Element> ResidentSession<T> for weft_search::GgnnSearchSession<T> {
    fn into_session(self) -> GpuSession<T> {
        GpuSession::Ggnn(self)
    }
    fn of(s: &mut GpuSession<T>) -> Option<&mut Self> {
        match s {
            GpuSession::Ggnn(g) => Some(g),
            GpuSession::Cagra(_) => None,
        }
    }
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
        let Ok(all) = self.0.try_lock() else {
            return write!(f, "GpuCache(busy)");
        };
        let mut list = f.debug_list();
        for slot in all.iter() {
            let state = match slot.state.try_lock().as_deref() {
                Ok(None) => "empty",
                Ok(Some(GpuState::Unavailable(..))) => "unavailable",
                Ok(Some(GpuState::Ready(..))) => "resident",
                Err(_) => "busy",
            };
            list.entry(&format_args!("{:?}: {state}", slot.device));
        }
        list.finish()
    }
}

/// File names inside a saved index folder.
const GRAPH_FILE: &str = "graph.wgraph";

/// Every vector file name a saved index folder may hold.
const DATA_FILES: [&str; 4] = ["data.fbin", "data.npy", "data.u8bin", "data.i8bin"];

/// The vector file of a saved index folder for `dtype`, and its format.
pub(crate) fn data_file_name(dtype: DType) -> (&'static str, Format) {
    match dtype {
        DType::F32 => ("data.fbin", Format::Fbin),
        DType::F16 => ("data.npy", Format::Npy),
        DType::U8 => ("data.u8bin", Format::U8bin),
        DType::I8 => ("data.i8bin", Format::I8bin),
    }
}

/// Which registered builder [`Index::build_with`] runs, and with what: the algorithm's name,
/// the back end (`None` or [`Backend::Auto`]: the GPU one when registered, else the CPU one),
/// its JSON params (merged over the algorithm's defaults) and `k` (the neighbour count of k-NN
/// graph builders; `None` for search-graph builders).
#[derive(Clone, Copy, Debug)]
pub struct BuildRequest<'a> {
    /// The registered algorithm's name (`cagra`, `nndescent`, ...).
    pub algorithm: &'a str,
    /// The back end, or `None` for [`Backend::Auto`].
    pub backend: Option<Backend>,
    /// The algorithm's parameters as JSON (`Value::Null` for its defaults).
    pub params: &'a Value,
    /// The neighbour count of a k-NN graph builder.
    pub k: Option<usize>,
}

impl Index {
    /// Builds an index on `data` with the registered algorithm `algorithm` on
    /// [`Backend::Auto`] (the GPU back end when a GPU is usable and the algorithm has one) and
    /// JSON `params` (merged over the algorithm's defaults), for command lines and config
    /// files; Rust code reads better with [`Index::builder`]. `k` is the neighbour count of
    /// k-NN graph builders and must be `None` for search-graph builders. `data` is any
    /// [`IndexData`]: an [`AnyDataset`], a [`Dataset`], a [`DatasetView`], an `ndarray` array or
    /// a `(&[T], dim)` slice (borrowed vectors are copied into the index).
    pub fn build(
        data: impl IndexData,
        metric: Metric,
        algorithm: &str,
        params: &Value,
        k: Option<usize>,
        ctx: &BuildCtx,
    ) -> Result<Index> {
        let request = BuildRequest {
            algorithm,
            backend: None,
            params,
            k,
        };
        Self::build_with(&Registry::available(), data, metric, request, ctx)
    }

    /// [`Index::build`] with an explicit registry and backend (`None` or [`Backend::Auto`]: the
    /// GPU back end when registered, else the CPU one).
    /// [`IndexBuilder::build`](crate::IndexBuilder::build) goes through here.
    pub fn build_with(
        registry: &Registry,
        data: impl IndexData,
        metric: Metric,
        request: BuildRequest<'_>,
        ctx: &BuildCtx,
    ) -> Result<Index> {
        let BuildRequest {
            algorithm,
            backend,
            params,
            k,
        } = request;
        let data = data.into_any_dataset()?;
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
        let meta = GraphMeta::new(metric)
            .with_data(data.dtype(), data.dim())
            .with_params(info.name, &resolved)?
            .with_field(
                "backend",
                serde_json::to_value(info.backend).unwrap_or_default(),
            )?
            .with_field("k", k.into())?
            .with_seed(ctx.seed())?
            .with_data_fingerprint(&data_fingerprint(&data))?;
        Ok(Index {
            data,
            graph,
            meta,
            spread: SpreadCache::default(),
            layer: LayerCache::default(),
            huge_pages: HugePageCache::default(),
            // The GPU the graph was built on; an index built on the CPU has none.
            device: if info.backend == Backend::Gpu {
                registry.gpu().device()
            } else {
                None
            },
            #[cfg(feature = "cuda")]
            gpu: GpuCache::default(),
        })
    }

    /// Builds from a borrowed view (the vectors are copied into the index): [`Index::build`],
    /// which takes views too.
    pub fn build_from_view<T: Element>(
        data: DatasetView<'_, T>,
        metric: Metric,
        algorithm: &str,
        params: &Value,
        k: Option<usize>,
        ctx: &BuildCtx,
    ) -> Result<Index> {
        Self::build(data, metric, algorithm, params, k, ctx)
    }

    /// Builds from a 2-D `ndarray` array (rows are vectors; any memory layout; copied):
    /// [`Index::build`], which takes arrays too.
    pub fn build_from_array<T: Element>(
        data: ndarray::ArrayView2<'_, T>,
        metric: Metric,
        algorithm: &str,
        params: &Value,
        k: Option<usize>,
        ctx: &BuildCtx,
    ) -> Result<Index> {
        Self::build(data, metric, algorithm, params, k, ctx)
    }

    /// Assembles an index from a dataset and a graph built on it, checking that they agree:
    /// the graph's vertex count is the data's row count, and the recorded dimension, element
    /// type and data fingerprint ([`data_fingerprint`]; graphs built through [`Index`] record
    /// it, older files do not and are accepted) are the data's. A graph of other data of the
    /// same shape is an [`Error::InvalidInput`]. The fingerprint is one CRC-32 pass over the
    /// data, in parallel.
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
        if let Some(recorded) = meta.data_fingerprint() {
            let actual = data_fingerprint(&data);
            if recorded != actual {
                return Err(Error::InvalidInput(format!(
                    "the graph was built on other data of the same shape ({} x {} {}): it \
                     records the data fingerprint {recorded}, this data's is {actual}; give the \
                     vectors the graph was built on, or build a graph on these",
                    data.rows(),
                    data.dim(),
                    data.dtype()
                )));
            }
        }
        Ok(Index {
            data,
            graph,
            meta,
            spread: SpreadCache::default(),
            layer: LayerCache::default(),
            huge_pages: HugePageCache::default(),
            device: None,
            #[cfg(feature = "cuda")]
            gpu: GpuCache::default(),
        })
    }

    /// Whether the CPU graph searches work on copies of the data and the graph in transparent
    /// huge pages (Linux; default on). The beam search reads vector and adjacency rows in no
    /// useful order, and beyond about 8 MiB nearly every such read misses the TLB in 4 KiB pages
    /// (what memory-mapped files and the allocator give): on a 100k x 128 CAGRA graph the copies
    /// gave about 15 % more queries per second (see [`weft_core::huge_pages`]). The first CPU
    /// graph search makes them (a copy of the data and the graph's rows, each when it is at
    /// least [`HUGE_PAGE_COPY_MIN_BYTES`](weft_core::huge_pages::HUGE_PAGE_COPY_MIN_BYTES) and
    /// at most half of the available memory), and they are kept while the index lives: the
    /// memory of the data and the graph, once more. Results are the same either way. Turning it
    /// off drops copies already made.
    pub fn with_huge_page_copy(mut self, enabled: bool) -> Self {
        self.huge_pages = HugePageCache {
            enabled,
            ..HugePageCache::default()
        };
        self
    }

    /// The copies of the data and the graph in huge pages for the CPU graph searches, made on
    /// the first call (`None` when turned off).
    fn huge_page_copies(&self) -> Option<&HugePageCopies> {
        if !self.huge_pages.enabled {
            return None;
        }
        let copies = self.huge_pages.copies.get_or_init(|| {
            Arc::new(HugePageCopies {
                data: with_view!(&self.data, |view| view
                    .copy_to_huge_pages()
                    .map(AnyDataset::from_typed)),
                graph: self.graph.copy_to_huge_pages(),
            })
        });
        Some(copies)
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

    /// Which graph the index holds: [`GraphKind::Knn`] (nndescent, exact) is a k-NN graph, not a
    /// search graph (no entry points, no connectivity repair); the others are search graphs.
    pub fn graph_kind(&self) -> GraphKind {
        self.graph.kind()
    }

    /// The entry points a graph search with seed `seed` starts from: the graph's own when it
    /// stores some; else (a k-NN graph) [`DEFAULT_ENTRY_POINTS`] points spread over the data
    /// (fewer on small data), computed here on the first call for a seed and kept until a search
    /// asks for another seed. A query's result therefore depends only on the query, the index and
    /// the seed, never on its batch. [`Index::search`] calls this itself; calling it first takes
    /// the one-time cost (about `256 * min(n, 8192)` distances, in parallel) out of the first
    /// search.
    pub fn search_entry_points(&self, seed: u64) -> Result<SearchEntryPoints> {
        let own = self.graph.as_view().entry_points();
        if !own.is_empty() {
            return Ok(SearchEntryPoints {
                source: EntrySource::Graph,
                ids: own.into(),
            });
        }
        let ids = match self.spread.get(seed) {
            Some(ids) => ids,
            None => {
                // Computed without holding the lock (it runs on the rayon pool, whose workers
                // may be searching this index too); a concurrent first search may compute the
                // same points twice.
                let ids: Arc<[NodeId]> = with_view!(&self.data, |view| spread_entry_points(
                    view,
                    self.metric(),
                    DEFAULT_ENTRY_POINTS,
                    seed
                ))?
                .into();
                self.spread.set(seed, ids.clone());
                ids
            }
        };
        Ok(SearchEntryPoints {
            source: EntrySource::Spread { seed },
            ids,
        })
    }

    /// Searches `queries` (same element type and dimension as the data) for `k` neighbours each.
    /// The queries are any [`Vectors`]: a [`DatasetView`], a [`Dataset`], an `ndarray` array
    /// ([`ArrayView2`](ndarray::ArrayView2), `&Array2`, any memory layout) or a flat row-major
    /// slice with its dimension, `(&[T], dim)`; all give the same results. Queries of another
    /// dimension than the data are an [`Error::DimensionMismatch`], of another element type an
    /// error too. The results are also `queries x k` `ndarray` views: [`Neighbors::ids_view`],
    /// [`Neighbors::distances_view`].
    pub fn search(
        &self,
        queries: impl Vectors,
        k: usize,
        params: &SearchParams,
    ) -> Result<SearchOutput> {
        weft_core::error::check_k(k, self.data.rows())?;
        queries.with_view(|queries| {
            let mut out = Neighbors::new(queries.rows(), k);
            let report = self.search_view_into_buffers(queries, out.as_mut(), params)?;
            Ok(SearchOutput {
                neighbors: out,
                stats: report.stats,
                elapsed: report.elapsed,
                backend: report.backend,
                route: report.route,
            })
        })
    }

    /// [`Index::search`] into the caller's arrays: `queries` are any [`Vectors`] (as for
    /// [`Index::search`]); `ids` and `distances` are `queries x k` (`k`, the neighbours wanted,
    /// is their column count; any memory layout), and receive what [`Index::search`] returns for
    /// that `k`. Arrays of other shapes are an [`Error::DimensionMismatch`]. After an error their
    /// contents are unspecified. [`Index::search_into_buffers`] writes into plain slices.
    ///
    /// ```no_run
    /// # fn demo(index: &weft::Index, queries: &weft::Dataset<f32>) -> weft::Result<()> {
    /// let mut ids = weft::ndarray::Array2::<weft::NodeId>::zeros((queries.rows(), 10));
    /// let mut distances = weft::ndarray::Array2::<f32>::zeros((queries.rows(), 10));
    /// index.search_into(queries.view(), &mut ids, &mut distances, &weft::SearchParams::default())?;
    /// # Ok(()) }
    /// ```
    pub fn search_into<'i, 'd>(
        &self,
        queries: impl Vectors,
        ids: impl Into<ArrayViewMut2<'i, NodeId>>,
        distances: impl Into<ArrayViewMut2<'d, f32>>,
        params: &SearchParams,
    ) -> Result<SearchReport> {
        let (ids, distances) = (ids.into(), distances.into());
        queries.with_view(|queries| self.search_view_into(queries, ids, distances, params))
    }

    /// [`Index::search_into`] of a view.
    fn search_view_into<T: Element>(
        &self,
        queries: DatasetView<'_, T>,
        mut ids: ArrayViewMut2<'_, NodeId>,
        mut distances: ArrayViewMut2<'_, f32>,
        params: &SearchParams,
    ) -> Result<SearchReport> {
        if ids.nrows() != queries.rows() {
            return Err(Error::dim_mismatch(
                "rows of the id array vs queries",
                queries.rows(),
                ids.nrows(),
            ));
        }
        if distances.nrows() != queries.rows() {
            return Err(Error::dim_mismatch(
                "rows of the distance array vs queries",
                queries.rows(),
                distances.nrows(),
            ));
        }
        let k = ids.ncols();
        if distances.ncols() != k {
            return Err(Error::dim_mismatch(
                "columns (k) of the distance array vs the id array",
                k,
                distances.ncols(),
            ));
        }
        weft_core::error::check_k(k, self.data.rows())?;
        if let (Some(ids), Some(distances)) = (ids.as_slice_mut(), distances.as_slice_mut()) {
            return self.search_view_into_buffers(
                queries,
                NeighborsMut::new(ids, distances, k)?,
                params,
            );
        }
        // Not in standard layout: search into contiguous buffers, then copy.
        let mut found = Neighbors::new(queries.rows(), k);
        let report = self.search_view_into_buffers(queries, found.as_mut(), params)?;
        ids.assign(&found.ids_view());
        distances.assign(&found.distances_view());
        Ok(report)
    }

    /// [`Index::search`] into flat row-major buffers: `queries` are any [`Vectors`] (as for
    /// [`Index::search`]); `out` ([`NeighborsMut::new`] over an id slice and a distance slice)
    /// holds one row of `out.k()` neighbours per query (else an [`Error::DimensionMismatch`]).
    /// After an error its contents are unspecified.
    pub fn search_into_buffers(
        &self,
        queries: impl Vectors,
        out: NeighborsMut<'_>,
        params: &SearchParams,
    ) -> Result<SearchReport> {
        queries.with_view(|queries| self.search_view_into_buffers(queries, out, params))
    }

    /// [`Index::search_into_buffers`] of a view.
    fn search_view_into_buffers<T: Element>(
        &self,
        queries: DatasetView<'_, T>,
        out: NeighborsMut<'_>,
        params: &SearchParams,
    ) -> Result<SearchReport> {
        if out.rows() != queries.rows() {
            return Err(Error::dim_mismatch(
                "rows of the output buffers vs queries",
                queries.rows(),
                out.rows(),
            ));
        }
        let data: &Dataset<T> = self.data.as_typed()?;
        match params.threads {
            None => self.search_typed(data.view(), queries, params, out),
            Some(0) => Err(Error::invalid_param(
                "threads",
                "the thread count must be at least 1",
            )),
            threads => BuildCtx::new(params.seed)
                .with_threads(threads)
                .install(|| self.search_typed(data.view(), queries, params, out))?,
        }
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

    /// The search itself, on the current thread pool, into `out` (`queries.rows()` rows of
    /// `k` neighbours).
    fn search_typed<T: Element>(
        &self,
        data: DatasetView<'_, T>,
        queries: DatasetView<'_, T>,
        params: &SearchParams,
        mut out: NeighborsMut<'_>,
    ) -> Result<SearchReport> {
        let k = out.k();
        data.check_same_dim(&queries, "queries vs indexed data")?;
        weft_core::error::check_k(k, data.rows())?;
        queries.check_finite()?;
        if let Some(filter) = &params.filter {
            filter.check_len(data.rows())?;
        }
        check_devices(&params.devices)?;
        let cancel = params.cancel.as_ref();
        let check_cancelled = || cancel.map_or(Ok(()), CancelToken::check);
        check_cancelled()?;
        let metric = self.metric();
        // The search plan's one beam width (the default for k when none is given), checked
        // against k once for every back end.
        let beam_width = if params.exact {
            0
        } else {
            // The searches' knobs are checked on every back end: an impossible value is an
            // error, never ignored because this search happens to run elsewhere.
            params.beam.validate()?;
            params.cagra.validate()?;
            params.ggnn.validate()?;
            params.beam_width_for(k)?
        };
        // Outside the timed part: computed once per index and seed.
        let entries = if params.exact {
            None
        } else {
            Some(self.search_entry_points(params.seed)?)
        };
        let beam = |entry_points| BeamSearchParams {
            entry_points,
            seed: params.seed,
            tuning: params.beam.clone(),
            filter: params.filter.clone(),
            ..BeamSearchParams::with_beam_width(beam_width)
        };
        let cpu_params = entries.as_ref().map(|e| {
            beam(match e.source {
                EntrySource::Spread { .. } => EntryPoints::Fixed {
                    ids: e.ids.to_vec(),
                },
                EntrySource::Graph => EntryPoints::Graph,
            })
        });
        // The CPU search's entry layer, built once per index, seed and layer parameters: outside
        // the timed part for a CPU search; when the GPU may search, only if it does not (a GPU
        // search does not use it).
        let cpu_layer = |entries: &Option<SearchEntryPoints>, p: &Option<BeamSearchParams>| match (
            entries, p,
        ) {
            (Some(e), Some(p)) => self.entry_layer(data, e, p),
            _ => Ok(None),
        };
        let searches_on_cpu = match params.backend {
            Backend::Cpu => true,
            Backend::Auto => !self.gpu_may_search(&self.search_devices(params)),
            Backend::Gpu => false,
        };
        let layer = if searches_on_cpu {
            if !params.exact {
                // Outside the timed part too, as the layer.
                self.huge_page_copies();
            }
            Some(cpu_layer(&entries, &cpu_params)?)
        } else {
            None
        };
        check_cancelled()?;
        let start = Instant::now();
        let mut route = if params.exact {
            SearchRoute::Exact
        } else {
            SearchRoute::Beam
        };
        let stats = if let (true, Some(filter)) = (params.exact, &params.filter) {
            in_batches(queries, cancel, &mut out, |q, o| {
                exact_search_filtered(data, q, metric, filter, o)
            })?
        } else if params.exact {
            in_batches(queries, cancel, &mut out, |q, o| {
                ExactSearcher.search(
                    self.graph.as_view(),
                    data,
                    q,
                    metric,
                    &weft_core::NoParams {},
                    o,
                )
            })?
        } else if let Some((gpu_route, stats)) = self.search_gpu(
            data,
            queries,
            beam_width,
            params,
            entries.as_ref(),
            &mut out,
        )? {
            check_cancelled()?;
            route = gpu_route;
            stats
        } else {
            let layer = match layer {
                Some(layer) => layer,
                None => cpu_layer(&entries, &cpu_params)?,
            };
            let p = match cpu_params {
                Some(p) => p,
                None => beam(EntryPoints::Graph),
            };
            let copies = self.huge_page_copies();
            let data = match copies.and_then(|c| c.data.as_ref()) {
                Some(copy) => copy.as_typed::<T>()?.view(),
                None => data,
            };
            let graph = copies.and_then(|c| c.graph.as_ref()).unwrap_or(&self.graph);
            in_batches(queries, cancel, &mut out, |q, o| {
                let inputs = SearchInputs {
                    graph: graph.as_view(),
                    data,
                    queries: q,
                };
                BeamSearch.search_with_entry_layer(inputs, metric, &p, layer.as_deref(), o)
            })?
        };
        Ok(SearchReport {
            stats,
            elapsed: start.elapsed(),
            backend: route.backend().name(),
            route,
        })
    }

    /// Whether an automatic search may run on the GPUs `devices` (`None`: the default one):
    /// this build has GPU support and the index has found none of them unusable yet.
    fn gpu_may_search(&self, devices: &[Option<usize>]) -> bool {
        #[cfg(feature = "cuda")]
        {
            !devices.iter().any(|&d| self.gpu.found_unusable(d))
        }
        #[cfg(not(feature = "cuda"))]
        {
            let _ = devices;
            false
        }
    }

    /// The CUDA devices a GPU search with `params` runs on: [`SearchParams::devices`], else
    /// the index's ([`Index::device`]; `None`: the default device).
    fn search_devices(&self, params: &SearchParams) -> Vec<Option<usize>> {
        if params.devices.is_empty() {
            vec![self.device]
        } else {
            params.devices.iter().map(|&d| Some(d)).collect()
        }
    }

    /// The CUDA device the GPU searches run on when their parameters name none: the GPU the
    /// index was built on, or the one set with [`Index::set_device`]; `None` (an index built on
    /// the CPU or loaded from files): the default device, `$WEFT_GPU_DEVICE` or else 0.
    pub fn device(&self) -> Option<usize> {
        self.device
    }

    /// Makes `device` the CUDA device of this index's GPU searches when their parameters name
    /// none (`None`: the default device). The device is checked at the next GPU search, which
    /// uploads the index there.
    pub fn set_device(&mut self, device: Option<usize>) {
        self.device = device;
    }

    /// The entry layer of a CPU search from `entries` with `params` (`None`: it scores every
    /// entry point), from the cache or built and kept there.
    fn entry_layer<T: Element>(
        &self,
        data: DatasetView<'_, T>,
        entries: &SearchEntryPoints,
        params: &BeamSearchParams,
    ) -> Result<Option<Arc<EntryLayer>>> {
        let lp = params.tuning.entry_layer;
        if !lp.enabled {
            return Ok(None);
        }
        lp.validate("entry_layer.")?;
        let key = (
            match entries.source {
                EntrySource::Graph => None,
                EntrySource::Spread { seed } => Some(seed),
            },
            lp,
        );
        if let Some(layer) = self.layer.get(&key) {
            return Ok(layer);
        }
        let layer =
            BeamSearch::entry_layer_for(data, self.metric(), &entries.ids, params)?.map(Arc::new);
        self.layer.set(key, layer.clone());
        Ok(layer)
    }

    /// The GPU search when `params.backend` asks for it and it can run (`None`: search on the
    /// CPU); an error when [`Backend::Gpu`] is asked for and it cannot run. `entries`: the
    /// index's entry points for this search ([`Index::search_entry_points`]); spread ones are
    /// handed to the CAGRA search session in place of the graph's (a session made with other
    /// spread entry points is made again).
    fn search_gpu<T: Element>(
        &self,
        data: DatasetView<'_, T>,
        queries: DatasetView<'_, T>,
        beam_width: usize,
        params: &SearchParams,
        entries: Option<&SearchEntryPoints>,
        out: &mut NeighborsMut<'_>,
    ) -> Result<Option<(SearchRoute, SearchStats)>> {
        if params.backend == Backend::Cpu {
            return Ok(None);
        }
        let (k, required) = (out.k(), gpu_required(params));
        let route = search_route(self.graph_kind(), Backend::Gpu);
        #[cfg(feature = "cuda")]
        {
            use weft_core::FixedDegreeGraph;
            use weft_search::CagraSearchSession;
            let route_taken = match (route, &self.graph) {
                (Some(SearchRoute::GgnnGpu), StoredGraph::Hier(hier)) => {
                    let found =
                        self.search_gpu_hier(hier, data, queries, beam_width, params, out)?;
                    return Ok(found.map(|st| (SearchRoute::GgnnGpu, st)));
                }
                (Some(SearchRoute::CagraGpu), StoredGraph::Fixed(_) | StoredGraph::Knn(_)) => {
                    SearchRoute::CagraGpu
                }
                (other, _) => {
                    return Err(Error::Unsupported(format!(
                        "no GPU search of {} graphs (the search registry names {other:?})",
                        self.graph_kind().name()
                    )));
                }
            };
            let p = cagra_gpu_params(params, beam_width, data.rows(), data.dim(), k)?;
            let spread = match entries {
                Some(SearchEntryPoints {
                    source: EntrySource::Spread { seed },
                    ids,
                }) => Some((*seed, ids)),
                _ => None,
            };
            let devices = self.search_devices(params);
            let how = ResidentSearch {
                required,
                devices: &devices,
                spread_seed: spread.map(|(seed, _)| seed),
            };
            self.search_resident_sessions::<T, CagraSearchSession<T>>(
                &how,
                queries,
                out,
                |ctx| {
                    let converted;
                    let graph: &FixedDegreeGraph = match (&self.graph, spread) {
                        (StoredGraph::Fixed(g), None) => g,
                        (StoredGraph::Fixed(g), Some((_, ids))) => {
                            converted = g.clone().with_entry_points(ids.to_vec());
                            &converted
                        }
                        (StoredGraph::Knn(g), _) => {
                            let fixed = g.to_fixed_degree(g.k())?;
                            converted = match spread {
                                Some((_, ids)) => fixed.with_entry_points(ids.to_vec()),
                                None => fixed,
                            };
                            &converted
                        }
                        (StoredGraph::Hier(_), _) => {
                            return Err(Error::Unsupported(
                                "the GPU search reads fixed-degree and k-NN graphs".into(),
                            ));
                        }
                    };
                    CagraSearchSession::new(ctx, data, graph)
                },
                |session, part, out| session.search_into(part, self.metric(), &p, out),
            )
            .map(|found| found.map(|stats| (route_taken, stats)))
        }
        #[cfg(not(feature = "cuda"))]
        {
            let _ = (data, queries, k, beam_width, entries, out, route);
            if required {
                return Err(Error::Unsupported(
                    "this build of weft has no GPU support (cargo feature `cuda`)".into(),
                ));
            }
            Ok(None)
        }
    }

    /// The GGNN search on the GPU over a hierarchical graph (its layer 0 entered from the
    /// hierarchy's entry points: spread over the data for a graph built now), the parameters of
    /// `weft_search::GgnnSearchGpu`: the beam width as its queue size, [`SearchParams::ggnn`]
    /// its knobs and [`SearchParams::ggnn_gpu`] its launch options. The first search uploads the data and the base layer into a
    /// `weft_search::GgnnSearchSession` kept in the index's GPU cache; later ones upload only their
    /// queries. `None` when no GPU is usable and the backend is automatic.
    #[cfg(feature = "cuda")]
    fn search_gpu_hier<T: Element>(
        &self,
        hier: &weft_graph::hier::HierGraph,
        data: DatasetView<'_, T>,
        queries: DatasetView<'_, T>,
        beam_width: usize,
        params: &SearchParams,
        out: &mut NeighborsMut<'_>,
    ) -> Result<Option<SearchStats>> {
        let p = ggnn_gpu_params(params, beam_width, data.rows(), data.dim())?;
        let devices = self.search_devices(params);
        let how = ResidentSearch {
            required: gpu_required(params),
            devices: &devices,
            spread_seed: None,
        };
        self.search_resident_sessions::<T, weft_search::GgnnSearchSession<T>>(
            &how,
            queries,
            out,
            |ctx| {
                data.check_finite()?;
                weft_search::GgnnSearchSession::new(ctx, data, hier.base(), hier.entry_points())
            },
            |session, part, out| {
                session.search_into(part, self.metric(), &p, &params.ggnn_gpu, out)
            },
        )
    }

    /// Runs `search` on the resident GPU search sessions of type `S` kept in the index's GPU
    /// cache, one per device of `how.devices`: the queries are split into contiguous parts, one
    /// per device (see [`split_rows`]; one part runs on the calling thread, several on threads
    /// of their own, at the same time), and each part's neighbours go into its rows of `out`.
    /// See [`Index::search_slot`] for what happens on each device. `None` when no GPU is usable
    /// and `how.required` is false; the first error, in device order, otherwise.
    #[cfg(feature = "cuda")]
    fn search_resident_sessions<T: Element, S: ResidentSession<T>>(
        &self,
        how: &ResidentSearch<'_>,
        queries: DatasetView<'_, T>,
        out: &mut NeighborsMut<'_>,
        new_session: impl Fn(weft_gpu::GpuContext) -> Result<S> + Sync,
        search: impl Fn(&mut S, DatasetView<'_, T>, NeighborsMut<'_>) -> Result<SearchStats> + Sync,
    ) -> Result<Option<SearchStats>> {
        let slots = self.gpu.slots(how.devices);
        let parts = split_rows(queries.rows(), slots.len());
        if let [_] = parts.as_slice() {
            return Self::search_slot(
                &slots[0],
                how,
                queries,
                out.reborrow(),
                &new_session,
                &search,
            );
        }
        let mut outs = Vec::with_capacity(parts.len());
        let mut rest = out.reborrow();
        for part in &parts {
            let (head, tail) = rest.split_at_row(part.len());
            outs.push(head);
            rest = tail;
        }
        let views = parts
            .iter()
            .map(|part| queries.slice_rows(part.clone()))
            .collect::<Result<Vec<_>>>()?;
        let (new_session, search) = (&new_session, &search);
        let results: Vec<Result<Option<SearchStats>>> = std::thread::scope(|scope| {
            let running: Vec<_> = slots
                .iter()
                .zip(views)
                .zip(outs)
                .map(|((slot, part), out)| {
                    scope
                        .spawn(move || Self::search_slot(slot, how, part, out, new_session, search))
                })
                .collect();
            running
                .into_iter()
                .map(|t| {
                    t.join()
                        .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
                })
                .collect()
        });
        let mut total = SearchStats::default();
        for result in results {
            match result? {
                Some(stats) => total.merge(&stats),
                None => return Ok(None),
            }
        }
        Ok(Some(total))
    }

    /// Runs `search` on the resident session of type `S` in `slot` (its lock held for the whole
    /// call: searches on one device take turns). The first call probes the device and, when it
    /// is usable, makes the session with `new_session`; its errors (e.g. out of device memory)
    /// are returned, not kept, while a failed probe is kept. A resident session made with other
    /// spread entry points than `how.spread_seed` (`None`: the graph's own) is dropped and
    /// made again. `None` when the device is not usable and `how.required` is false; an error
    /// naming the device when it is true, or when the resident session is not an `S` of
    /// elements `T` (neither happens: an index's data and graph do not change).
    #[cfg(feature = "cuda")]
    fn search_slot<T: Element, S: ResidentSession<T>>(
        slot: &GpuSlot,
        how: &ResidentSearch<'_>,
        queries: DatasetView<'_, T>,
        out: NeighborsMut<'_>,
        new_session: &impl Fn(weft_gpu::GpuContext) -> Result<S>,
        search: &impl Fn(&mut S, DatasetView<'_, T>, NeighborsMut<'_>) -> Result<SearchStats>,
    ) -> Result<Option<SearchStats>> {
        // A search that panicked midway leaves nothing worth keeping: start again.
        let mut state = slot.state.lock().unwrap_or_else(|poisoned| {
            let mut g = poisoned.into_inner();
            *g = None;
            g
        });
        // Made with other spread entry points: free it before making the new one.
        if matches!(state.as_ref(), Some(GpuState::Ready(_, seed)) if *seed != how.spread_seed) {
            *state = None;
        }
        if state.is_none() {
            let probed = match slot.device {
                Some(d) => weft_gpu::probe_device(d),
                None => weft_gpu::probe(),
            };
            *state = Some(match probed {
                Err(e) => GpuState::Unavailable(e.to_string()),
                Ok(ctx) => GpuState::Ready(
                    Box::new(weft_core::PerElement::new::<T>(
                        new_session(ctx)?.into_session(),
                    )),
                    how.spread_seed,
                ),
            });
        }
        let session = match state.as_mut() {
            Some(GpuState::Ready(resident, _)) => {
                let dtype = resident.dtype();
                let Some(session) = resident.get_mut::<T>() else {
                    return Err(Error::InvalidInput(format!(
                        "the resident GPU data holds {dtype} elements, not {}",
                        T::DTYPE
                    )));
                };
                S::of(session)
            }
            Some(GpuState::Unavailable(e)) if how.required => {
                let which = slot
                    .device
                    .map_or_else(String::new, |d| format!(" (device {d} was asked for)"));
                return Err(Error::Unsupported(format!(
                    "the GPU search backend needs a usable CUDA GPU{which}: {e}"
                )));
            }
            _ => return Ok(None),
        };
        let Some(session) = session else {
            return Err(Error::InvalidInput(
                "the resident GPU search session is of another graph kind".into(),
            ));
        };
        search(session, queries, out).map(Some)
    }

    /// Saves the index into folder `dir` (its parents created if needed): `graph.wgraph` and
    /// the vectors in `data.fbin` / `data.npy` / `data.u8bin` / `data.i8bin`.
    ///
    /// The folder is replaced whole, in one rename: the files are written into a hidden
    /// temporary folder beside `dir`, which then takes its place (an existing index is renamed
    /// aside first and removed after). A save that fails part-way leaves the old index as it
    /// was, and saves into one folder from several threads or processes never mix their files
    /// (the last one wins). An existing `dir` must be a folder that holds only an index's files
    /// (else [`Error::InvalidInput`], nothing written); an empty path is an
    /// [`Error::InvalidParams`] for `path`.
    pub fn save(&self, dir: impl AsRef<Path>) -> Result<()> {
        let mut allowed = DATA_FILES.to_vec();
        allowed.push(GRAPH_FILE);
        crate::save::replace_dir(
            dir.as_ref(),
            |name| allowed.contains(&name),
            |tmp| {
                let (name, format) = data_file_name(self.data.dtype());
                weft_io::write_any(tmp.join(name), &self.data, Some(format))?;
                storage::save(tmp.join(GRAPH_FILE), &self.graph, &self.meta)
            },
        )
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

/// The fingerprint of `data` that graph files record and [`Index::from_parts`] checks
/// ([`weft_graph::storage::data_fingerprint`] of its element type, shape and bytes).
pub fn data_fingerprint(data: &AnyDataset) -> String {
    fn of<T: Element>(view: DatasetView<'_, T>) -> String {
        let fp = |values: &[T]| {
            storage::data_fingerprint(
                T::DTYPE,
                view.rows(),
                view.dim(),
                bytemuck::cast_slice(values),
            )
        };
        match view.as_contiguous() {
            Some(all) => fp(all),
            None => fp(&view.iter().flatten().copied().collect::<Vec<T>>()),
        }
    }
    with_view!(data, |view| of(view))
}

/// Where a GPU search through an index's resident sessions runs.
#[cfg(feature = "cuda")]
struct ResidentSearch<'a> {
    /// Fail rather than return `None` when a device is not usable.
    required: bool,
    /// The devices, in order (`None`: the default one); at least one, none twice.
    devices: &'a [Option<usize>],
    /// The seed of the spread entry points the sessions are made with (`None`: the graph's
    /// own).
    spread_seed: Option<u64>,
}

/// `rows` queries cut into at most `parts` contiguous parts, as even as possible (the first
/// `rows % parts` one row longer), none empty unless `rows` is 0 (then one empty part).
pub(crate) fn split_rows(rows: usize, parts: usize) -> Vec<std::ops::Range<usize>> {
    let parts = parts.clamp(1, rows.max(1));
    let (base, extra) = (rows / parts, rows % parts);
    let mut start = 0;
    (0..parts)
        .map(|i| {
            let len = base + usize::from(i < extra);
            start += len;
            start - len..start
        })
        .collect()
}

/// Refuses a device named twice ([`Error::InvalidParams`] on `devices`).
pub(crate) fn check_devices(devices: &[usize]) -> Result<()> {
    match devices
        .iter()
        .enumerate()
        .find_map(|(i, d)| devices[..i].contains(d).then_some(d))
    {
        Some(twice) => Err(Error::invalid_param(
            "devices",
            format!("device {twice} is named twice"),
        )),
        None => Ok(()),
    }
}

/// Whether a search with `params` must run on the GPU (else it fails) rather than fall back to
/// the CPU: [`Backend::Gpu`], or [`Backend::Auto`] with a device asked for by number.
fn gpu_required(params: &SearchParams) -> bool {
    match params.backend {
        Backend::Cpu => false,
        Backend::Auto => !params.devices.is_empty(),
        Backend::Gpu => true,
    }
}

/// The GPU CAGRA search's parameters for `params` over `rows` points of `dim` elements and `k`
/// results: its list size is `beam_width` (the plan's, already checked against `k`), its knobs
/// [`SearchParams::cagra`], with the seed and the filter; checked.
#[cfg(any(feature = "cuda", test))]
fn cagra_gpu_params(
    params: &SearchParams,
    beam_width: usize,
    rows: usize,
    dim: usize,
    k: usize,
) -> Result<weft_search::CagraSearchParams> {
    use weft_core::Params as _;
    let p = weft_search::CagraSearchParams {
        beam_width,
        seed: params.seed,
        filter: None,
        tuning: params.cagra.clone(),
    };
    let p = match &params.filter {
        Some(f) => p.with_filter(f),
        None => p,
    };
    // k first: a k beyond the list's limit is what to change, not the beam width derived from it.
    let max = weft_search::CAGRA_GPU_MAX_BEAM_WIDTH;
    if k > max {
        return Err(Error::invalid_param(
            "k",
            format!(
                "k = {k} exceeds the {max} results per query the GPU CAGRA search can return (its \
                 candidate list, the beam width, holds at most {max}): ask for k <= {max}, or \
                 search on the CPU, whose beam search has no such limit"
            ),
        ));
    }
    p.validate(rows, dim)?;
    Ok(p)
}

/// The GPU GGNN search's parameters for `params` over `rows` points of `dim` elements: its
/// queue size is `beam_width` (the plan's), its knobs [`SearchParams::ggnn`]; checked. The
/// GGNN search has no f16 traversal: [`SearchParams::cagra`] asking for one is an
/// [`Error::InvalidParams`] named `traversal` (never ignored).
#[cfg(any(feature = "cuda", test))]
fn ggnn_gpu_params(
    params: &SearchParams,
    beam_width: usize,
    rows: usize,
    dim: usize,
) -> Result<weft_search::GgnnSearchParams> {
    use weft_core::Params as _;
    if params.cagra.traversal != weft_search::SearchPrecision::Exact {
        return Err(Error::invalid_param(
            "traversal",
            "the GGNN search of a hierarchical graph has no f16 traversal (use exact)",
        ));
    }
    let p = weft_search::GgnnSearchParams {
        beam_width,
        seed: params.seed,
        filter: params.filter.clone(),
        tuning: params.ggnn.clone(),
        ..weft_search::GgnnSearchParams::default()
    };
    p.validate(rows, dim)?;
    Ok(p)
}

/// Runs `search` on `queries` into `out`: in one call when `cancel` is `None`, else in batches
/// of [`CANCEL_CHECK_ROWS`] queries with a look at `cancel` before each and after the last (an
/// [`Error::Cancelled`] once cancelled). A query's result does not depend on its batch: the
/// index's searches start every query from the same entry points.
fn in_batches<'q, T: Element>(
    queries: DatasetView<'q, T>,
    cancel: Option<&CancelToken>,
    out: &mut NeighborsMut<'_>,
    mut search: impl FnMut(DatasetView<'q, T>, NeighborsMut<'_>) -> Result<SearchStats>,
) -> Result<SearchStats> {
    let Some(cancel) = cancel else {
        return search(queries, out.reborrow());
    };
    let rows = queries.rows();
    let mut stats = SearchStats::default();
    let mut start = 0;
    loop {
        cancel.check()?;
        let end = (start + CANCEL_CHECK_ROWS).min(rows);
        stats.merge(&search(
            queries.slice_rows(start..end)?,
            out.rows_mut(start..end),
        )?);
        start = end;
        if start >= rows {
            break;
        }
    }
    cancel.check()?;
    Ok(stats)
}

#[cfg(test)]
mod tests {
    use super::*;
    use weft_core::FixedDegreeGraph;
    use weft_core::rng::SplitMix64;

    /// 36,000 x 128 `f32` (17.6 MiB, above the copy threshold) and a random degree-16 graph
    /// with spread-out entry points.
    fn large_index() -> (Index, Dataset<f32>) {
        let (n, dim, degree) = (36_000usize, 128usize, 16usize);
        let mut rng = SplitMix64::new(7);
        let values: Vec<f32> = (0..n * dim)
            .map(|_| rng.below(1000) as f32 * 0.01)
            .collect();
        let mut ids = Vec::with_capacity(n * degree);
        for v in 0..n as u64 {
            for j in 1..=degree as u64 {
                // Offsets in disjoint windows below n: no self-loop, no duplicate.
                ids.push(((v + j * 2_000 + rng.below(1_000)) % n as u64) as NodeId);
            }
        }
        let graph = FixedDegreeGraph::new(n, degree, ids)
            .unwrap()
            .with_entry_points((0..64).map(|i| i * 500).collect());
        graph.validate().unwrap();
        let data = Dataset::from_vec(values, n, dim).unwrap();
        let queries: Vec<f32> = (0..50 * dim)
            .map(|_| rng.below(1000) as f32 * 0.01)
            .collect();
        let meta = GraphMeta::new(Metric::L2Squared).with_data(DType::F32, dim);
        let index = Index::from_parts(
            AnyDataset::from_typed(data),
            StoredGraph::Fixed(graph),
            meta,
        )
        .unwrap();
        (index, Dataset::from_vec(queries, 50, dim).unwrap())
    }

    #[test]
    fn the_huge_page_copies_give_the_same_results() {
        let (index, queries) = large_index();
        let params = SearchParams {
            backend: SearchBackend::Cpu,
            ..SearchParams::with_beam_width(32)
        };
        let with = index.search(queries.view(), 10, &params).unwrap();
        let copies = index
            .huge_pages
            .copies
            .get()
            .expect("the CPU search made them");
        if cfg!(target_os = "linux") && weft_core::huge_pages::available_memory().is_some() {
            assert!(copies.data.is_some(), "17.6 MiB of data is copied");
        }
        assert!(copies.graph.is_none(), "a 2.2 MiB graph is not copied");
        let plain = index.clone().with_huge_page_copy(false);
        let without = plain.search(queries.view(), 10, &params).unwrap();
        assert!(plain.huge_pages.copies.get().is_none());
        assert_eq!(with.neighbors.ids, without.neighbors.ids);
        assert_eq!(with.neighbors.dists, without.neighbors.dists);
        assert_eq!(with.stats, without.stats);
    }

    #[test]
    fn the_gpu_searches_take_the_beam_width_as_their_list_size() {
        let params = SearchParams {
            seed: 5,
            ..SearchParams::with_beam_width(96)
        };
        let beam = params.beam_width_for(10).unwrap();
        assert_eq!(beam, 96);
        let cagra = cagra_gpu_params(&params, beam, 1000, 16, 10).unwrap();
        assert_eq!(cagra.beam_width, 96);
        assert_eq!(cagra.seed, 5);
        let ggnn = ggnn_gpu_params(&params, beam, 1000, 16).unwrap();
        assert_eq!(ggnn.beam_width, 96);
        assert_eq!(ggnn.tuning, params.ggnn);
        // No beam width given: the plan's default for k, the same rule on every surface.
        assert_eq!(SearchParams::default().beam_width_for(10).unwrap(), 64);
        assert_eq!(SearchParams::default().beam_width_for(100).unwrap(), 128);
        // The GGNN search has no f16 traversal: asking for one is refused, not ignored.
        let mut f16 = params.clone();
        f16.cagra.traversal = weft_search::SearchPrecision::F16;
        let err = ggnn_gpu_params(&f16, beam, 1000, 16).unwrap_err();
        assert!(
            matches!(&err, Error::InvalidParams { name, .. } if name == "traversal"),
            "{err}"
        );
        // The launch plan of the CAGRA search (no GPU needed): single-CTA keeps one list of the
        // beam width; multi-CTA splits it over blocks of 32.
        let mut single = cagra.clone();
        single.tuning.mode = weft_search::CagraSearchMode::SingleCta;
        #[cfg(feature = "cuda")]
        {
            use weft_search::gpu::cagra::{CagraSearchShape, MULTI_CTA_BLOCK_LIST_LEN, plan};
            let shape = |nq| CagraSearchShape {
                n: 1000,
                dim: 16,
                elem_bytes: 4,
                degree: 32,
                nq,
                k: 10,
                filtered: false,
            };
            let p = plan(132, shape(1000), &single).unwrap();
            assert_eq!((p.ctas_per_query, p.block_list_len), (1, 96));
            let mut multi = cagra.clone();
            multi.tuning.mode = weft_search::CagraSearchMode::MultiCta;
            let p = plan(132, shape(1), &multi).unwrap();
            assert_eq!(p.block_list_len, MULTI_CTA_BLOCK_LIST_LEN);
            assert_eq!(p.ctas_per_query * p.block_list_len, 96);
        }
        let _ = single;
        // A beam width below k is refused by name, before any GPU work.
        let err = SearchParams::with_beam_width(8)
            .beam_width_for(10)
            .unwrap_err();
        assert!(
            matches!(&err, Error::InvalidParams { name, .. } if name == "beam_width"),
            "{err}"
        ); // A k beyond the GPU list's limit blames k (what the caller gave), not the beam width
        // derived from it (the default for k = 1500 is 1504).
        for beam in [1500, 1504] {
            let err =
                cagra_gpu_params(&SearchParams::with_beam_width(beam), beam, 10_000, 16, 1500)
                    .unwrap_err();
            assert!(
                matches!(&err, Error::InvalidParams { name, .. } if name == "k"),
                "{err}"
            );
            let text = err.to_string();
            assert!(
                text.contains("k = 1500") && text.contains("k <= 1024") && text.contains("CPU"),
                "{text}"
            );
        }
    }

    #[test]
    fn the_search_knobs_are_checked_on_every_back_end() {
        let data = Dataset::from_vec((0..400).map(|i| (i % 37) as f32).collect(), 100, 4).unwrap();
        let index = Index::builder(crate::Algorithm::exact(8))
            .backend(Backend::Cpu)
            .build(data.view())
            .unwrap();
        let cpu = SearchParams::default().with_backend(Backend::Cpu);
        index.search(data.view(), 5, &cpu).unwrap();
        let mut bad = cpu.clone();
        bad.cagra.search_width = 0;
        let e = index.search(data.view(), 5, &bad).unwrap_err();
        assert!(
            matches!(&e, Error::InvalidParams { name, .. } if name == "search_width"),
            "{e}"
        );
        let mut bad = cpu.clone();
        bad.ggnn.tau = f32::NAN;
        let e = index.search(data.view(), 5, &bad).unwrap_err();
        assert!(
            matches!(&e, Error::InvalidParams { name, .. } if name == "tau"),
            "{e}"
        );
        let e = index
            .search(data.view(), 5, &SearchParams::with_beam_width(4))
            .unwrap_err();
        assert!(
            matches!(&e, Error::InvalidParams { name, .. } if name == "beam_width"),
            "{e}"
        );
        // The exact search has no beam and no knobs to check.
        index
            .search(data.view(), 5, &SearchParams::exact())
            .unwrap();
    }

    #[test]
    fn exact_searches_make_no_copy() {
        let (index, queries) = large_index();
        let params = SearchParams {
            backend: SearchBackend::Cpu,
            ..SearchParams::exact()
        };
        index.search(queries.view(), 5, &params).unwrap();
        assert!(index.huge_pages.copies.get().is_none());
    }

    #[test]
    fn split_rows_are_contiguous_even_and_never_empty() {
        assert_eq!(split_rows(0, 3), vec![0..0]);
        assert_eq!(split_rows(1, 3), vec![0..1]);
        assert_eq!(split_rows(7, 3), vec![0..3, 3..5, 5..7]);
        assert_eq!(split_rows(5, 0), vec![0..5]);
        for rows in 0..40 {
            for parts in 0..6 {
                let split = split_rows(rows, parts);
                assert_eq!(split.len(), parts.clamp(1, rows.max(1)));
                assert_eq!(split[0].start, 0);
                assert_eq!(split[split.len() - 1].end, rows);
                assert!(split.windows(2).all(|w| w[0].end == w[1].start));
                let (lo, hi) = (
                    split.iter().map(|r| r.len()).min().unwrap(),
                    split.iter().map(|r| r.len()).max().unwrap(),
                );
                assert!(hi - lo <= 1 && (lo > 0 || rows == 0), "{rows} / {parts}");
            }
        }
    }

    /// The replicated search's split, threads and merge, on one GPU: the default device and
    /// device 0 are two slots of the cache (two sessions on one card), each searching half of
    /// an odd batch. Single-CTA results do not depend on the batch, so the result is that of
    /// one session searching the whole batch, and both sessions stay resident.
    #[cfg(feature = "cuda")]
    #[test]
    fn a_batch_split_over_two_sessions_equals_one_session() {
        use weft_search::CagraSearchSession;
        if weft_gpu::testing::gpu_or_skip("a_batch_split_over_two_sessions_equals_one_session")
            .is_none()
        {
            return;
        }
        let mut rng = SplitMix64::new(3);
        let base = Dataset::from_fn(3000, 24, |_, _| rng.next_f32()).unwrap();
        let queries = Dataset::from_fn(301, 24, |_, _| rng.next_f32()).unwrap();
        let index = Index::builder(crate::Algorithm::Cagra(crate::CagraParams::default()))
            .backend(Backend::Cpu)
            .build(base.clone())
            .unwrap();
        let StoredGraph::Fixed(graph) = &index.graph else {
            panic!("a CAGRA index holds a fixed-degree graph");
        };
        let mut params = SearchParams::with_beam_width(32);
        params.cagra.mode = weft_search::CagraSearchMode::SingleCta;
        let p = cagra_gpu_params(&params, 32, base.rows(), base.dim(), 10).unwrap();
        let run = |devices: &[Option<usize>]| {
            let mut out = Neighbors::new(queries.rows(), 10);
            let how = ResidentSearch {
                required: true,
                devices,
                spread_seed: None,
            };
            let stats = index
                .search_resident_sessions::<f32, CagraSearchSession<f32>>(
                    &how,
                    queries.view(),
                    &mut out.as_mut(),
                    |ctx| CagraSearchSession::new(ctx, base.view(), graph),
                    |session, part, out| session.search_into(part, Metric::L2Squared, &p, out),
                )
                .unwrap()
                .expect("a usable GPU");
            (out, stats)
        };
        let (one, one_stats) = run(&[Some(0)]);
        let (two, two_stats) = run(&[None, Some(0)]);
        assert_eq!(one.ids, two.ids);
        assert_eq!(one.dists, two.dists);
        assert_eq!((one_stats.queries, two_stats.queries), (301, 301));
        assert_eq!(
            one_stats.distance_computations,
            two_stats.distance_computations
        );
        assert_eq!(index.gpu.0.lock().unwrap().len(), 2);
        // Back to one device: the other slot's session is dropped.
        let (again, _) = run(&[Some(0)]);
        assert_eq!(again.ids, one.ids);
        assert_eq!(index.gpu.0.lock().unwrap().len(), 1);
    }
}
