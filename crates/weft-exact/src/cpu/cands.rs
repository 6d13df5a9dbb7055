//! The candidates of one query: approximate values filtered against a window, plus a top-k of
//! exactly evaluated ones.
//!
//! Approximate values `v` live in "row space": the approximate distance minus the query's row
//! term, each within `e` of the exact distance minus that term. Let `A` be the k-th smallest `v`
//! kept so far. The k pairs at or below `A` have exact distances at most `A + e` (plus the row
//! term), so a pair with `v > A + 2e` has an exact distance above `A + e`, beaten by k others: it
//! cannot be in the top k and is dropped. Whatever survives is evaluated exactly at the end, so
//! the result is the exact top k by `(distance, id)`.

use weft_core::NodeId;

use super::topk::TopK;

/// Unit round-off of `f32`.
pub(super) const U: f32 = f32::EPSILON / 2.0;

/// The parameters of one query row for the current superblock.
#[derive(Clone, Copy, Debug)]
pub(crate) struct RowParams {
    /// The row term added to row-space values to give approximate distances.
    pub(crate) row_add: f32,
    /// A bound on `|approximate - exact|` for every candidate met so far.
    pub(crate) err: f32,
    /// The row bypasses the filter: every candidate is evaluated exactly.
    pub(crate) forced: bool,
}

/// One query's candidates.
#[derive(Clone, Debug)]
pub(crate) struct Cands {
    /// `(row-space value, id)` of candidates not yet evaluated exactly.
    approx: Vec<(f32, NodeId)>,
    /// The bound from `approx`: `A + 2e` after a compaction, `+inf` before.
    tau: f32,
    /// Candidates evaluated exactly (bypassing vectors, NaN values, ties spilled by compaction).
    exact: Option<TopK>,
}

impl Cands {
    /// No candidates.
    pub(crate) fn new() -> Self {
        Cands {
            approx: Vec::new(),
            tau: f32::INFINITY,
            exact: None,
        }
    }

    /// The row-space value a new approximate candidate must not exceed.
    #[inline]
    pub(crate) fn bound(&self, row: &RowParams) -> f32 {
        if row.forced {
            return f32::INFINITY;
        }
        let from_exact = match &self.exact {
            Some(t) => {
                let d = t.threshold();
                if d.is_finite() {
                    // Beaten by the k exact ones when its exact distance exceeds `d`; the last
                    // term covers the rounding of the subtraction.
                    (d - row.row_add) + row.err + 4.0 * U * (d.abs() + row.row_add.abs())
                } else {
                    f32::INFINITY
                }
            }
            None => f32::INFINITY,
        };
        self.tau.min(from_exact)
    }

    /// Adds an exactly evaluated candidate (`d` is the exact distance).
    #[inline]
    pub(crate) fn push_exact(&mut self, d: f32, id: NodeId, k: usize) {
        self.exact.get_or_insert_with(|| TopK::new(k)).push(d, id);
    }

    /// Adds an approximate candidate; compacts when the list reaches `cap`.
    #[inline]
    pub(crate) fn push_approx(
        &mut self,
        v: f32,
        id: NodeId,
        k: usize,
        cap: usize,
        row: &RowParams,
        exact: &dyn Fn(NodeId) -> f32,
    ) {
        self.approx.push((v, id));
        if self.approx.len() >= cap {
            self.compact(k, cap, row, exact);
        }
    }

    /// Drops the approximate candidates that cannot be in the top k. When near-ties keep too many
    /// (more than `3/4` of `cap`), evaluates them exactly and keeps the best k.
    pub(crate) fn compact(
        &mut self,
        k: usize,
        cap: usize,
        row: &RowParams,
        exact: &dyn Fn(NodeId) -> f32,
    ) {
        if self.approx.len() <= k {
            return;
        }
        // Only the k-th value matters (not which of several equal pairs sits there).
        let (_, &mut (a, _), _) = self
            .approx
            .select_nth_unstable_by(k - 1, |x, y| x.0.total_cmp(&y.0));
        let tau = a + 2.0 * row.err;
        self.approx.retain(|&(v, _)| v <= tau);
        self.tau = tau;
        if self.approx.len() * 4 > cap * 3 {
            let t = self.exact.get_or_insert_with(|| TopK::new(k));
            for &(_, id) in &self.approx {
                t.push(exact(id), id);
            }
            self.approx.clear();
            self.tau = f32::INFINITY;
        }
    }

    /// Compacts without spilling and releases the spare capacity (between superblocks).
    pub(crate) fn settle(&mut self, k: usize, row: &RowParams, exact: &dyn Fn(NodeId) -> f32) {
        self.compact(k, usize::MAX / 4, row, exact);
        self.approx.shrink_to_fit();
    }

    /// Appends the final candidates, exactly evaluated, to `out`.
    pub(crate) fn finish(
        &mut self,
        k: usize,
        row: &RowParams,
        exact: &dyn Fn(NodeId) -> f32,
        out: &mut Vec<(f32, NodeId)>,
    ) {
        self.compact(k, usize::MAX / 4, row, exact);
        out.extend(self.approx.iter().map(|&(_, id)| (exact(id), id)));
        if let Some(t) = &self.exact {
            out.extend_from_slice(t.items());
        }
    }
}
