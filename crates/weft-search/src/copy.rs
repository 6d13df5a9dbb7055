//! Writing a search's results into the caller's buffers.

use weft_core::{Neighbors, NeighborsMut};

/// Copies the first `out.rows()` rows of `found` (ids and distances, `out.k()` per row) into
/// `out`.
pub(crate) fn copy_results(found: &Neighbors, out: &mut NeighborsMut<'_>) {
    for q in 0..out.rows() {
        let (ids, dists) = out.row_mut(q);
        ids.copy_from_slice(found.row_ids(q));
        dists.copy_from_slice(found.row_dists(q));
    }
}
