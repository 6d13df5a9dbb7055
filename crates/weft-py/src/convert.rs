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
