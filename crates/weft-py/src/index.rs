//! `weft.build`, `weft.load` and `weft.Index`.

use std::sync::Arc;

use numpy::{PyArray1, PyArrayDyn, PyArrayMethods};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};
use serde_json::Value;
use weft::{
    Algorithm, CancelToken, Index, IndexBuilder, NeighborsMut, NodeId, SearchParams, StoredGraph,
};

use crate::arrays::{self, input, numpy_name, with_input};
use crate::convert;
use crate::errors::err;
use crate::progress::{Collector, Reporter};
use crate::run::{cancellable, cancellable_polling};
use crate::state::{self, STATE_VERSION};

/// Estimated distance-element operations below which a search runs on the calling thread
/// (GIL released, not cancellable): about a few milliseconds of work, where a worker thread
/// would cost more than the search itself.
const INLINE_WORK: usize = 1 << 24;

/// Wall time a chunk of a long search aims at: the longest a Ctrl-C waits for the search to
/// stop, about.
const CHUNK_SECONDS: f64 = 0.05;

/// Searches `queries` into `out` in chunks of rows, with a look at `cancel` before each (an
/// [`weft::Error::Cancelled`] once cancelled). The first chunk is
/// [`weft::index::CANCEL_CHECK_ROWS`] queries; each next one is sized from the last one's
/// time per query to take about [`CHUNK_SECONDS`] (at most 8 times the last). Chunks of that
/// size keep the cores busy, where the library's own cancellable search (a look at the token
/// every `CANCEL_CHECK_ROWS` queries) left them idle at the end of each batch: about 3 % of a
/// 10,000-query search on 2 cores. A query's result does not depend on its chunk.
fn search_in_chunks<T: weft::Element>(
    index: &Index,
    queries: weft::DatasetView<'_, T>,
    mut out: NeighborsMut<'_>,
    params: &SearchParams,
    cancel: &CancelToken,
) -> weft::Result<()> {
    let rows = queries.rows();
    let mut chunk = weft::index::CANCEL_CHECK_ROWS;
    let mut start = 0;
    while start < rows {
        cancel.check()?;
        let end = rows.min(start.saturating_add(chunk));
        let began = std::time::Instant::now();
        index.search_into_buffers(
            queries.slice_rows(start..end)?,
            out.rows_mut(start..end),
            params,
        )?;
        let per_row = began.elapsed().as_secs_f64() / (end - start) as f64;
        let aim = if per_row > 0.0 {
            (CHUNK_SECONDS / per_row) as usize
        } else {
            usize::MAX
        };
        chunk = aim.clamp(weft::index::CANCEL_CHECK_ROWS, chunk.saturating_mul(8));
        start = end;
    }
    cancel.check()
}

/// A searchable index: the vectors, the graph built on them and how it was built.
///
/// Made by `weft.build` or `weft.load`. Searches release the GIL and may run from several
/// Python threads at once.
#[pyclass(name = "Index", module = "weft", frozen)]
pub struct PyIndex {
    inner: Index,
}

/// Builds an index of `data` (n x dim; float32, float16, uint8 or int8; other floats become
/// float32).
///
/// `algorithm`: a name of `weft.algorithms()`; `**params`: its parameters by name, checked by the
/// library (unknown names and impossible values raise `InvalidParamsError`, nothing is
/// adjusted); `k`: the neighbour count of the k-NN graph builders (`exact`, `nndescent`).
/// `metric`: `l2` (squared Euclidean distance), `ip` (distance -<q, x>) or `cosine`
/// (1 - cosine similarity); smaller is nearer for every metric. `backend`: `auto` (the GPU when
/// usable), `cpu` or `gpu`. The same `seed` and parameters give the same graph on the CPU,
/// whatever `threads`.
///
/// `copy=True` (the default) gives the index its own copy of the vectors, so later changes to
/// `data` do not reach it. `copy=False` reads a C-contiguous array of a weft element type in
/// place, without a copy: the index keeps a reference to the array, which must not be
/// modified while the index lives (searches would see the change, and the graph would no
/// longer fit its vectors). `progress`: called as `progress(stage, done, total)` on the calling
/// thread as the build goes (`total` is `None` when unknown; an exception it raises cancels the
/// build and is raised); `verbose=True` prints the same to `sys.stderr`. `device`: the CUDA
/// device (GPU number) to build on, and the index's GPU searches then default to it (`None`:
/// device 0, or `$WEFT_GPU_DEVICE`); a device that cannot be used raises `UnsupportedError`
/// naming it, whatever the backend. The GIL is released and Ctrl-C cancels the build.
#[pyfunction]
#[pyo3(signature = (data, *, metric = "l2", algorithm = "rnndescent", backend = "auto", seed = 0, threads = None, k = None, copy = true, progress = None, verbose = false, device = None, **params))]
#[allow(clippy::too_many_arguments)]
pub(crate) fn build(
    py: Python<'_>,
    data: &Bound<'_, PyAny>,
    metric: &str,
    algorithm: &str,
    backend: &str,
    seed: u64,
    threads: Option<usize>,
    k: Option<usize>,
    copy: bool,
    progress: Option<Py<PyAny>>,
    verbose: bool,
    device: Option<usize>,
    params: Option<&Bound<'_, PyDict>>,
) -> PyResult<PyIndex> {
    if let Some(p) = &progress
        && !p.bind(py).is_callable()
    {
        return Err(PyTypeError::new_err(
            "progress must be a callable, called as progress(stage, done, total)",
        ));
    }
    let builder = BuildKeywords {
        metric,
        algorithm,
        backend,
        seed,
        threads,
        k,
        params,
    }
    .builder()?;
    let input = input(data, None, "the data vectors")?;
    let dataset = arrays::dataset(&input, copy)?;
    let token = CancelToken::new();
    let mut builder = builder.cancel(token.clone());
    if let Some(d) = device {
        builder = builder.device(d);
    }
    let mut reporter = Reporter::new(progress, verbose);
    let index = if reporter.wanted() {
        let collector = Arc::new(Collector::default());
        builder = builder.progress(collector.clone());
        cancellable_polling(
            py,
            &token,
            move || builder.build(dataset),
            |py| reporter.poll(py, &collector),
        )?
    } else {
        cancellable(py, &token, move || builder.build(dataset))?
    }
    .map_err(err)?;
    Ok(PyIndex { inner: index })
}

/// The keywords of `weft.build` (and `ShardedIndex.build`) that say what to build.
pub(crate) struct BuildKeywords<'a, 'py> {
    /// `metric=`.
    pub(crate) metric: &'a str,
    /// `algorithm=`.
    pub(crate) algorithm: &'a str,
    /// `backend=`.
    pub(crate) backend: &'a str,
    /// `seed=`.
    pub(crate) seed: u64,
    /// `threads=`.
    pub(crate) threads: Option<usize>,
    /// `k=`.
    pub(crate) k: Option<usize>,
    /// The algorithm's own parameters, by keyword.
    pub(crate) params: Option<&'a Bound<'py, PyDict>>,
}

impl BuildKeywords<'_, '_> {
    /// The builder these keywords describe (no device, progress or cancellation yet).
    pub(crate) fn builder(self) -> PyResult<IndexBuilder> {
        let params = match self.params {
            Some(p) => convert::to_json(p.as_any())?,
            None => Value::Object(Default::default()),
        };
        let algorithm = Algorithm::from_json(self.algorithm, &params, self.k).map_err(err)?;
        let mut builder = Index::builder(algorithm)
            .metric(convert::metric(self.metric)?)
            .backend(convert::backend(self.backend)?)
            .seed(self.seed);
        if let Some(t) = self.threads {
            builder = builder.threads(t);
        }
        Ok(builder)
    }
}

/// The keywords of `Index.search` (and `ShardedIndex.search`).
pub(crate) struct SearchKeywords<'a, 'py> {
    /// `beam_width=`.
    pub(crate) beam_width: Option<usize>,
    /// `exact=`.
    pub(crate) exact: bool,
    /// `backend=`.
    pub(crate) backend: &'a str,
    /// `threads=`.
    pub(crate) threads: Option<usize>,
    /// `seed=`.
    pub(crate) seed: u64,
    /// `filter=`: a bool mask or an array of allowed ids.
    pub(crate) filter: Option<&'a Bound<'py, PyAny>>,
    /// `devices=`: a device number, a list of them or `"all"`.
    pub(crate) devices: Option<&'a Bound<'py, PyAny>>,
    /// `device=`, the former name of `devices=` (one number).
    pub(crate) device: Option<usize>,
    /// The searches' own knobs, by keyword.
    pub(crate) knobs: Option<&'a Bound<'py, PyDict>>,
}

impl SearchKeywords<'_, '_> {
    /// The search parameters these keywords say, for an index of `n` vectors (the length a
    /// filter mask must have).
    pub(crate) fn params(self, n: usize) -> PyResult<SearchParams> {
        let mut params = if self.exact {
            SearchParams::exact()
        } else {
            SearchParams {
                beam_width: self.beam_width,
                ..SearchParams::default()
            }
        };
        search_knobs(&mut params, self.knobs)?;
        params.backend = convert::backend(self.backend)?;
        params.threads = self.threads;
        params.seed = self.seed;
        params.devices = match (self.devices.filter(|d| !d.is_none()), self.device) {
            (Some(_), Some(_)) => {
                return Err(PyTypeError::new_err(
                    "search() got both devices= and device= (its former name): give devices=",
                ));
            }
            (Some(d), None) => convert::devices(d)?,
            (None, d) => d.into_iter().collect(),
        };
        if let Some(f) = self.filter.filter(|f| !f.is_none()) {
            params.filter = Some(convert::filter(f, n)?);
        }
        Ok(params)
    }
}

/// Rebuilds a pickled `Index` from its state (`Index.__reduce__`; called through
/// `weft._index_from_state`).
#[pyfunction]
pub(crate) fn _index_from_state(py: Python<'_>, state: &Bound<'_, PyAny>) -> PyResult<PyIndex> {
    let (version, files): (u32, Vec<(String, Vec<u8>)>) = state.extract()?;
    if version != STATE_VERSION {
        return Err(err(weft::Error::Unsupported(format!(
            "a pickled weft.Index of state version {version}; this weft reads version \
             {STATE_VERSION}"
        ))));
    }
    let inner = py.detach(|| state::from_files(&files)).map_err(err)?;
    Ok(PyIndex { inner })
}

/// Loads an index saved by `Index.save` (memory-mapped).
#[pyfunction]
pub(crate) fn load(py: Python<'_>, path: std::path::PathBuf) -> PyResult<PyIndex> {
    let inner = py.detach(|| Index::load(&path)).map_err(err)?;
    Ok(PyIndex { inner })
}

impl PyIndex {
    /// The library's index.
    pub(crate) fn inner(&self) -> &Index {
        &self.inner
    }
}

/// The searches' own knobs given to `Index.search` by keyword, set on `params`: the GPU CAGRA
/// search's ([`weft::search::CagraSearchTuning`]: `search_width`, `max_iterations`,
/// `min_iterations`, `team_size`, `mode`, `search_precision`, `rerank`) and the GGNN search's
/// ([`weft::search::GgnnSearchTuning`] and [`weft::search::GgnnGpuOptions`]: `tau`, `ggnn_best`,
/// `ggnn_visited`, `ggnn_max_iterations`, `ggnn_block_threads`, `ggnn_team_size`,
/// `ggnn_prefetch_rows`), the names of the CLI's flags. Another name is a `TypeError`, as
/// Python raises for an unknown keyword; a value of the wrong type too; an impossible value an
/// `InvalidParamsError` from the search, which checks them all.
fn search_knobs(params: &mut SearchParams, knobs: Option<&Bound<'_, PyDict>>) -> PyResult<()> {
    let Some(knobs) = knobs else {
        return Ok(());
    };
    for (key, value) in knobs.iter() {
        let key: String = key.extract()?;
        let (beam, cagra) = (&mut params.beam, &mut params.cagra);
        let (ggnn, gpu) = (&mut params.ggnn, &mut params.ggnn_gpu);
        match key.as_str() {
            "max_hops" => beam.max_hops = value.extract()?,
            "max_distance_computations" => beam.max_distance_computations = value.extract()?,
            "entry_layer" => beam.entry_layer.enabled = value.extract()?,
            "entry_layer_min_entries" => beam.entry_layer.min_entries = value.extract()?,
            "entry_layer_degree" => beam.entry_layer.degree = value.extract()?,
            "entry_layer_beam_width" => beam.entry_layer.beam_width = value.extract()?,
            "search_width" => cagra.search_width = value.extract()?,
            "max_iterations" => cagra.max_iterations = value.extract()?,
            "min_iterations" => cagra.min_iterations = value.extract()?,
            "team_size" => cagra.team_size = value.extract()?,
            "mode" => cagra.mode = value.extract::<String>()?.parse().map_err(err)?,
            "search_precision" => {
                cagra.traversal = value.extract::<String>()?.parse().map_err(err)?
            }
            "rerank" => cagra.rerank = value.extract()?,
            "tau" => ggnn.tau = value.extract()?,
            "ggnn_best" => ggnn.best = value.extract()?,
            "ggnn_visited" => ggnn.visited = value.extract()?,
            "ggnn_max_iterations" => ggnn.max_iterations = value.extract()?,
            "ggnn_block_threads" => gpu.block_threads = value.extract()?,
            "ggnn_team_size" => gpu.team_size = value.extract()?,
            "ggnn_prefetch_rows" => gpu.prefetch_rows = value.extract()?,
            other => {
                return Err(PyTypeError::new_err(format!(
                    "search() got an unexpected keyword argument '{other}' (the search knobs: \
                     max_hops, max_distance_computations, entry_layer, \
                     entry_layer_min_entries, entry_layer_degree, entry_layer_beam_width, \
                     search_width, max_iterations, min_iterations, team_size, mode, \
                     search_precision, rerank, tau, ggnn_best, ggnn_visited, \
                     ggnn_max_iterations, ggnn_block_threads, ggnn_team_size, \
                     ggnn_prefetch_rows)"
                )));
            }
        }
    }
    Ok(())
}

#[pymethods]
impl PyIndex {
    /// The `k` nearest neighbours of each query: `(ids, distances)`, queries x k (k for a 1-D
    /// query), nearest first, as uint32 and float32 arrays.
    ///
    /// `beam_width`: the graph search's candidate list size (at least k; default 64, or for k
    /// above 64, k rounded up to a multiple of 32: the search plan's rule, the CLI's too), on
    /// every back end.
    /// `exact=True`: compare with every vector instead. `backend`: `auto` (the GPU when usable),
    /// `cpu` or `gpu`. `threads`: run on a pool of that many threads (one pool per count, kept
    /// for later calls). `seed`: the seed of the search's random choices. `filter`: only these
    /// ids are returned, given as
    /// a bool mask of length n or an array of allowed ids (filtered-out points are still
    /// traversed; rows with fewer than k allowed neighbours found are padded with
    /// `weft.INVALID` and `inf`). C-contiguous queries are read in place; the GIL is released;
    /// Ctrl-C cancels a long search. Distances: smaller is nearer; `l2` the squared Euclidean
    /// distance, `ip` -<q, x>, `cosine` 1 - cos(q, x). `devices`: the CUDA devices of a GPU
    /// search, a number, a list of numbers or `"all"` (`None`: the one the index was built on,
    /// else the default device; `device=`, its former name, takes one number); with several
    /// the index is replicated and each device searches a part of the batch; a device that
    /// cannot be used raises `UnsupportedError` naming it, never falling back to the CPU, and
    /// one named twice `InvalidParamsError`.
    /// The searches' own knobs, by keyword (the CLI's flags, with underscores): the CPU beam
    /// search's `max_hops` (stop each query after that many expanded vertices),
    /// `max_distance_computations`, `entry_layer` (False: score every entry point; the CLI's
    /// `--no-entry-layer`), `entry_layer_min_entries`, `entry_layer_degree`,
    /// `entry_layer_beam_width`; the GPU CAGRA search's `search_width`, `max_iterations`,
    /// `min_iterations`, `team_size`, `mode`, `search_precision`, `rerank`; the GGNN search's
    /// `tau`, `ggnn_best`, `ggnn_visited`, `ggnn_max_iterations`, `ggnn_block_threads`,
    /// `ggnn_team_size`, `ggnn_prefetch_rows`.
    #[pyo3(signature = (queries, k = 10, *, beam_width = None, exact = false, backend = "auto", threads = None, seed = 0, filter = None, devices = None, device = None, **knobs))]
    #[allow(clippy::too_many_arguments)]
    fn search<'py>(
        &self,
        py: Python<'py>,
        queries: &Bound<'py, PyAny>,
        k: usize,
        beam_width: Option<usize>,
        exact: bool,
        backend: &str,
        threads: Option<usize>,
        seed: u64,
        filter: Option<&Bound<'py, PyAny>>,
        devices: Option<&Bound<'py, PyAny>>,
        device: Option<usize>,
        knobs: Option<&Bound<'py, PyDict>>,
    ) -> PyResult<convert::Results<'py, numpy::IxDyn>> {
        let index = &self.inner;
        let queries = input(queries, Some(index.data().dtype()), "queries")?;
        // Before the result arrays are allocated: k is at most the number of vectors.
        weft::core::error::check_k(k, index.data().rows()).map_err(err)?;
        let params = SearchKeywords {
            beam_width,
            exact,
            backend,
            threads,
            seed,
            filter,
            devices,
            device,
            knobs,
        }
        .params(index.data().rows())?;
        let shape: Vec<usize> = if queries.one_d {
            vec![k]
        } else {
            vec![queries.rows, k]
        };
        let ids = PyArrayDyn::<NodeId>::zeros(py, shape.as_slice(), false);
        let dists = PyArrayDyn::<f32>::zeros(py, shape.as_slice(), false);
        {
            // SAFETY: both arrays were just made here and no other reference to them exists
            // until they are returned.
            let (id_slice, dist_slice) = unsafe { (ids.as_slice_mut(), dists.as_slice_mut()) };
            let (id_slice, dist_slice) = (
                id_slice.map_err(|e| PyValueError::new_err(e.to_string()))?,
                dist_slice.map_err(|e| PyValueError::new_err(e.to_string()))?,
            );
            let out = NeighborsMut::new(id_slice, dist_slice, k).map_err(err)?;
            let per_query = if exact {
                index.data().rows()
            } else {
                weft::search::plan::beam_width_or_default(params.beam_width, k).saturating_mul(64)
            };
            let work = queries
                .rows
                .saturating_mul(queries.dim)
                .saturating_mul(per_query);
            let result = if work <= INLINE_WORK || queries.rows <= 1 {
                with_input!(queries, |view| py.detach(|| index
                    .search_into_buffers(view, out, &params)
                    .map(|_| ())))
            } else {
                let token = CancelToken::new();
                let (params, t) = (&params, &token);
                with_input!(queries, |view| cancellable(py, &token, move || {
                    search_in_chunks(index, view, out, params, t)
                })?)
            };
            result.map_err(err)?;
        }
        Ok((ids, dists))
    }

    /// Saves the index into folder `path` (created if needed): the graph and the vectors,
    /// replacing the folder in one rename (a failed save leaves the old index; concurrent saves
    /// never mix files). An empty path raises `InvalidParamsError`; an existing `path` that
    /// holds other files than an index's raises `InvalidInputError`.
    fn save(&self, py: Python<'_>, path: std::path::PathBuf) -> PyResult<()> {
        py.detach(|| self.inner.save(&path)).map_err(err)
    }

    /// Pickle support: the index's saved files as bytes, rebuilt by `weft._index_from_state`
    /// into an index held in memory that searches identically.
    fn __reduce__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let files = py.detach(|| state::to_files(&self.inner)).map_err(err)?;
        let files: Vec<(String, Bound<'py, PyBytes>)> = files
            .into_iter()
            .map(|(name, bytes)| (name, PyBytes::new(py, &bytes)))
            .collect();
        let rebuild = py.import("weft")?.getattr("_index_from_state")?;
        let state = (STATE_VERSION, files).into_pyobject(py)?;
        Ok((rebuild, (state,)).into_pyobject(py)?.into_any())
    }

    /// Loads an index saved by `Index.save` (memory-mapped).
    #[staticmethod]
    #[pyo3(name = "load")]
    fn load_static(py: Python<'_>, path: std::path::PathBuf) -> PyResult<PyIndex> {
        load(py, path)
    }

    /// The graph as a `(n, max_degree)` `uint32` array of neighbour ids, each row padded with
    /// `weft.INVALID`; for a hierarchical graph its base layer. With `distances=True` and a
    /// k-NN graph, also the `(n, k)` `float32` distances.
    #[pyo3(signature = (*, distances = false))]
    fn graph<'py>(&self, py: Python<'py>, distances: bool) -> PyResult<Bound<'py, PyAny>> {
        let stored = self.inner.graph();
        let ids = match stored {
            StoredGraph::Fixed(g) => convert::matrix(py, g.ids().to_vec(), g.n(), g.degree())?,
            StoredGraph::Knn(g) => convert::matrix(py, g.ids().to_vec(), g.n(), g.k())?,
            StoredGraph::Hier(h) => {
                let g = h.base();
                convert::matrix(py, g.ids().to_vec(), g.n(), g.degree())?
            }
        };
        if !distances {
            return Ok(ids.into_any());
        }
        match stored {
            StoredGraph::Knn(g) => {
                let d = convert::matrix(py, g.dists().to_vec(), g.n(), g.k())?;
                Ok((ids, d).into_pyobject(py)?.into_any())
            }
            _ => Err(err(weft::Error::Unsupported(format!(
                "only a k-NN graph stores distances; this is a `{}` graph",
                stored.kind()
            )))),
        }
    }

    /// The entry points of the graph searches (`uint32`); for a k-NN graph, which stores none,
    /// the spread entry points of `seed`.
    #[pyo3(signature = (seed = 0))]
    fn entry_points<'py>(
        &self,
        py: Python<'py>,
        seed: u64,
    ) -> PyResult<Bound<'py, PyArray1<NodeId>>> {
        let e = py
            .detach(|| self.inner.search_entry_points(seed))
            .map_err(err)?;
        Ok(PyArray1::from_slice(py, &e.ids))
    }

    /// A copy of the indexed vectors as a `(n, dim)` array.
    fn data<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let d = self.inner.data();
        let (rows, dim) = (d.rows(), d.dim());
        Ok(match d {
            weft::AnyDataset::F32(x) => {
                convert::matrix(py, x.as_slice().to_vec(), rows, dim)?.into_any()
            }
            weft::AnyDataset::F16(x) => {
                convert::matrix(py, x.as_slice().to_vec(), rows, dim)?.into_any()
            }
            weft::AnyDataset::U8(x) => {
                convert::matrix(py, x.as_slice().to_vec(), rows, dim)?.into_any()
            }
            weft::AnyDataset::I8(x) => {
                convert::matrix(py, x.as_slice().to_vec(), rows, dim)?.into_any()
            }
        })
    }

    /// Number of vectors.
    fn __len__(&self) -> usize {
        self.inner.data().rows()
    }

    /// Elements per vector.
    #[getter]
    fn dim(&self) -> usize {
        self.inner.data().dim()
    }

    /// The numpy name of the element type (`float32`, `float16`, `uint8`, `int8`).
    #[getter]
    fn dtype(&self) -> &'static str {
        numpy_name(self.inner.data().dtype())
    }

    /// The metric (`l2`, `ip` or `cosine`).
    #[getter]
    fn metric(&self) -> &'static str {
        self.inner.metric().name()
    }

    /// The graph's kind: `knn` (a k-NN graph: exact, nndescent), `fixed` (a search graph) or
    /// `hier` (GGNN's hierarchy).
    #[getter]
    fn graph_kind(&self) -> &'static str {
        self.inner.graph_kind().name()
    }

    /// The algorithm that built the graph, if recorded.
    #[getter]
    fn algorithm(&self) -> Option<String> {
        self.inner.meta().algorithm()
    }

    /// How the graph was built: the algorithm, its back end, `k` and every parameter.
    #[getter]
    fn build_info<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let v = self.inner.meta().params_json().map_err(err)?;
        convert::to_py(py, &v)
    }

    fn __repr__(&self) -> String {
        format!(
            "weft.Index(n={}, dim={}, dtype={}, metric={}, algorithm={}, graph={})",
            self.inner.data().rows(),
            self.inner.data().dim(),
            numpy_name(self.inner.data().dtype()),
            self.inner.metric().name(),
            self.inner.meta().algorithm().unwrap_or_else(|| "?".into()),
            self.inner.graph_kind().name(),
        )
    }
}
