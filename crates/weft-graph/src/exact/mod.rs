//! Exact k-nearest-neighbour search and exact k-NN graphs on the CPU (brute force).
//!
//! Results are ascending by `(distance, id)`: ties are broken by the smaller id, so the output is
//! deterministic and independent of the thread count.

use rayon::prelude::*;
use weft_core::error::{check_graph_k, check_k};
use weft_core::{
    BuildCtx, DatasetView, Element, Error, INVALID, KnnGraph, KnnGraphBuilder, Metric, Neighbors,
    NoParams, NodeId, Result,
};

/// Queries per parallel work item.
const QUERY_BLOCK: usize = 64;

/// Whether `(da, ia)` comes before `(db, ib)`.
#[inline]
fn before(da: f32, ia: NodeId, db: f32, ib: NodeId) -> bool {
    da < db || (da == db && ia < ib)
}

fn check_rows(n: usize) -> Result<()> {
    if n > weft_core::MAX_NODES {
        return Err(Error::InvalidInput(format!(
            "{n} vectors exceed the largest indexable count {}",
            weft_core::MAX_NODES
        )));
    }
    Ok(())
}

/// The `k` nearest rows of `base` to `query`, skipping row `exclude`, written ascending.
fn scan_one<T: Element>(
    base: DatasetView<'_, T>,
    dist: &weft_core::distance::DistanceFn<T>,
    query: &[T],
    exclude: NodeId,
    ids: &mut [NodeId],
    dists: &mut [f32],
) {
    let k = ids.len();
    let mut best: Vec<(f32, NodeId)> = Vec::with_capacity(k + 1);
    for (i, row) in base.iter().enumerate() {
        let id = i as NodeId;
        if id == exclude {
            continue;
        }
        let d = dist.eval(query, row) + 0.0;
        if best.len() == k {
            let (ld, li) = best[k - 1];
            if !before(d, id, ld, li) {
                continue;
            }
            best.pop();
        }
        let pos = best.partition_point(|&(bd, bi)| before(bd, bi, d, id));
        best.insert(pos, (d, id));
    }
    for (j, (d, id)) in best.into_iter().enumerate() {
        ids[j] = id;
        dists[j] = d;
    }
}

/// The core: for each query `q` (a row of `queries`), the `k` nearest rows of `base`, skipping
/// `exclude(q)`.
fn run<'a, T: Element>(
    base: DatasetView<'_, T>,
    queries: &(dyn Fn(usize) -> &'a [T] + Sync),
    nq: usize,
    exclude: &(dyn Fn(usize) -> NodeId + Sync),
    metric: Metric,
    k: usize,
    ctx: &BuildCtx,
) -> Result<Neighbors> {
    let mut out = Neighbors::new(nq, k);
    let dist = metric.distance_fn::<T>();
    ctx.progress().begin("exact k-NN", Some(nq as u64));
    let res = ctx.install(|| {
        out.ids
            .par_chunks_mut(QUERY_BLOCK * k)
            .zip(out.dists.par_chunks_mut(QUERY_BLOCK * k))
            .enumerate()
            .try_for_each(|(b, (ids, dists))| -> Result<()> {
                ctx.check_cancelled()?;
                let q0 = b * QUERY_BLOCK;
                let len = ids.len() / k;
                for (j, (ids, dists)) in ids.chunks_mut(k).zip(dists.chunks_mut(k)).enumerate() {
                    scan_one(base, &dist, queries(q0 + j), exclude(q0 + j), ids, dists);
                }
                ctx.progress().advance(len as u64);
                Ok(())
            })
    })?;
    ctx.progress().end();
    res?;
    Ok(out)
}

/// The `k` nearest rows of `base` for every row of `queries`, ascending by `(distance, id)`.
///
/// Fails on empty sets, `k == 0`, `k > base.rows()`, and when the dimensions differ
/// ([`Error::DimensionMismatch`]); returns [`Error::Cancelled`] when `ctx` is cancelled.
pub fn exact_search<T: Element>(
    base: DatasetView<'_, T>,
    queries: DatasetView<'_, T>,
    metric: Metric,
    k: usize,
    ctx: &BuildCtx,
) -> Result<Neighbors> {
    if base.is_empty() {
        return Err(Error::InvalidInput("the base set is empty".into()));
    }
    if queries.is_empty() {
        return Err(Error::InvalidInput("the query set is empty".into()));
    }
    base.check_same_dim(&queries, "base vs queries")?;
    check_rows(base.rows())?;
    check_k(k, base.rows())?;
    base.check_finite()?;
    queries.check_finite()?;
    run(
        base,
        &|q| queries.row(q),
        queries.rows(),
        &|_| INVALID,
        metric,
        k,
        ctx,
    )
}

/// The exact k-NN graph of `data`: row `v` holds the `k` nearest other points of `v`, ascending
/// by `(distance, id)`. Requires `1 <= k < data.rows()`.
pub fn exact_knn_graph<T: Element>(
    data: DatasetView<'_, T>,
    metric: Metric,
    k: usize,
    ctx: &BuildCtx,
) -> Result<KnnGraph> {
    check_rows(data.rows())?;
    check_graph_k(k, data.rows())?;
    data.check_finite()?;
    let nb = run(
        data,
        &|q| data.row(q),
        data.rows(),
        &|q| q as NodeId,
        metric,
        k,
        ctx,
    )?;
    KnnGraph::from_parts(data.rows(), k, nb.ids, nb.dists)
}

/// The `k` nearest other points of each listed row of `data` (`rows.len() x k`, each row
/// excluding its own point), ascending by `(distance, id)`. Requires `1 <= k < data.rows()` and
/// every row in range.
pub fn exact_neighbors_of<T: Element>(
    data: DatasetView<'_, T>,
    metric: Metric,
    rows: &[NodeId],
    k: usize,
    ctx: &BuildCtx,
) -> Result<Neighbors> {
    check_rows(data.rows())?;
    check_graph_k(k, data.rows())?;
    if rows.is_empty() {
        return Err(Error::InvalidInput("no rows were requested".into()));
    }
    if let Some(&r) = rows.iter().find(|&&r| r as usize >= data.rows()) {
        return Err(Error::InvalidInput(format!(
            "row {r} is out of range (n = {})",
            data.rows()
        )));
    }
    data.check_finite()?;
    run(
        data,
        &|q| data.row(rows[q] as usize),
        rows.len(),
        &|q| rows[q],
        metric,
        k,
        ctx,
    )
}

/// Exact brute-force k-NN graph construction, as a [`KnnGraphBuilder`] named `exact`.
#[derive(Clone, Copy, Debug, Default)]
pub struct ExactKnn;

impl KnnGraphBuilder for ExactKnn {
    type Params = NoParams;

    fn name(&self) -> &'static str {
        "exact"
    }

    fn build<T: Element>(
        &self,
        data: DatasetView<'_, T>,
        metric: Metric,
        k: usize,
        _params: &NoParams,
        ctx: &BuildCtx,
    ) -> Result<KnnGraph> {
        exact_knn_graph(data, metric, k, ctx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tiny_line() {
        let d = [0.0f32, 1.0, 3.0, 7.0];
        let v = DatasetView::new(&d, 4, 1).unwrap();
        let g = exact_knn_graph(v, Metric::L2Squared, 2, &BuildCtx::default()).unwrap();
        assert_eq!(g.row_ids(0), &[1, 2]);
        assert_eq!(g.row_ids(3), &[2, 1]);
        assert_eq!(g.row_dists(3), &[16.0, 36.0]);
        let q = [2.0f32];
        let qv = DatasetView::new(&q, 1, 1).unwrap();
        let r = exact_search(v, qv, Metric::L2Squared, 3, &BuildCtx::default()).unwrap();
        assert_eq!(r.row_ids(0), &[1, 2, 0]);
    }
}
