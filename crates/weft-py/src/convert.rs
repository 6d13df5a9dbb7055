//! Small conversions between Python values and the library's: JSON parameters, names of
//! metrics and back ends, results as numpy arrays.

use numpy::{PyArray1, PyArray2, PyArrayMethods};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyFloat, PyInt, PyList, PyString, PyTuple};
use serde_json::{Map, Number, Value};
use weft::{Backend, Error, Metric, Neighbors, NodeId};

use crate::errors::err;

/// A Python value as JSON: `None`, bools, ints, floats, strings, lists/tuples and dicts with
/// string keys; numpy scalars through their `.item()`.
pub(crate) fn to_json(obj: &Bound<'_, PyAny>) -> PyResult<Value> {
    if obj.is_none() {
        return Ok(Value::Null);
    }
    if let Ok(b) = obj.cast::<PyBool>() {
        return Ok(Value::Bool(b.is_true()));
    }
    if obj.is_instance_of::<PyInt>() {
        if let Ok(v) = obj.extract::<i64>() {
            return Ok(Value::from(v));
        }
        return Ok(Value::from(obj.extract::<u64>()?));
    }
    if let Ok(f) = obj.cast::<PyFloat>() {
        return Number::from_f64(f.value())
            .map(Value::Number)
            .ok_or_else(|| PyValueError::new_err(format!("{} has no JSON form", f.value())));
    }
    if let Ok(s) = obj.cast::<PyString>() {
        return Ok(Value::String(s.to_cow()?.into_owned()));
    }
    if obj.is_instance_of::<PyList>() || obj.is_instance_of::<PyTuple>() {
        return obj
            .try_iter()?
            .map(|item| to_json(&item?))
            .collect::<PyResult<Vec<_>>>()
            .map(Value::Array);
    }
    if let Ok(d) = obj.cast::<PyDict>() {
        let mut map = Map::new();
        for (k, v) in d.iter() {
            let key: String = k
                .extract()
                .map_err(|_| PyTypeError::new_err("parameter names must be strings"))?;
            map.insert(key, to_json(&v)?);
        }
        return Ok(Value::Object(map));
    }
    if obj.hasattr("item")? && obj.hasattr("dtype")? {
        return to_json(&obj.call_method0("item")?);
    }
    Err(PyTypeError::new_err(format!(
        "a parameter value must be None, a bool, a number, a string, a list or a dict, not {}",
        obj.get_type().name()?
    )))
}

/// JSON as a Python value (through the `json` module).
pub(crate) fn to_py<'py>(py: Python<'py>, value: &Value) -> PyResult<Bound<'py, PyAny>> {
    py.import("json")?
        .call_method1("loads", (value.to_string(),))
}

/// A metric by name (`l2`, `ip`, `cosine` and their aliases).
pub(crate) fn metric(name: &str) -> PyResult<Metric> {
    Metric::from_name(name).ok_or_else(|| {
        err(Error::invalid_param(
            "metric",
            format!("unknown metric `{name}` (l2, ip or cosine; also sqeuclidean, euclidean, inner_product, dot, angular)"),
        ))
    })
}

/// A back end by name (`auto`, `cpu`, `gpu`).
pub(crate) fn backend(name: &str) -> PyResult<Backend> {
    match name.to_ascii_lowercase().as_str() {
        "auto" => Ok(Backend::Auto),
        "cpu" => Ok(Backend::Cpu),
        "gpu" => Ok(Backend::Gpu),
        _ => Err(err(Error::invalid_param(
            "backend",
            format!("unknown backend `{name}` (auto, cpu or gpu)"),
        ))),
    }
}

/// The CUDA devices of `devices=`: a device number, a sequence of them, or `"all"` (every
/// visible device; `UnsupportedError` when none can be counted). Duplicates are left to the
/// search, which refuses them by name.
pub(crate) fn devices(value: &Bound<'_, PyAny>) -> PyResult<Vec<usize>> {
    if let Ok(name) = value.extract::<String>() {
        if name.eq_ignore_ascii_case("all") {
            let count = weft::GpuStatus::device_count().map_err(err)?;
            return Ok((0..count).collect());
        }
        return Err(PyValueError::new_err(format!(
            "devices must be a device number, a list of them or \"all\", not {name:?}"
        )));
    }
    if let Ok(one) = value.extract::<usize>() {
        return Ok(vec![one]);
    }
    value.extract::<Vec<usize>>().map_err(|_| {
        PyTypeError::new_err("devices must be a device number, a list of them or \"all\"")
    })
}

/// Search results as numpy arrays: `uint32` ids and `float32` distances, `rows x k`.
pub(crate) type Results<'py, D> = (
    Bound<'py, numpy::PyArray<NodeId, D>>,
    Bound<'py, numpy::PyArray<f32, D>>,
);

/// `rows x k` neighbours as a pair of numpy arrays (`uint32` ids, `float32` distances), moved,
/// not copied.
pub(crate) fn neighbors<'py>(
    py: Python<'py>,
    found: Neighbors,
) -> PyResult<Results<'py, numpy::Ix2>> {
    let (rows, k) = (found.rows(), found.k());
    let (ids, dists) = found.into_arrays().map_err(err)?;
    debug_assert_eq!(ids.dim(), (rows, k));
    Ok((
        PyArray2::from_owned_array(py, ids),
        PyArray2::from_owned_array(py, dists),
    ))
}

/// A flat vector as a `rows x cols` numpy array (moved, not copied).
pub(crate) fn matrix<'py, T: numpy::Element>(
    py: Python<'py>,
    values: Vec<T>,
    rows: usize,
    cols: usize,
) -> PyResult<Bound<'py, PyArray2<T>>> {
    PyArray1::from_vec(py, values).reshape([rows, cols])
}

/// A search filter from Python: a 1-D bool mask of length `n` (`True` = allowed) or a 1-D array
/// of allowed ids (any integer type, each in `0..n`; repeats allowed), anything `numpy.asarray`
/// turns into one. A mask of another length or an id out of range raises
/// `InvalidParamsError` (param `filter`); another dtype or shape raises `TypeError`.
pub(crate) fn filter(obj: &Bound<'_, PyAny>, n: usize) -> PyResult<weft::Filter> {
    let py = obj.py();
    let arr = py.import("numpy")?.call_method1("asarray", (obj,))?;
    let ndim: usize = arr.getattr("ndim")?.extract()?;
    if ndim != 1 {
        return Err(PyTypeError::new_err(format!(
            "filter: a 1-D bool mask or array of ids is expected, not {ndim}-D"
        )));
    }
    let kind: String = arr.getattr("dtype")?.getattr("kind")?.extract()?;
    match kind.as_str() {
        "b" => {
            let mask: Vec<bool> = arr.call_method0("tolist")?.extract()?;
            if mask.len() != n {
                return Err(err(Error::invalid_param(
                    "filter",
                    format!(
                        "a mask of {} entries for an index of {n} points",
                        mask.len()
                    ),
                )));
            }
            Ok(weft::Filter::from_mask(&mask))
        }
        "i" | "u" => {
            let ids: Vec<i128> = arr.call_method0("tolist")?.extract()?;
            let mut out = Vec::with_capacity(ids.len());
            for (pos, &id) in ids.iter().enumerate() {
                if id < 0 || id >= n as i128 {
                    return Err(err(Error::invalid_param(
                        "filter",
                        format!("id {id} (entry {pos}) is out of range (n = {n})"),
                    )));
                }
                out.push(id as NodeId);
            }
            weft::Filter::from_ids(n, &out).map_err(err)
        }
        _ => Err(PyTypeError::new_err(format!(
            "filter: a bool mask or an integer array of ids is expected, not dtype kind `{kind}`"
        ))),
    }
}
