//! `weft.ShardedIndex`: the library's `weft::ShardedIndex`.

use pyo3::prelude::*;
use pyo3::types::PyDict;
use weft::{CancelToken, ShardedIndex};

use crate::arrays::{self, input, with_input};
use crate::convert;
use crate::errors::err;
use crate::index::{BuildKeywords, SearchKeywords};
use crate::run::cancellable;

/// An index cut into contiguous shards, each with a graph of its own: every query is searched in
/// every shard and the shards' answers are merged exactly (ids are global: shard `i` holds the
/// vectors after those of the shards before it). The way to search more vectors than one GPU
/// holds: each GPU holds some of the shards, and the GPUs build and search at the same time.
/// Made by `ShardedIndex.build` or `ShardedIndex.load`.
#[pyclass(name = "ShardedIndex", module = "weft", frozen)]
pub(crate) struct PyShardedIndex {
    inner: ShardedIndex,
}

#[pymethods]
impl PyShardedIndex {
    /// Cuts `data` into `shards` contiguous parts of nearly equal size and builds one index per
    /// part, with the keywords of `weft.build` (`metric`, `algorithm`, `backend`, `seed`,
    /// `threads`, `k` and the algorithm's parameters). `devices`: `None` builds the shards one
    /// after another (on the default GPU or the CPU, as `backend` says); a device number, a
    /// list of them or `"all"` builds shard `i` on `devices[i % len(devices)]`, the devices at
    /// the same time, and the shards' searches then default to their device. Each shard copies
    /// its part of the vectors (the array must not change during the build). The GIL is
    /// released and Ctrl-C cancels the build.
    #[staticmethod]
    #[pyo3(signature = (data, shards, *, devices = None, metric = "l2", algorithm = "rnndescent", backend = "auto", seed = 0, threads = None, k = None, **params))]
    #[allow(clippy::too_many_arguments)]
    fn build(
        py: Python<'_>,
        data: &Bound<'_, PyAny>,
        shards: usize,
        devices: Option<&Bound<'_, PyAny>>,
        metric: &str,
        algorithm: &str,
        backend: &str,
        seed: u64,
        threads: Option<usize>,
        k: Option<usize>,
        params: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<PyShardedIndex> {
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
        let devices = match devices.filter(|d| !d.is_none()) {
            Some(d) => convert::devices(d)?,
            None => Vec::new(),
        };
        let input = input(data, None, "the data vectors")?;
        // Read in place where the array allows: every shard copies its part anyway, and the
        // sharded index keeps no reference to `data`.
        let dataset = arrays::dataset(&input, false)?;
        let token = CancelToken::new();
        let builder = builder.cancel(token.clone());
        let inner = cancellable(py, &token, move || {
            ShardedIndex::build(&builder, dataset, shards, &devices)
        })?
        .map_err(err)?;
        Ok(PyShardedIndex { inner })
    }

    /// The `k` nearest neighbours of each query over every shard: `(ids, distances)`, queries
    /// x k, nearest first, global ids, with the keywords of `Index.search`. `devices`: `None`
    /// searches the shards one after another (each on its own default device for a GPU
    /// search); otherwise shard `i` is searched on `devices[i % len(devices)]`, the devices at
    /// the same time. The result does not depend on the devices. A filter is over the global
    /// ids. The GIL is released.
    #[pyo3(signature = (queries, k = 10, *, beam_width = None, exact = false, backend = "auto", threads = None, seed = 0, filter = None, devices = None, **knobs))]
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
        knobs: Option<&Bound<'py, PyDict>>,
    ) -> PyResult<convert::Results<'py, numpy::Ix2>> {
        let index = &self.inner;
        let dtype = index.shards()[0].data().dtype();
        let queries = input(queries, Some(dtype), "queries")?;
        let params = SearchKeywords {
            beam_width,
            exact,
            backend,
            threads,
            seed,
            filter,
            devices,
            device: None,
            knobs,
        }
        .params(index.len())?;
        let found = with_input!(queries, |view| py.detach(|| index.search(view, k, &params)))
            .map_err(err)?;
        convert::neighbors(py, found.neighbors)
    }

    /// Saves the index into folder `path`: a `manifest.json` and one index folder per shard,
    /// replacing the folder in one rename (as `Index.save` does).
    fn save(&self, py: Python<'_>, path: std::path::PathBuf) -> PyResult<()> {
        py.detach(|| self.inner.save(&path)).map_err(err)
    }

    /// Loads a sharded index saved by `ShardedIndex.save` (each shard memory-mapped).
    #[staticmethod]
    fn load(py: Python<'_>, path: std::path::PathBuf) -> PyResult<PyShardedIndex> {
        let inner = py.detach(|| ShardedIndex::load(&path)).map_err(err)?;
        Ok(PyShardedIndex { inner })
    }

    /// The vector count of each shard, in id order.
    #[getter]
    fn shard_sizes(&self) -> Vec<usize> {
        (0..self.inner.shards().len())
            .map(|i| self.inner.shard_ids(i).len())
            .collect()
    }

    /// The number of vectors, over all shards.
    fn __len__(&self) -> usize {
        self.inner.len()
    }

    fn __repr__(&self) -> String {
        format!(
            "ShardedIndex({} vectors in {} shards)",
            self.inner.len(),
            self.inner.shards().len()
        )
    }
}
