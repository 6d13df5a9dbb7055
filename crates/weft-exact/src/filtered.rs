//! Exact filtered search ([`exact_search_filtered`]), the ground truth of every filtered graph
//! search, and the bounded sorted lists it keeps per query ([`insert_bounded`], [`write_row`]),
//! which the CPU graph searches of weft-search keep too.

use rayon::prelude::*;
use weft_core::{
    DatasetView, Element, Error, Filter, INVALID, Metric, NeighborsMut, NodeId, Result, SearchStats,
};

/// Inserts `(d, id)` into `best`, sorted ascending by `(distance, id)` and holding at most `k`
/// entries (the caller never offers an id twice).
#[inline]
pub fn insert_bounded(best: &mut Vec<(f32, NodeId)>, k: usize, d: f32, id: NodeId) {
    if best.len() >= k {
        match best.last() {
            Some(&(wd, wi)) if d < wd || (d == wd && id < wi) => {
                best.pop();
            }
            _ => return,
        }
    }
    let pos = best.partition_point(|&(bd, bi)| bd < d || (bd == d && bi < id));
    best.insert(pos, (d, id));
}

/// Writes `best` into a result row, padded with [`INVALID`] / `+inf` past its end.
pub fn write_row(best: &[(f32, NodeId)], ids: &mut [NodeId], dists: &mut [f32]) {
    for (j, (id, dist)) in ids.iter_mut().zip(dists.iter_mut()).enumerate() {
        (*id, *dist) = best
            .get(j)
            .map_or((INVALID, f32::INFINITY), |&(d, i)| (i, d));
    }
}

/// Exact filtered search: for each query, the `out.k()` allowed points of `data` nearest to
/// it, ascending by `(distance, id)`, scanning only the ids `filter` allows; rows are padded
/// with [`INVALID`] / `+inf` when the filter allows fewer than `k` ids (an empty filter gives
/// padding only). The ground truth of every filtered graph search. Queries run in parallel on
/// the current rayon pool; the results do not depend on the thread count.
///
/// Errors: an empty base set, a dimension mismatch, `k` out of `1..=n`, an output whose row
/// count differs from the queries', or a filter over another number of ids than `data.rows()`.
pub fn exact_search_filtered<T: Element>(
    data: DatasetView<'_, T>,
    queries: DatasetView<'_, T>,
    metric: Metric,
    filter: &Filter,
    mut out: NeighborsMut<'_>,
) -> Result<SearchStats> {
    if data.rows() == 0 {
        return Err(Error::InvalidInput("cannot search an empty set".into()));
    }
    data.check_same_dim(&queries, "base vs query dimension")?;
    if out.rows() != queries.rows() {
        return Err(Error::dim_mismatch(
            "output rows vs queries",
            queries.rows(),
            out.rows(),
        ));
    }
    let k = out.k();
    weft_core::error::check_k(k, data.rows())?;
    filter.check_len(data.rows())?;
    let allowed: Vec<NodeId> = filter.ids().collect();
    let dist = metric.distance_fn::<T>();
    out.par_rows_mut()
        .with_min_len(4)
        .for_each_init(Vec::new, |best, (qi, (ids, dists))| {
            best.clear();
            let q = queries.row(qi);
            for &v in &allowed {
                insert_bounded(best, k, dist.eval(q, data.row(v as usize)), v);
            }
            write_row(best, ids, dists);
        });
    Ok(SearchStats {
        queries: queries.rows() as u64,
        distance_computations: (queries.rows() * allowed.len()) as u64,
        hops: 0,
    })
}
