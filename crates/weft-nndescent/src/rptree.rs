//! Random-projection trees for the initial graph (as pynndescent does): points that share a leaf
//! are joined pairwise. Each tree draws from its own seeded stream, so the forest does not depend
//! on the thread count.

use rayon::prelude::*;
use weft_core::rng::{SplitMix64, hash3};
use weft_core::{DType, DatasetView, Element, Metric, NodeId};

/// Margins closer to the hyperplane than this go to a random side.
const EPS: f32 = 1e-8;

/// One tree: a permutation of the points cut into leaves.
pub(crate) struct RpTree {
    /// The points, leaf after leaf.
    pub perm: Vec<NodeId>,
    /// Leaf `i` is `perm[bounds[i]..bounds[i + 1]]`.
    pub bounds: Vec<u32>,
}

impl RpTree {
    /// Number of leaves.
    pub fn leaves(&self) -> usize {
        self.bounds.len() - 1
    }

    /// Leaf `i`.
    pub fn leaf(&self, i: usize) -> &[NodeId] {
        &self.perm[self.bounds[i] as usize..self.bounds[i + 1] as usize]
    }
}

/// `x . h` with the element converted to f32, in 8 independent accumulators (vectorises).
#[inline]
fn dot_f32<T: Element>(x: &[T], h: &[f32]) -> f32 {
    let mut acc = [0.0f32; 8];
    let mut xc = x.chunks_exact(8);
    let mut hc = h.chunks_exact(8);
    for (a, b) in (&mut xc).zip(&mut hc) {
        for l in 0..8 {
            acc[l] += a[l].to_f32() * b[l];
        }
    }
    let mut s: f32 = acc.iter().sum();
    for (a, b) in xc.remainder().iter().zip(hc.remainder()) {
        s += a.to_f32() * b;
    }
    s
}

/// Builds tree `tree` of the forest for `seed`. Euclidean splits (hyperplane between two random
/// points) for L2, angular splits (through the origin, between the two normalised points) for
/// inner product and cosine.
pub(crate) fn build_tree<T: Element>(
    data: DatasetView<'_, T>,
    metric: Metric,
    leaf_size: usize,
    seed: u64,
    tree: u64,
) -> RpTree {
    let n = data.rows();
    let dim = data.dim();
    let mut rng = SplitMix64::new(hash3(seed, 0x7265_655f_7270, tree));
    let mut perm: Vec<NodeId> = (0..n as NodeId).collect();
    let mut bounds = vec![0u32];
    let mut side = vec![false; n];
    let mut h = vec![0.0f32; dim];
    let mut a = vec![0.0f32; dim];
    let mut b = vec![0.0f32; dim];
    let angular = metric != Metric::L2Squared;
    let ip = Metric::InnerProduct.distance_fn::<T>();
    // Depth-first, left before right, so leaves come out in perm order.
    let mut stack = vec![(0usize, n)];
    while let Some((lo, hi)) = stack.pop() {
        let len = hi - lo;
        if len <= leaf_size {
            bounds.push(hi as u32);
            continue;
        }
        let i = rng.below(len as u64) as usize;
        let mut j = rng.below(len as u64 - 1) as usize;
        if j >= i {
            j += 1;
        }
        for (d, (x, y)) in a.iter_mut().zip(b.iter_mut()).zip(
            data.row(perm[lo + i] as usize)
                .iter()
                .zip(data.row(perm[lo + j] as usize)),
        ) {
            *d.0 = x.to_f32();
            *d.1 = y.to_f32();
        }
        let offset;
        if angular {
            let na = a.iter().map(|v| v * v).sum::<f32>().sqrt();
            let nb = b.iter().map(|v| v * v).sum::<f32>().sqrt();
            let (na, nb) = (
                if na > 0.0 { na } else { 1.0 },
                if nb > 0.0 { nb } else { 1.0 },
            );
            for ((hv, x), y) in h.iter_mut().zip(&a).zip(&b) {
                *hv = x / na - y / nb;
            }
            offset = 0.0;
        } else {
            let mut o = 0.0f32;
            for ((hv, x), y) in h.iter_mut().zip(&a).zip(&b) {
                *hv = x - y;
                o -= *hv * (x + y) * 0.5;
            }
            offset = o;
        }
        let mut left = 0usize;
        // f32 data: the vectorised kernel of weft-core (`-a.b` under inner product).
        let h_t: Option<&[T]> = (T::DTYPE == DType::F32).then(|| bytemuck::cast_slice(&h[..]));
        for t in lo..hi {
            let row = data.row(perm[t] as usize);
            let m = offset
                + match h_t {
                    Some(ht) => -ip.eval(row, ht),
                    None => dot_f32(row, &h),
                };
            let s = if m.abs() < EPS || !m.is_finite() {
                rng.next_u64() & 1 == 0
            } else {
                m > 0.0
            };
            side[t] = s;
            left += s as usize;
        }
        if left == 0 || left == len {
            // Degenerate split (e.g. identical points): split at random.
            left = 0;
            for s in side[lo..hi].iter_mut() {
                *s = rng.next_u64() & 1 == 0;
                left += *s as usize;
            }
            if left == 0 || left == len {
                for (t, s) in side[lo..hi].iter_mut().enumerate() {
                    *s = t < len / 2;
                }
                left = len / 2;
            }
        }
        // Stable partition: left side first.
        let seg = &mut perm[lo..hi];
        let mut tmp: Vec<NodeId> = Vec::with_capacity(len - left);
        let mut w = 0;
        for t in 0..len {
            let p = seg[t];
            if side[lo + t] {
                seg[w] = p;
                w += 1;
            } else {
                tmp.push(p);
            }
        }
        seg[w..].copy_from_slice(&tmp);
        stack.push((lo + left, hi));
        stack.push((lo, lo + left));
    }
    RpTree { perm, bounds }
}

/// Builds `n_trees` trees in parallel (each from its own stream: thread-count independent).
pub(crate) fn build_forest<T: Element>(
    data: DatasetView<'_, T>,
    metric: Metric,
    leaf_size: usize,
    n_trees: usize,
    seed: u64,
) -> Vec<RpTree> {
    (0..n_trees as u64)
        .into_par_iter()
        .map(|t| build_tree(data, metric, leaf_size, seed, t))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn leaves_partition_the_points() {
        let mut r = SplitMix64::new(3);
        let v: Vec<f32> = (0..500 * 4).map(|_| r.next_f32()).collect();
        let d = DatasetView::new(&v, 500, 4).unwrap();
        for metric in Metric::ALL {
            let t = build_tree(d, metric, 12, 1, 0);
            let mut seen = t.perm.clone();
            seen.sort_unstable();
            assert_eq!(seen, (0..500).collect::<Vec<_>>());
            assert!(t.leaves() >= 500 / 12);
            for l in 0..t.leaves() {
                assert!(!t.leaf(l).is_empty() && t.leaf(l).len() <= 12);
            }
        }
        // Identical points still split.
        let z = vec![1.0f32; 100 * 3];
        let d = DatasetView::new(&z, 100, 3).unwrap();
        let t = build_tree(d, Metric::L2Squared, 10, 1, 0);
        assert!((0..t.leaves()).all(|l| t.leaf(l).len() <= 10));
    }
}
