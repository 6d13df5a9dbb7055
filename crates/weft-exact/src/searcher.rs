//! Exact search as a [`Searcher`]: [`ExactSearcher`].

use weft_core::{
    BuildCtx, DatasetView, Element, Error, Metric, Neighbors, NeighborsMut, NoParams, Result,
    SearchStats, Searcher,
};

use crate::cpu::exact_search;

/// Brute-force search (name `exact`): ignores the graph and scans every base vector through
/// [`exact_search`]. The reference every graph search is measured against,
/// usable wherever a [`Searcher`] is expected.
#[derive(Clone, Copy, Debug, Default)]
pub struct ExactSearcher;

impl<G: ?Sized> Searcher<G> for ExactSearcher {
    type Params = NoParams;

    fn name(&self) -> &'static str {
        "exact"
    }

    fn search<T: Element>(
        &self,
        _graph: &G,
        data: DatasetView<'_, T>,
        queries: DatasetView<'_, T>,
        metric: Metric,
        _params: &NoParams,
        mut out: NeighborsMut<'_>,
    ) -> Result<SearchStats> {
        if out.rows() != queries.rows() {
            return Err(Error::dim_mismatch(
                "output rows vs queries",
                queries.rows(),
                out.rows(),
            ));
        }
        let k = out.k();
        if queries.rows() == 0 {
            // Nothing to answer; still reject what would be wrong for a real query.
            data.check_same_dim(&queries, "base vs query dimension")?;
            weft_core::error::check_k(k, data.rows())?;
            return Ok(SearchStats::default());
        }
        let found = exact_search(data, queries, metric, k, &BuildCtx::new(0))?;
        copy_results(&found, &mut out);
        Ok(SearchStats {
            queries: queries.rows() as u64,
            distance_computations: (queries.rows() * data.rows()) as u64,
            hops: 0,
        })
    }
}

/// Copies the first `out.rows()` rows of `found` (ids and distances, `out.k()` per row) into
/// `out`.
fn copy_results(found: &Neighbors, out: &mut NeighborsMut<'_>) {
    for q in 0..out.rows() {
        let (ids, dists) = out.row_mut(q);
        ids.copy_from_slice(found.row_ids(q));
        dists.copy_from_slice(found.row_dists(q));
    }
}
