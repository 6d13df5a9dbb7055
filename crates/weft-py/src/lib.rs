//! # weft-py
//!
//! The `weft` Python package: the native module `weft._weft`, built by maturin (see
//! `pyproject.toml`) as an abi3 extension for CPython 3.9 and newer. The Python side
//! (`python/weft`) re-exports it with the exception classes and the type stubs.
//!
//! Arrays go in and out as numpy arrays: C-contiguous input of the right element type is read in
//! place, results are written straight into fresh numpy arrays, and builds and searches run with
//! the GIL released (long ones on a worker thread, so that Ctrl-C cancels them). Errors are the
//! library's, raised as the classes of `weft._errors`.

mod arrays;
mod bench;
mod convert;
mod errors;
mod index;
mod io;
mod progress;
mod run;
mod sharded;
mod state;

use pyo3::prelude::*;

/// The native module `weft._weft`.
#[pymodule]
fn _weft(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<index::PyIndex>()?;
    m.add_class::<sharded::PyShardedIndex>()?;
    m.add_function(wrap_pyfunction!(index::build, m)?)?;
    m.add_function(wrap_pyfunction!(index::load, m)?)?;
    m.add_function(wrap_pyfunction!(index::_index_from_state, m)?)?;
    m.add_function(wrap_pyfunction!(io::read, m)?)?;
    m.add_function(wrap_pyfunction!(io::write, m)?)?;
    m.add_function(wrap_pyfunction!(io::read_ids, m)?)?;
    m.add_function(wrap_pyfunction!(io::write_ids, m)?)?;
    m.add_function(wrap_pyfunction!(io::info, m)?)?;
    m.add_function(wrap_pyfunction!(io::ground_truth, m)?)?;
    m.add_function(wrap_pyfunction!(io::algorithms, m)?)?;
    m.add_function(wrap_pyfunction!(io::gpu_info, m)?)?;
    m.add_function(wrap_pyfunction!(io::_input_address, m)?)?;
    m.add_function(wrap_pyfunction!(bench::_rust_search_seconds, m)?)?;
    m.add("INVALID", weft::INVALID)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
