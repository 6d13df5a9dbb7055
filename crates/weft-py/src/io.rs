//! Vector and id files, exact ground truth, the algorithm list and the GPU status.

use std::path::PathBuf;

use numpy::{PyArray2, PyArrayMethods, PyUntypedArrayMethods};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};
use weft::io::{Format, IdMatrix, ReadOptions};
use weft::{BuildCtx, CancelToken, Error, GpuStatus, NodeId, Registry};

use crate::arrays::{self, input, with_input};
use crate::convert;
use crate::errors::err;
use crate::run::cancellable;

/// A format by name (`None`: from the file's extension).
fn format(name: Option<&str>) -> PyResult<Option<Format>> {
    name.map(|n| {
        Format::from_name(n).ok_or_else(|| {
            err(Error::invalid_param(
                "format",
                format!(
                    "unknown format `{n}` (fvecs, ivecs, bvecs, fbin, ibin, u8bin, i8bin, npy)"
                ),
            ))
        })
    })
    .transpose()
}

/// Reads a vector file into a `(rows, dim)` array of its element type.
#[pyfunction]
#[pyo3(signature = (path, *, format = None, rows = None, allow_non_finite = false))]
pub(crate) fn read<'py>(
    py: Python<'py>,
    path: PathBuf,
    format: Option<&str>,
    rows: Option<(usize, usize)>,
    allow_non_finite: bool,
) -> PyResult<Bound<'py, PyAny>> {
    let mut options = ReadOptions::new().with_allow_non_finite(allow_non_finite);
    if let Some(f) = self::format(format)? {
        options = options.with_format(f);
    }
    let data = py
        .detach(|| match rows {
            Some((a, b)) => weft::io::read_rows_any(&path, a..b, &options),
            None => weft::io::read_any(&path, &options),
        })
        .map_err(err)?;
    let (r, d) = (data.rows(), data.dim());
    Ok(match data {
        weft::AnyDataset::F32(x) => convert::matrix(py, x.into_vec(), r, d)?.into_any(),
        weft::AnyDataset::F16(x) => convert::matrix(py, x.into_vec(), r, d)?.into_any(),
        weft::AnyDataset::U8(x) => convert::matrix(py, x.into_vec(), r, d)?.into_any(),
        weft::AnyDataset::I8(x) => convert::matrix(py, x.into_vec(), r, d)?.into_any(),
    })
}

/// Writes a `(rows, dim)` array of vectors to a file (atomically).
#[pyfunction]
#[pyo3(signature = (path, vectors, *, format = None))]
pub(crate) fn write(
    py: Python<'_>,
    path: PathBuf,
    vectors: &Bound<'_, PyAny>,
    format: Option<&str>,
) -> PyResult<()> {
    let format = self::format(format)?;
    let vectors = input(vectors, None, "vectors")?;
    with_input!(vectors, |view| py
        .detach(|| weft::io::write(&path, view, format)))
    .map_err(err)
}

/// Reads an id file (`ivecs`, `ibin`, `npy`) into a `(rows, cols)` `uint32` array.
#[pyfunction]
#[pyo3(signature = (path, *, format = None))]
pub(crate) fn read_ids<'py>(
    py: Python<'py>,
    path: PathBuf,
    format: Option<&str>,
) -> PyResult<Bound<'py, PyArray2<NodeId>>> {
    let format = self::format(format)?;
    let ids = py
        .detach(|| weft::io::read_ids(&path, format))
        .map_err(err)?;
    let (rows, cols, ids) = ids.into_parts();
    convert::matrix(py, ids, rows, cols)
}

/// Writes a `(rows, cols)` array of ids (any integer type that fits `uint32`) to a file.
#[pyfunction]
#[pyo3(signature = (path, ids, *, format = None))]
pub(crate) fn write_ids(
    py: Python<'_>,
    path: PathBuf,
    ids: &Bound<'_, PyAny>,
    format: Option<&str>,
) -> PyResult<()> {
    let format = self::format(format)?;
    let array = arrays::numpy(py)?.call_method1("asarray", (ids,))?;
    let kind: String = array.getattr("dtype")?.getattr("kind")?.extract()?;
    if kind != "u" && kind != "i" {
        return Err(pyo3::exceptions::PyTypeError::new_err(format!(
            "ids must be integers, got {}",
            array.getattr("dtype")?
        )));
    }
    let ndim: usize = array.getattr("ndim")?.extract()?;
    if ndim != 2 {
        return Err(err(Error::InvalidInput(format!(
            "ids must be a 2-D array (one row of ids per query), got {ndim} dimensions"
        ))));
    }
    let (min, max): (i128, i128) = if array.getattr("size")?.extract::<usize>()? == 0 {
        (0, 0)
    } else {
        (
            array.call_method0("min")?.call_method0("item")?.extract()?,
            array.call_method0("max")?.call_method0("item")?.extract()?,
        )
    };
    if min < 0 || max > i128::from(NodeId::MAX) {
        return Err(err(Error::InvalidInput(format!(
            "ids must lie in [0, {}], found values in [{min}, {max}]",
            NodeId::MAX
        ))));
    }
    let array = arrays::numpy(py)?
        .call_method1("ascontiguousarray", (array, "uint32"))?
        .cast_into::<PyArray2<NodeId>>()?;
    let (rows, cols) = (array.shape()[0], array.shape()[1]);
    let ids = IdMatrix::new(
        array
            .to_vec()
            .map_err(|e| pyo3::exceptions::PyValueError::new_err(e.to_string()))?,
        rows,
        cols,
    )
    .map_err(err)?;
    py.detach(|| weft::io::write_ids(&path, &ids, format))
        .map_err(err)
}

/// What a vector or id file holds, from its header: format, element, rows, dim, sizes.
#[pyfunction]
pub(crate) fn info<'py>(py: Python<'py>, path: PathBuf) -> PyResult<Bound<'py, PyAny>> {
    let info = py.detach(|| weft::io::info(&path)).map_err(err)?;
    let value = serde_json::to_value(&info).map_err(|e| err(Error::InvalidInput(e.to_string())))?;
    convert::to_py(py, &value)
}

/// The exact `k` nearest neighbours of every query among `base`, by brute force. `device`: the
/// CUDA device of the GPU back end (`None`: the default device); a device that cannot be used
/// raises `UnsupportedError` naming it, whatever the backend.
#[pyfunction]
#[pyo3(signature = (base, queries, k, *, metric = "l2", backend = "auto", threads = None, device = None))]
#[allow(clippy::too_many_arguments)]
pub(crate) fn ground_truth<'py>(
    py: Python<'py>,
    base: &Bound<'py, PyAny>,
    queries: &Bound<'py, PyAny>,
    k: usize,
    metric: &str,
    backend: &str,
    threads: Option<usize>,
    device: Option<usize>,
) -> PyResult<convert::Results<'py, numpy::Ix2>> {
    let metric = convert::metric(metric)?;
    let backend = convert::backend(backend)?;
    if threads == Some(0) {
        return Err(err(Error::invalid_param(
            "threads",
            "the thread count must be at least 1",
        )));
    }
    let base = input(base, None, "base vectors")?;
    let queries = input(queries, Some(base_dtype(&base)), "queries")?;
    let token = CancelToken::new();
    let ctx = BuildCtx::new(0)
        .with_threads(threads)
        .with_cancel(token.clone());
    let gpu = match (backend, device) {
        (weft::Backend::Cpu, None) => GpuStatus::Unavailable("the CPU was asked for".into()),
        _ => py.detach(|| GpuStatus::require(device)).map_err(err)?,
    };
    let found = if gpu.is_available() {
        // The GPU path takes owned datasets (copied once, as the upload does anyway).
        let registry = Registry::with_gpu(gpu);
        let (b, q) = (
            arrays::dataset(&base, true)?,
            arrays::dataset(&queries, true)?,
        );
        cancellable(py, &token, || {
            registry
                .exact_search(&b, &q, metric, k, Some(backend), &ctx)
                .map(|(found, _)| found)
        })?
    } else {
        if backend == weft::Backend::Gpu {
            return Err(err(Error::Unsupported(format!("no GPU back end: {gpu:?}"))));
        }
        exact_cpu(py, &base, &queries, metric, k, &token, &ctx)?
    }
    .map_err(err)?;
    convert::neighbors(py, found)
}

/// Exact search on the CPU, reading both arrays in place.
fn exact_cpu(
    py: Python<'_>,
    base: &arrays::Input<'_>,
    queries: &arrays::Input<'_>,
    metric: weft::Metric,
    k: usize,
    token: &CancelToken,
    ctx: &BuildCtx,
) -> PyResult<weft::Result<weft::Neighbors>> {
    fn one<T: weft::Element + numpy::Element>(
        py: Python<'_>,
        (b, br, bd): (&numpy::PyReadonlyArrayDyn<'_, T>, usize, usize),
        (q, qr, qd): (&numpy::PyReadonlyArrayDyn<'_, T>, usize, usize),
        metric: weft::Metric,
        k: usize,
        token: &CancelToken,
        ctx: &BuildCtx,
    ) -> PyResult<weft::Result<weft::Neighbors>> {
        let (b, q) = (arrays::view(b, br, bd)?, arrays::view(q, qr, qd)?);
        cancellable(py, token, || {
            weft::exact::exact_search(b, q, metric, k, ctx)
        })
    }
    use arrays::Matrix as M;
    let (br, bd, qr, qd) = (base.rows, base.dim, queries.rows, queries.dim);
    match (&base.matrix, &queries.matrix) {
        (M::F32(b), M::F32(q)) => one(py, (b, br, bd), (q, qr, qd), metric, k, token, ctx),
        (M::F16(b), M::F16(q)) => one(py, (b, br, bd), (q, qr, qd), metric, k, token, ctx),
        (M::U8(b), M::U8(q)) => one(py, (b, br, bd), (q, qr, qd), metric, k, token, ctx),
        (M::I8(b), M::I8(q)) => one(py, (b, br, bd), (q, qr, qd), metric, k, token, ctx),
        _ => Err(pyo3::exceptions::PyTypeError::new_err(
            "base vectors and queries must have the same element type",
        )),
    }
}

/// The element type of an input.
fn base_dtype(input: &arrays::Input<'_>) -> weft::DType {
    match input.matrix {
        arrays::Matrix::F32(_) => weft::DType::F32,
        arrays::Matrix::F16(_) => weft::DType::F16,
        arrays::Matrix::U8(_) => weft::DType::U8,
        arrays::Matrix::I8(_) => weft::DType::I8,
    }
}

/// The algorithms of this build, each with its back end, what it builds, a description and
/// its default parameters.
#[pyfunction]
pub(crate) fn algorithms<'py>(py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
    let registry = Registry::with_gpu(py.detach(GpuStatus::probe));
    let list = PyList::empty(py);
    for info in registry.list() {
        let d = PyDict::new(py);
        d.set_item("name", info.name)?;
        d.set_item("backend", info.backend.name())?;
        d.set_item(
            "produces",
            match info.produces {
                weft::Produces::KnnGraph => "knn_graph",
                weft::Produces::SearchGraph => "search_graph",
            },
        )?;
        d.set_item("description", info.description)?;
        d.set_item("default_params", convert::to_py(py, &info.default_params)?)?;
        list.append(d)?;
    }
    Ok(list)
}

/// Whether a GPU is usable, and which (device, memory, driver), or why not: the default device,
/// or CUDA device `device`.
#[pyfunction]
#[pyo3(signature = (device = None))]
pub(crate) fn gpu_info<'py>(py: Python<'py>, device: Option<usize>) -> PyResult<Bound<'py, PyAny>> {
    let status = py.detach(|| GpuStatus::probe_device_or_default(device));
    convert::to_py(py, &status.describe())
}

/// The address of the buffer that weft reads for `array` (a testing aid: equal to
/// `array.ctypes.data` when the array is used in place, without a copy).
#[pyfunction]
pub(crate) fn _input_address(array: &Bound<'_, PyAny>) -> PyResult<usize> {
    let input = input(array, None, "the array")?;
    with_input!(input, |view| Ok(view
        .as_contiguous()
        .map_or(0, |s| s.as_ptr() as usize)))
}
