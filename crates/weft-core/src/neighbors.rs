//! Search results.

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

    /// Row `q`'s buffers.
    pub fn row_mut(&mut self, q: usize) -> (&mut [NodeId], &mut [f32]) {
        let r = q * self.k..(q + 1) * self.k;
        (&mut self.ids[r.clone()], &mut self.dists[r])
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
