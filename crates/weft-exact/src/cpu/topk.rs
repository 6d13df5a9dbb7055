//! A bounded top-k of `(distance, id)` pairs: a binary max-heap ordered by `(distance, id)`.

use weft_core::NodeId;

/// Whether `(da, ia)` comes before `(db, ib)`: smaller distance first, then smaller id.
#[inline]
pub(crate) fn before(da: f32, ia: NodeId, db: f32, ib: NodeId) -> bool {
    da < db || (da == db && ia < ib)
}

/// The `k` smallest `(distance, id)` pairs pushed so far. Distances must not be NaN.
#[derive(Clone, Debug)]
pub(crate) struct TopK {
    k: usize,
    /// A max-heap: `items[0]` is the worst kept pair.
    items: Vec<(f32, NodeId)>,
}

impl TopK {
    /// An empty top-`k` (`k >= 1`).
    pub(crate) fn new(k: usize) -> Self {
        TopK {
            k,
            items: Vec::with_capacity(k),
        }
    }

    /// The distance a new pair must not exceed to enter: the worst kept distance once full,
    /// `+inf` before.
    #[inline]
    pub(crate) fn threshold(&self) -> f32 {
        if self.items.len() < self.k {
            f32::INFINITY
        } else {
            self.items[0].0
        }
    }

    /// Offers a pair; keeps it when it is among the `k` best so far.
    #[inline]
    pub(crate) fn push(&mut self, d: f32, id: NodeId) {
        let items = &mut self.items;
        if items.len() < self.k {
            items.push((d, id));
            // Sift up.
            let mut c = items.len() - 1;
            while c > 0 {
                let p = (c - 1) / 2;
                if before(items[p].0, items[p].1, d, id) {
                    items.swap(p, c);
                    c = p;
                } else {
                    break;
                }
            }
            return;
        }
        let (td, ti) = items[0];
        if !before(d, id, td, ti) {
            return;
        }
        // Replace the root and sift down.
        let n = items.len();
        let mut p = 0;
        loop {
            let l = 2 * p + 1;
            if l >= n {
                break;
            }
            let r = l + 1;
            let mut c = l;
            if r < n && before(items[l].0, items[l].1, items[r].0, items[r].1) {
                c = r;
            }
            if before(d, id, items[c].0, items[c].1) {
                items[p] = items[c];
                p = c;
            } else {
                break;
            }
        }
        items[p] = (d, id);
    }

    /// The kept pairs, in no particular order.
    pub(crate) fn items(&self) -> &[(f32, NodeId)] {
        &self.items
    }
}

/// Sorts pairs ascending by `(distance, id)`.
pub(crate) fn sort_pairs(pairs: &mut [(f32, NodeId)]) {
    pairs.sort_unstable_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
}
