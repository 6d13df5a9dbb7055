//! Search results.

use std::ops::Range;

use ndarray::{Array2, ArrayView2};
use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use crate::{Error, INVALID, NodeId, Result};

/// Owned search results: `rows` queries x `k` neighbours, ascending by distance, padded with
/// [`INVALID`] / `f32::INFINITY` when fewer were found.
#[derive(Clone, Debug, PartialEq)]
pub struct Neighbors {
    rows: usize,
    k: usize,
    /// Ids, row-major.
    pub ids: Vec<NodeId>,
    /// Distances, row-major.
    pub dists: Vec<f32>,
}

impl Neighbors {
    /// `rows x k` results, all padding.
    pub fn new(rows: usize, k: usize) -> Self {
        Neighbors {
            rows,
            k,
            ids: vec![INVALID; rows * k],
            dists: vec![f32::INFINITY; rows * k],
        }
    }

    /// Number of queries.
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Neighbours per query.
    pub fn k(&self) -> usize {
        self.k
    }

    /// Query `q`'s ids.
    pub fn row_ids(&self, q: usize) -> &[NodeId] {
        &self.ids[q * self.k..(q + 1) * self.k]
    }

    /// Query `q`'s distances.
    pub fn row_dists(&self, q: usize) -> &[f32] {
        &self.dists[q * self.k..(q + 1) * self.k]
    }

    /// The mutable view searches write into.
    pub fn as_mut(&mut self) -> NeighborsMut<'_> {
        NeighborsMut {
            ids: &mut self.ids,
            dists: &mut self.dists,
            k: self.k,
        }
    }

    /// The ids as a `rows x k` array view (row `q`: query `q`'s neighbours, nearest first).
    ///
    /// # Panics
    /// If [`Neighbors::ids`] was resized to other than `rows * k` entries through the public
    /// field.
    pub fn ids_view(&self) -> ArrayView2<'_, NodeId> {
        ArrayView2::from_shape((self.rows, self.k), &self.ids)
            .expect("Neighbors::ids holds rows * k entries")
    }

    /// The distances as a `rows x k` array view, ascending along each row.
    ///
    /// # Panics
    /// If [`Neighbors::dists`] was resized to other than `rows * k` entries through the public
    /// field.
    pub fn distances_view(&self) -> ArrayView2<'_, f32> {
        ArrayView2::from_shape((self.rows, self.k), &self.dists)
            .expect("Neighbors::dists holds rows * k entries")
    }

    /// The ids and the distances as owned `rows x k` arrays (no copy).
    pub fn into_arrays(self) -> Result<(Array2<NodeId>, Array2<f32>)> {
        let shape = (self.rows, self.k);
        let (ids, dists) = (self.ids.len(), self.dists.len());
        let bad =
            |found| Error::dim_mismatch("search results vs rows x k", shape.0 * shape.1, found);
        Ok((
            Array2::from_shape_vec(shape, self.ids).map_err(|_| bad(ids))?,
            Array2::from_shape_vec(shape, self.dists).map_err(|_| bad(dists))?,
        ))
    }
}

/// Caller-provided output buffers for a search: `ids.len() == dists.len() == queries * k`.
#[derive(Debug)]
pub struct NeighborsMut<'a> {
    ids: &'a mut [NodeId],
    dists: &'a mut [f32],
    k: usize,
}

impl<'a> NeighborsMut<'a> {
    /// Wraps two buffers of equal length, a multiple of `k >= 1`.
    pub fn new(ids: &'a mut [NodeId], dists: &'a mut [f32], k: usize) -> Result<Self> {
        if k == 0 {
            return Err(Error::invalid_param("k", "k must be at least 1"));
        }
        if ids.len() != dists.len() || !ids.len().is_multiple_of(k) {
            return Err(Error::InvalidInput(format!(
                "output buffers of {} ids and {} distances do not hold whole rows of k = {k}",
                ids.len(),
                dists.len()
            )));
        }
        Ok(NeighborsMut { ids, dists, k })
    }

    /// Number of query rows.
    pub fn rows(&self) -> usize {
        self.ids.len() / self.k
    }

    /// Neighbours per query.
    pub fn k(&self) -> usize {
        self.k
    }

    /// The whole id and distance buffers, row-major (`rows() * k()` each).
    pub fn buffers_mut(&mut self) -> (&mut [NodeId], &mut [f32]) {
        (self.ids, self.dists)
    }

    /// Row `q`'s buffers.
    pub fn row_mut(&mut self, q: usize) -> (&mut [NodeId], &mut [f32]) {
        let r = q * self.k..(q + 1) * self.k;
        (&mut self.ids[r.clone()], &mut self.dists[r])
    }

    /// The same buffers, borrowed again for a shorter time (to hand to one search after another).
    pub fn reborrow(&mut self) -> NeighborsMut<'_> {
        NeighborsMut {
            ids: self.ids,
            dists: self.dists,
            k: self.k,
        }
    }

    /// The buffers of query rows `rows` only (row 0 of the result is row `rows.start` here).
    ///
    /// # Panics
    /// If `rows` reaches past [`NeighborsMut::rows`], as slice indexing does.
    pub fn rows_mut(&mut self, rows: Range<usize>) -> NeighborsMut<'_> {
        let r = rows.start * self.k..rows.end * self.k;
        NeighborsMut {
            ids: &mut self.ids[r.clone()],
            dists: &mut self.dists[r],
            k: self.k,
        }
    }

    /// Splits the buffers into rows `..row` and rows `row..` (to hand to two searches that run
    /// at the same time).
    ///
    /// # Panics
    /// If `row` is past [`NeighborsMut::rows`], as `split_at_mut` does.
    pub fn split_at_row(self, row: usize) -> (NeighborsMut<'a>, NeighborsMut<'a>) {
        let at = row * self.k;
        let (ids_a, ids_b) = self.ids.split_at_mut(at);
        let (dists_a, dists_b) = self.dists.split_at_mut(at);
        (
            NeighborsMut {
                ids: ids_a,
                dists: dists_a,
                k: self.k,
            },
            NeighborsMut {
                ids: ids_b,
                dists: dists_b,
                k: self.k,
            },
        )
    }

    /// Copies `src` into these buffers; `src` must have the same rows and `k`.
    pub fn copy_from(&mut self, src: &Neighbors) -> Result<()> {
        if src.k() != self.k {
            return Err(Error::dim_mismatch(
                "neighbours per row (k) of the results vs the output buffers",
                self.k,
                src.k(),
            ));
        }
        if src.rows() != self.rows()
            || src.ids.len() != self.ids.len()
            || src.dists.len() != self.dists.len()
        {
            return Err(Error::dim_mismatch(
                "rows of the results vs the output buffers",
                self.rows(),
                src.rows(),
            ));
        }
        self.ids.copy_from_slice(&src.ids);
        self.dists.copy_from_slice(&src.dists);
        Ok(())
    }

    /// Rows in parallel: `(query index, ids, dists)`.
    pub fn par_rows_mut(
        &mut self,
    ) -> impl IndexedParallelIterator<Item = (usize, (&mut [NodeId], &mut [f32]))> + '_ {
        let k = self.k;
        self.ids
            .par_chunks_mut(k)
            .zip(self.dists.par_chunks_mut(k))
            .enumerate()
    }
}

/// What a search did, for reports and tuning.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SearchStats {
    /// Queries answered.
    pub queries: u64,
    /// Distance evaluations.
    pub distance_computations: u64,
    /// Vertices expanded (graph searches).
    pub hops: u64,
}

impl SearchStats {
    /// Adds `other`'s counts to these.
    pub fn merge(&mut self, other: &SearchStats) {
        self.queries += other.queries;
        self.distance_computations += other.distance_computations;
        self.hops += other.hops;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn views_rows_and_copies_keep_the_shape() {
        let mut a = Neighbors::new(3, 2);
        a.ids.copy_from_slice(&[0, 1, 2, 3, 4, 5]);
        a.dists.copy_from_slice(&[0.0, 1.0, 2.0, 3.0, 4.0, 5.0]);
        assert_eq!(a.ids_view().dim(), (3, 2));
        assert_eq!(a.ids_view()[[2, 1]], 5);
        assert_eq!(a.distances_view()[[1, 0]], 2.0);

        let mut b = Neighbors::new(3, 2);
        let mut out = b.as_mut();
        out.rows_mut(1..3)
            .copy_from(&{
                let mut tail = Neighbors::new(2, 2);
                tail.ids.copy_from_slice(&a.ids[2..]);
                tail.dists.copy_from_slice(&a.dists[2..]);
                tail
            })
            .unwrap();
        out.reborrow()
            .rows_mut(0..1)
            .row_mut(0)
            .0
            .copy_from_slice(&[0, 1]);
        assert!(matches!(
            out.copy_from(&Neighbors::new(3, 3)),
            Err(Error::DimensionMismatch { .. })
        ));
        assert!(matches!(
            out.copy_from(&Neighbors::new(2, 2)),
            Err(Error::DimensionMismatch { .. })
        ));
        assert_eq!(b.ids, a.ids);
        assert_eq!(&b.dists[2..], &a.dists[2..]);

        let (ids, dists) = a.clone().into_arrays().unwrap();
        assert_eq!(ids, a.ids_view());
        assert_eq!(dists, a.distances_view());
    }

    #[test]
    fn split_rows_cover_the_buffers_once() {
        let mut a = Neighbors::new(3, 2);
        for at in 0..=3 {
            let (mut head, mut tail) = a.as_mut().split_at_row(at);
            assert_eq!((head.rows(), tail.rows(), tail.k()), (at, 3 - at, 2));
            for q in 0..head.rows() {
                head.row_mut(q).0.fill(q as NodeId);
            }
            for q in 0..tail.rows() {
                tail.row_mut(q).0.fill((at + q) as NodeId);
            }
            assert_eq!(a.ids, [0, 0, 1, 1, 2, 2]);
            a.ids.fill(9);
        }
    }
}
