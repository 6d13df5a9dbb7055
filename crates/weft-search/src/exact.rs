//! Exact search as a [`Searcher`].

use weft_core::{
    BuildCtx, DatasetView, Element, Error, Metric, NeighborsMut, NoParams, Result, SearchStats,
    Searcher,
};

use crate::copy::copy_results;

/// Brute-force search (name `exact`): ignores the graph and scans every base vector through
/// [`weft_graph::exact::exact_search`]. The reference every graph search is measured against,
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
        let found = weft_graph::exact::exact_search(data, queries, metric, k, &BuildCtx::new(0))?;
        copy_results(&found, &mut out);
        Ok(SearchStats {
            queries: queries.rows() as u64,
            distance_computations: (queries.rows() * data.rows()) as u64,
            hops: 0,
        })
    }
}
