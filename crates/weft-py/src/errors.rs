//! weft's errors as Python exceptions: each [`weft::Error`] variant is raised as the class of
//! `weft._errors` that names it (all subclasses of `weft.WeftError` and of the matching built-in
//! exception), with the library's message.

use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::PyModule;
use weft::Error;

/// `weft._errors`, imported once.
static ERRORS: PyOnceLock<Py<PyModule>> = PyOnceLock::new();

/// The Python exception for `e` (takes the GIL to build it).
pub(crate) fn err(e: Error) -> PyErr {
    Python::attach(|py| to_py(py, e))
}

/// The Python exception for `e`.
fn to_py(py: Python<'_>, e: Error) -> PyErr {
    let message = e.to_string();
    let (class, attrs): (&str, Vec<(&str, Py<PyAny>)>) = match &e {
        Error::DimensionMismatch {
            expected, found, ..
        } => (
            "DimensionMismatchError",
            vec![
                ("expected", py_int(py, *expected)),
                ("found", py_int(py, *found)),
            ],
        ),
        Error::InvalidParams { name, .. } => {
            ("InvalidParamsError", vec![("param", py_str(py, name))])
        }
        Error::InvalidInput(_) => ("InvalidInputError", vec![]),
        Error::NonFinite { row, col, .. } => (
            "NonFiniteError",
            vec![("row", py_int(py, *row)), ("col", py_int(py, *col))],
        ),
        Error::InvalidGraph(_) => ("InvalidGraphError", vec![]),
        Error::Unsupported(_) => ("UnsupportedError", vec![]),
        Error::Cancelled => ("CancelledError", vec![]),
        Error::Io { path, source } => {
            let mut attrs = vec![("filename", py_str(py, &path.display().to_string()))];
            if let Some(code) = source.raw_os_error() {
                attrs.push(("errno", py_int(py, code as usize)));
            }
            ("WeftIOError", attrs)
        }
        Error::Format { path, .. } => (
            "FormatError",
            vec![("filename", py_str(py, &path.display().to_string()))],
        ),
        Error::OutOfDeviceMemory { .. } => ("OutOfDeviceMemoryError", vec![]),
        Error::Gpu(_) => ("GpuError", vec![]),
        _ => ("WeftError", vec![]),
    };
    match make(py, class, &message, attrs) {
        Ok(e) => e,
        // `weft._errors` missing (the extension imported outside its package): still raise.
        Err(_) => PyRuntimeError::new_err(message),
    }
}

/// An instance of `weft._errors.<class>(message)` with `attrs` set, as a `PyErr`.
fn make(
    py: Python<'_>,
    class: &str,
    message: &str,
    attrs: Vec<(&str, Py<PyAny>)>,
) -> PyResult<PyErr> {
    let module = ERRORS.get_or_try_init(py, || py.import("weft._errors").map(|m| m.unbind()))?;
    let instance = module.bind(py).getattr(class)?.call1((message,))?;
    for (name, value) in attrs {
        instance.setattr(name, value)?;
    }
    Ok(PyErr::from_value(instance))
}

fn py_int(py: Python<'_>, v: usize) -> Py<PyAny> {
    v.into_pyobject(py)
        .map(|o| o.into_any().unbind())
        .unwrap_or_else(|_| py.None())
}

fn py_str(py: Python<'_>, v: &str) -> Py<PyAny> {
    pyo3::types::PyString::new(py, v).into_any().unbind()
}
