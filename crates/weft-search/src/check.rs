//! The input checks every graph search makes before any work.

use weft_core::error::check_k;
use weft_core::{DatasetView, Element, Error, GraphView, NeighborsMut, Result};

/// Checks a graph search's inputs and returns `k`: a non-empty base set, then
/// `validate_params(rows, dim)`, then the query dimension, the graph's vertex count against the
/// data, the output shape, `k` against the data, and the graph's entry points.
pub(crate) fn check_search_inputs<G: GraphView + ?Sized, T: Element>(
    graph: &G,
    data: DatasetView<'_, T>,
    queries: DatasetView<'_, T>,
    out: &NeighborsMut<'_>,
    validate_params: impl FnOnce(usize, usize) -> Result<()>,
) -> Result<usize> {
    let n = data.rows();
    if n == 0 {
        return Err(Error::InvalidInput("cannot search an empty set".into()));
    }
    validate_params(n, data.dim())?;
    data.check_same_dim(&queries, "base vs query dimension")?;
    if graph.num_nodes() != n {
        return Err(Error::dim_mismatch(
            "graph vertices vs data rows",
            n,
            graph.num_nodes(),
        ));
    }
    if out.rows() != queries.rows() {
        return Err(Error::dim_mismatch(
            "output rows vs queries",
            queries.rows(),
            out.rows(),
        ));
    }
    let k = out.k();
    check_k(k, n)?;
    if let Some(&e) = graph.entry_points().iter().find(|&&e| e as usize >= n) {
        return Err(Error::InvalidGraph(format!(
            "entry point {e} is out of range (n = {n})"
        )));
    }
    Ok(k)
}
