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
            let made = io_error(py, &message, path, source);
            return made.unwrap_or_else(|_| PyRuntimeError::new_err(message));
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

/// The `OSError` of an [`Error::Io`]: `weft._errors._io_error` picks the class from the errno
/// (`FileNotFoundError` and the like, also `WeftIOError`s) and sets `errno`, `strerror` and
/// `filename`, so that the message reads `[Errno 2] No such file or directory: 'path'`.
fn io_error(
    py: Python<'_>,
    message: &str,
    path: &std::path::Path,
    source: &std::io::Error,
) -> PyResult<PyErr> {
    let module = ERRORS.get_or_try_init(py, || py.import("weft._errors").map(|m| m.unbind()))?;
    let kind = format!("{:?}", source.kind());
    let instance = module.bind(py).getattr("_io_error")?.call1((
        message,
        source.raw_os_error(),
        kind,
        path.display().to_string(),
    ))?;
    Ok(PyErr::from_value(instance))
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
