//! The graphs exchanged through the seam traits. Operations on them (statistics, recall,
//! connectivity, files) live in `weft-graph`.

use rayon::prelude::*;

use crate::buffer::SharedSlice;
use crate::{Error, INVALID, NodeId, Result};

/// Read access to a proximity graph, as searches need it.
pub trait GraphView: Send + Sync {
    /// Number of vertices.
    fn num_nodes(&self) -> usize;
    /// The largest out-degree a vertex may have.
    fn max_degree(&self) -> usize;
    /// The out-neighbours of `v` (no padding).
    fn neighbors(&self, v: NodeId) -> &[NodeId];
    /// Preferred search entry points, if the graph has any (e.g. a medoid).
    fn entry_points(&self) -> &[NodeId] {
        &[]
    }
}

/// The valid prefix of a padded row.
#[inline]
fn trim(row: &[NodeId]) -> &[NodeId] {
    match row.iter().position(|&v| v == INVALID) {
        Some(p) => &row[..p],
        None => row,
    }
}

/// Checks a padded adjacency row: ids in range, padding only at the end, no self-loop, no
/// duplicate.
fn check_row(v: usize, row: &[NodeId], n: usize, scratch: &mut Vec<NodeId>) -> Result<()> {
    let valid = trim(row);
    if let Some(p) = row[valid.len()..].iter().position(|&x| x != INVALID) {
        return Err(Error::InvalidGraph(format!(
            "row {v}: id at position {} follows padding",
            valid.len() + p
        )));
    }
    for (j, &u) in valid.iter().enumerate() {
        if u as usize >= n {
            return Err(Error::InvalidGraph(format!(
                "row {v}: id {u} at position {j} is out of range (n = {n})"
            )));
        }
        if u as usize == v {
            return Err(Error::InvalidGraph(format!(
                "row {v}: self-loop at position {j}"
            )));
        }
    }
    scratch.clear();
    scratch.extend_from_slice(valid);
    scratch.sort_unstable();
    if let Some(w) = scratch.windows(2).find(|w| w[0] == w[1]) {
        return Err(Error::InvalidGraph(format!(
            "row {v}: id {} appears twice",
            w[0]
        )));
    }
    Ok(())
}

/// A k-nearest-neighbour graph: for each of `n` points, up to `k` neighbour ids and distances,
/// ascending by distance, padded at the end with [`INVALID`] ids and `f32::INFINITY`.
#[derive(Clone, Debug)]
pub struct KnnGraph {
    n: usize,
    k: usize,
    ids: SharedSlice<NodeId>,
    dists: SharedSlice<f32>,
}

impl KnnGraph {
    /// A graph whose rows are all padding.
    pub fn empty(n: usize, k: usize) -> Self {
        KnnGraph {
            n,
            k,
            ids: vec![INVALID; n * k].into(),
            dists: vec![f32::INFINITY; n * k].into(),
        }
    }

    /// Assembles a graph from row-major ids and distances (`n * k` each). Call
    /// [`KnnGraph::validate`] to check the rows.
    pub fn from_parts(
        n: usize,
        k: usize,
        ids: impl Into<SharedSlice<NodeId>>,
        dists: impl Into<SharedSlice<f32>>,
    ) -> Result<Self> {
        let (ids, dists) = (ids.into(), dists.into());
        if ids.len() != n * k || dists.len() != n * k {
            return Err(Error::InvalidGraph(format!(
                "{n} x {k} graph needs {} ids and distances, got {} and {}",
                n * k,
                ids.len(),
                dists.len()
            )));
        }
        Ok(KnnGraph { n, k, ids, dists })
    }

    /// A copy whose ids are in huge pages, for searches that read rows in no useful order (see
    /// [`crate::huge_pages`]); the distances are copied as they are. `None` where
    /// [`SharedSlice::copy_to_huge_pages`] makes no copy.
    pub fn copy_to_huge_pages(&self) -> Option<KnnGraph> {
        Some(KnnGraph {
            n: self.n,
            k: self.k,
            ids: self.ids.copy_to_huge_pages()?,
            dists: self.dists.clone(),
        })
    }

    /// Number of points.
    pub fn n(&self) -> usize {
        self.n
    }

    /// Neighbours per point.
    pub fn k(&self) -> usize {
        self.k
    }

    /// All ids, row-major.
    pub fn ids(&self) -> &[NodeId] {
        &self.ids
    }

    /// All distances, row-major.
    pub fn dists(&self) -> &[f32] {
        &self.dists
    }

    /// Row `v`'s ids (with padding).
    pub fn row_ids(&self, v: usize) -> &[NodeId] {
        &self.ids[v * self.k..(v + 1) * self.k]
    }

    /// Row `v`'s distances (with padding).
    pub fn row_dists(&self, v: usize) -> &[f32] {
        &self.dists[v * self.k..(v + 1) * self.k]
    }

    /// Mutable ids and distances, row-major (copies memory-mapped storage first).
    pub fn parts_mut(&mut self) -> (&mut [NodeId], &mut [f32]) {
        (self.ids.to_mut(), self.dists.to_mut())
    }

    /// The ids and distances as owned vectors.
    pub fn into_parts(self) -> (Vec<NodeId>, Vec<f32>) {
        (self.ids.into_vec(), self.dists.into_vec())
    }

    /// Checks every row: ids in range, no self-loop, no duplicate, padding only at the end,
    /// distances finite and ascending over the valid prefix.
    pub fn validate(&self) -> Result<()> {
        let k = self.k;
        if k == 0 {
            return Ok(());
        }
        self.ids
            .par_chunks(k)
            .zip(self.dists.par_chunks(k))
            .enumerate()
            .try_for_each_init(Vec::new, |scratch, (v, (ids, dists))| {
                check_row(v, ids, self.n, scratch)?;
                let valid = trim(ids).len();
                let d = &dists[..valid];
                if let Some(j) = d.iter().position(|x| x.is_nan()) {
                    return Err(Error::InvalidGraph(format!(
                        "row {v}: NaN distance at position {j}"
                    )));
                }
                if let Some(j) = d.windows(2).position(|w| w[0] > w[1]) {
                    return Err(Error::InvalidGraph(format!(
                        "row {v}: distances not ascending at position {} ({} > {})",
                        j + 1,
                        d[j],
                        d[j + 1]
                    )));
                }
                Ok(())
            })
    }

    /// Sorts every row by (distance, id), padding last.
    pub fn sort_rows(&mut self) {
        let k = self.k;
        if k == 0 {
            return;
        }
        let (ids, dists) = (self.ids.to_mut(), self.dists.to_mut());
        ids.par_chunks_mut(k)
            .zip(dists.par_chunks_mut(k))
            .for_each(|(ids, dists)| {
                let mut row: Vec<(f32, NodeId)> =
                    dists.iter().copied().zip(ids.iter().copied()).collect();
                row.sort_unstable_by(|a, b| {
                    let pa = a.1 == INVALID;
                    let pb = b.1 == INVALID;
                    pa.cmp(&pb).then(a.0.total_cmp(&b.0)).then(a.1.cmp(&b.1))
                });
                for (j, (d, id)) in row.into_iter().enumerate() {
                    ids[j] = id;
                    dists[j] = if id == INVALID { f32::INFINITY } else { d };
                }
            });
    }

    /// The first `k` columns of every row.
    pub fn truncate(&self, k: usize) -> Result<KnnGraph> {
        if k > self.k {
            return Err(Error::invalid_param(
                "k",
                format!("cannot truncate a degree-{} graph to {k}", self.k),
            ));
        }
        let mut ids = Vec::with_capacity(self.n * k);
        let mut dists = Vec::with_capacity(self.n * k);
        for v in 0..self.n {
            ids.extend_from_slice(&self.row_ids(v)[..k]);
            dists.extend_from_slice(&self.row_dists(v)[..k]);
        }
        KnnGraph::from_parts(self.n, k, ids, dists)
    }

    /// A search graph made of the first `degree` neighbours of every row.
    pub fn to_fixed_degree(&self, degree: usize) -> Result<FixedDegreeGraph> {
        let t = self.truncate(degree)?;
        FixedDegreeGraph::new(self.n, degree, t.ids)
    }
}

impl GraphView for KnnGraph {
    fn num_nodes(&self) -> usize {
        self.n
    }
    fn max_degree(&self) -> usize {
        self.k
    }
    fn neighbors(&self, v: NodeId) -> &[NodeId] {
        trim(self.row_ids(v as usize))
    }
}

/// A search graph: `n` rows of exactly `degree` slots, short rows padded at the end with
/// [`INVALID`], plus optional entry points.
#[derive(Clone, Debug)]
pub struct FixedDegreeGraph {
    n: usize,
    degree: usize,
    ids: SharedSlice<NodeId>,
    entry_points: Vec<NodeId>,
}

impl FixedDegreeGraph {
    /// Wraps `n * degree` row-major ids. Call [`FixedDegreeGraph::validate`] to check them.
    pub fn new(n: usize, degree: usize, ids: impl Into<SharedSlice<NodeId>>) -> Result<Self> {
        let ids = ids.into();
        if ids.len() != n * degree {
            return Err(Error::InvalidGraph(format!(
                "{n} x {degree} graph needs {} ids, got {}",
                n * degree,
                ids.len()
            )));
        }
        Ok(FixedDegreeGraph {
            n,
            degree,
            ids,
            entry_points: Vec::new(),
        })
    }

    /// Builds from variable-length adjacency lists, truncating none: every list must fit `degree`.
    pub fn from_lists(lists: &[Vec<NodeId>], degree: usize) -> Result<Self> {
        let mut ids = vec![INVALID; lists.len() * degree];
        for (v, l) in lists.iter().enumerate() {
            if l.len() > degree {
                return Err(Error::InvalidGraph(format!(
                    "row {v} has {} neighbours, more than degree {degree}",
                    l.len()
                )));
            }
            ids[v * degree..v * degree + l.len()].copy_from_slice(l);
        }
        Self::new(lists.len(), degree, ids)
    }

    /// A copy whose rows are in huge pages, for searches that read rows in no useful order (see
    /// [`crate::huge_pages`]). `None` where [`SharedSlice::copy_to_huge_pages`] makes no copy.
    pub fn copy_to_huge_pages(&self) -> Option<FixedDegreeGraph> {
        Some(FixedDegreeGraph {
            n: self.n,
            degree: self.degree,
            ids: self.ids.copy_to_huge_pages()?,
            entry_points: self.entry_points.clone(),
        })
    }

    /// Sets the preferred search entry points.
    pub fn with_entry_points(mut self, entry_points: Vec<NodeId>) -> Self {
        self.entry_points = entry_points;
        self
    }

    /// Number of vertices.
    pub fn n(&self) -> usize {
        self.n
    }

    /// Slots per row.
    pub fn degree(&self) -> usize {
        self.degree
    }

    /// All slots, row-major.
    pub fn ids(&self) -> &[NodeId] {
        &self.ids
    }

    /// Mutable slots (copies memory-mapped storage first).
    pub fn ids_mut(&mut self) -> &mut [NodeId] {
        self.ids.to_mut()
    }

    /// Row `v` with padding.
    pub fn row(&self, v: usize) -> &[NodeId] {
        &self.ids[v * self.degree..(v + 1) * self.degree]
    }

    /// Checks every row (ids in range, padding at the end, no self-loop, no duplicate) and the
    /// entry points.
    pub fn validate(&self) -> Result<()> {
        if let Some(&e) = self.entry_points.iter().find(|&&e| e as usize >= self.n) {
            return Err(Error::InvalidGraph(format!(
                "entry point {e} is out of range (n = {})",
                self.n
            )));
        }
        if self.degree == 0 {
            return Ok(());
        }
        self.ids
            .par_chunks(self.degree)
            .enumerate()
            .try_for_each_init(Vec::new, |scratch, (v, row)| {
                check_row(v, row, self.n, scratch)
            })
    }
}

impl GraphView for FixedDegreeGraph {
    fn num_nodes(&self) -> usize {
        self.n
    }
    fn max_degree(&self) -> usize {
        self.degree
    }
    fn neighbors(&self, v: NodeId) -> &[NodeId] {
        trim(self.row(v as usize))
    }
    fn entry_points(&self) -> &[NodeId] {
        &self.entry_points
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn validate_catches_each_defect() {
        let ok = FixedDegreeGraph::new(3, 2, vec![1, 2, 0, INVALID, 0, 1]).unwrap();
        ok.validate().unwrap();
        assert_eq!(ok.neighbors(1), &[0]);
        for bad in [
            vec![1, 1, 0, INVALID, 0, 1],       // duplicate
            vec![0, 2, 0, INVALID, 0, 1],       // self-loop
            vec![1, 7, 0, INVALID, 0, 1],       // out of range
            vec![INVALID, 2, 0, INVALID, 0, 1], // id after padding
        ] {
            assert!(
                FixedDegreeGraph::new(3, 2, bad)
                    .unwrap()
                    .validate()
                    .is_err()
            );
        }
    }

    #[test]
    fn knn_rows_sort_and_validate() {
        let mut g = KnnGraph::from_parts(
            3,
            2,
            vec![2, 1, INVALID, 2, 1, 0],
            vec![5.0, 1.0, 0.0, 3.0, 2.0, 2.0],
        )
        .unwrap();
        assert!(g.validate().is_err());
        g.sort_rows();
        g.validate().unwrap();
        assert_eq!(g.row_ids(0), &[1, 2]);
        assert_eq!(g.row_ids(1), &[2, INVALID]);
        assert_eq!(g.row_ids(2), &[0, 1]);
        assert_eq!(g.to_fixed_degree(1).unwrap().ids(), &[1, 2, 0]);
    }
}
