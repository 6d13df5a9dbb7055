//! A benchmark aid: the Rust call timed inside the extension, for the overhead figures of
//! `examples/overhead_benchmark.py` (docs/benchmarks.md).

use std::time::Instant;

use pyo3::prelude::*;
use weft::SearchParams;

use crate::arrays::{input, with_input};
use crate::errors::err;
use crate::index::PyIndex;

/// Times `calls` calls of `weft::Index::search` (the facade's Rust call, results allocated by
/// the library) on `queries` with the parameters `Index.search(queries, k, beam_width=beam)` uses,
/// with the GIL released, and returns the seconds of each call. The search results are dropped.
/// `with_cancel`: with a cancel token in the parameters, as the Python search passes one to
/// long searches (the library then searches in batches of `CANCEL_CHECK_ROWS` queries).
#[pyfunction]
#[pyo3(signature = (index, queries, k, beam_width, calls, with_cancel = false))]
pub(crate) fn _rust_search_seconds(
    py: Python<'_>,
    index: &Bound<'_, PyIndex>,
    queries: &Bound<'_, PyAny>,
    k: usize,
    beam_width: usize,
    calls: usize,
    with_cancel: bool,
) -> PyResult<Vec<f64>> {
    let index = index.get().inner();
    let queries = input(queries, Some(index.data().dtype()), "queries")?;
    let mut params = SearchParams::with_beam_width(beam_width);
    if with_cancel {
        params = params.with_cancel(weft::CancelToken::new());
    }
    with_input!(queries, |view| py.detach(|| {
        let mut seconds = Vec::with_capacity(calls);
        for _ in 0..calls {
            let start = Instant::now();
            let found = index.search(view, k, &params)?;
            seconds.push(start.elapsed().as_secs_f64());
            std::hint::black_box(found);
        }
        Ok(seconds)
    }))
    .map_err(err)
}
