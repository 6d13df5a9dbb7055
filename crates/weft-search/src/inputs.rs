//! The sets a search on the host reads, borrowed together ([`SearchInputs`]).

use weft_core::{DatasetView, Element};

/// What a search on the host reads: the graph it walks, the data rows its vertices stand for
/// (one vertex per row) and the queries (of the data's dimension).
pub struct SearchInputs<'a, G: ?Sized, T> {
    /// The graph.
    pub graph: &'a G,
    /// The data rows.
    pub data: DatasetView<'a, T>,
    /// The queries.
    pub queries: DatasetView<'a, T>,
}

impl<G: ?Sized, T> Clone for SearchInputs<'_, G, T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<G: ?Sized, T> Copy for SearchInputs<'_, G, T> {}

impl<G: ?Sized, T: Element> std::fmt::Debug for SearchInputs<'_, G, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SearchInputs")
            .field("data", &self.data)
            .field("queries", &self.queries)
            .finish_non_exhaustive()
    }
}
