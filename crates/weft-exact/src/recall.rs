//! Recall: how many of the true nearest neighbours a graph or a search found.
//!
//! Recall@k of one row is `hits / t`, where `t` is the number of valid ids among the first `k`
//! true neighbours (normally `k`) and `hits` the number of distinct valid ids among the first `k`
//! found ones that count as correct. Rows with no true neighbour are skipped; [`Recall::mean`]
//! is the mean over the remaining rows (the usual definition when every row has `k`).
//!
//! # Ties
//!
//! Exact k-NN lists break distance ties by id, so an approximate method that returns an equally
//! close point with another id is not wrong. With [`Ties::Distance`] (the default) a found id that
//! is not among the true `k` still counts when its distance `d` satisfies
//! `d <= d_k + TIE_RTOL * |d_k|`, `d_k` being the k-th true distance ([`TIE_RTOL`] absorbs the
//! rounding differences between distance kernels, e.g. GPU vs CPU). Hits never exceed `t`.
//! Which distance is used for `d`:
//! - [`knn_graph_recall`] / [`search_recall_exact`]: the distances the approximate result
//!   reports;
//! - [`sampled_graph_recall`] / [`SampledTruth::recall`]: distances recomputed from the data (so
//!   a wrong reported distance cannot earn credit).
//!
//! With [`Ties::Ids`] only ids count. [`graph_recall`] (any [`GraphView`], no distances) and
//! [`search_recall`] (ground-truth ids, e.g. from an `.ivecs` file) always match ids.
//!
//! In graph recall a vertex listed as its own neighbour never counts.

use std::collections::HashSet;

use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use weft_core::rng::{SplitMix64, hash3};
use weft_core::{
    BuildCtx, DatasetView, Element, Error, GraphView, INVALID, KnnGraph, Metric, Neighbors, NodeId,
    Result,
};

use crate::cpu::exact_neighbors_of;

/// Relative tolerance of the tie rule (see the module docs).
pub const TIE_RTOL: f32 = 1e-5;

/// How ties at the k-th distance are credited (see the module docs).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Ties {
    /// Only the true ids count.
    Ids,
    /// A found point as close as the k-th true neighbour also counts.
    #[default]
    Distance,
}

/// A recall measurement.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Recall {
    /// Mean recall@k over the evaluated rows, in `[0, 1]` (1 when no row was evaluated).
    pub mean: f64,
    /// The worst row's recall (1 when no row was evaluated).
    pub min: f64,
    /// Number of rows evaluated (the sample size).
    pub rows: usize,
    /// The `k` of recall@k.
    pub k: usize,
}

impl Recall {
    fn from_rows(per_row: &[Option<(usize, usize)>], k: usize) -> Self {
        let (mut sum, mut min, mut rows) = (0.0f64, 1.0f64, 0usize);
        for &(hits, total) in per_row.iter().flatten() {
            let r = hits as f64 / total as f64;
            sum += r;
            min = min.min(r);
            rows += 1;
        }
        Recall {
            mean: if rows == 0 { 1.0 } else { sum / rows as f64 },
            min,
            rows,
            k,
        }
    }
}

/// Reusable buffers for [`row_hits`].
#[derive(Default)]
struct Scratch {
    truth: Vec<NodeId>,
    found: Vec<(NodeId, f32)>,
}

/// `(hits, t)` for one row, `None` when the truth row has no valid id.
///
/// `found_d` (parallel to `found`) and `truth_d` enable the tie rule.
fn row_hits(
    scratch: &mut Scratch,
    found: &[NodeId],
    found_d: Option<&[f32]>,
    truth: &[NodeId],
    truth_d: Option<&[f32]>,
    exclude: Option<NodeId>,
) -> Option<(usize, usize)> {
    let valid = truth.iter().take_while(|&&x| x != INVALID).count();
    if valid == 0 {
        return None;
    }
    scratch.truth.clear();
    scratch.truth.extend_from_slice(&truth[..valid]);
    scratch.truth.sort_unstable();
    scratch.truth.dedup();
    let t = scratch.truth.len();
    let threshold = truth_d
        .and_then(|d| d[..valid].last().copied())
        .filter(|d| d.is_finite())
        .map(|kth| kth + TIE_RTOL * kth.abs());
    scratch.found.clear();
    for (j, &id) in found.iter().enumerate() {
        if id == INVALID || Some(id) == exclude {
            continue;
        }
        let d = found_d.map_or(f32::INFINITY, |d| d[j]);
        scratch.found.push((id, d));
    }
    scratch.found.sort_unstable_by_key(|&(id, _)| id);
    scratch.found.dedup_by_key(|&mut (id, _)| id);
    let hits = scratch
        .found
        .iter()
        .filter(|&&(id, d)| {
            scratch.truth.binary_search(&id).is_ok() || threshold.is_some_and(|thr| d <= thr)
        })
        .count();
    Some((hits.min(t), t))
}

fn check_recall_k(k: usize, available: usize, what: &str) -> Result<()> {
    if k == 0 {
        return Err(Error::invalid_param("k", "recall@k needs k >= 1"));
    }
    if k > available {
        return Err(Error::invalid_param(
            "k",
            format!("recall@{k} needs at least {k} columns, the {what} has {available}"),
        ));
    }
    Ok(())
}

/// Recall@k of an approximate k-NN graph against the exact one (same points, `k` at most both
/// graphs' `k`). With [`Ties::Distance`] the approximate graph's own distances decide ties.
pub fn knn_graph_recall(
    approx: &KnnGraph,
    exact: &KnnGraph,
    k: usize,
    ties: Ties,
) -> Result<Recall> {
    if approx.n() != exact.n() {
        return Err(Error::dim_mismatch(
            "approximate vs exact graph vertices",
            exact.n(),
            approx.n(),
        ));
    }
    check_recall_k(k, approx.k(), "approximate graph")?;
    check_recall_k(k, exact.k(), "exact graph")?;
    let with_d = ties == Ties::Distance;
    let per_row: Vec<_> = (0..approx.n())
        .into_par_iter()
        .map_init(Scratch::default, |s, v| {
            row_hits(
                s,
                &approx.row_ids(v)[..k],
                with_d.then(|| &approx.row_dists(v)[..k]),
                &exact.row_ids(v)[..k],
                with_d.then(|| &exact.row_dists(v)[..k]),
                Some(v as NodeId),
            )
        })
        .collect();
    Ok(Recall::from_rows(&per_row, k))
}

/// Recall@k of any graph's first `k` out-neighbours against the exact k-NN graph (ids only;
/// `k <= exact.k()` and `k <= approx.max_degree()`).
pub fn graph_recall<G: GraphView + ?Sized>(
    approx: &G,
    exact: &KnnGraph,
    k: usize,
) -> Result<Recall> {
    if approx.num_nodes() != exact.n() {
        return Err(Error::dim_mismatch(
            "graph vs exact graph vertices",
            exact.n(),
            approx.num_nodes(),
        ));
    }
    check_recall_k(k, approx.max_degree(), "graph")?;
    check_recall_k(k, exact.k(), "exact graph")?;
    let per_row: Vec<_> = (0..approx.num_nodes())
        .into_par_iter()
        .map_init(Scratch::default, |s, v| {
            let nb = approx.neighbors(v as NodeId);
            row_hits(
                s,
                &nb[..nb.len().min(k)],
                None,
                &exact.row_ids(v)[..k],
                None,
                Some(v as NodeId),
            )
        })
        .collect();
    Ok(Recall::from_rows(&per_row, k))
}

/// `sample` distinct row numbers below `n`, ascending, drawn with `seed` (all rows when
/// `sample >= n`). Deterministic; memory is proportional to `sample`, not `n`.
pub fn sample_rows(n: usize, sample: usize, seed: u64) -> Vec<NodeId> {
    if sample >= n {
        return (0..n as NodeId).collect();
    }
    // Floyd's algorithm: exactly `sample` distinct values, uniformly.
    let mut rng = SplitMix64::new(hash3(seed, 0x5a3b_1e00, n as u64));
    let mut chosen: HashSet<u64> = HashSet::with_capacity(sample);
    for j in (n - sample) as u64..n as u64 {
        let t = rng.below(j + 1);
        if !chosen.insert(t) {
            chosen.insert(j);
        }
    }
    let mut rows: Vec<NodeId> = chosen.into_iter().map(|v| v as NodeId).collect();
    rows.sort_unstable();
    rows
}

/// The exact neighbours of a seeded sample of rows: compute once ([`SampledTruth::compute`]),
/// then measure any number of graphs on the same data ([`SampledTruth::recall`]).
#[derive(Clone, Debug)]
pub struct SampledTruth {
    metric: Metric,
    rows: Vec<NodeId>,
    exact: Neighbors,
}

impl SampledTruth {
    /// The exact `k` nearest other points ([`exact_neighbors_of`]) of `sample` rows of `data`
    /// drawn by [`sample_rows`] with `ctx.seed()` (every row when `sample >= rows`).
    pub fn compute<T: Element>(
        data: DatasetView<'_, T>,
        metric: Metric,
        k: usize,
        sample: usize,
        ctx: &BuildCtx,
    ) -> Result<Self> {
        if sample == 0 {
            return Err(Error::invalid_param(
                "sample",
                "the sample needs at least 1 row",
            ));
        }
        let rows = sample_rows(data.rows(), sample, ctx.seed());
        let exact = exact_neighbors_of(data, metric, &rows, k, ctx)?;
        Ok(SampledTruth {
            metric,
            rows,
            exact,
        })
    }

    /// Wraps exact neighbours computed elsewhere: `exact` row `i` belongs to data row `rows[i]`
    /// and excludes it.
    pub fn from_parts(metric: Metric, rows: Vec<NodeId>, exact: Neighbors) -> Result<Self> {
        if rows.len() != exact.rows() {
            return Err(Error::dim_mismatch(
                "sampled rows vs exact neighbour rows",
                rows.len(),
                exact.rows(),
            ));
        }
        Ok(SampledTruth {
            metric,
            rows,
            exact,
        })
    }

    /// The sampled rows, ascending.
    pub fn rows(&self) -> &[NodeId] {
        &self.rows
    }

    /// Their exact neighbours.
    pub fn exact(&self) -> &Neighbors {
        &self.exact
    }

    /// Neighbours known per sampled row (the largest `k` [`SampledTruth::recall`] accepts).
    pub fn k(&self) -> usize {
        self.exact.k()
    }

    /// The metric the neighbours were computed under.
    pub fn metric(&self) -> Metric {
        self.metric
    }

    /// Recall@k of `approx`'s first `k` out-neighbours on the sampled rows (`k <= self.k()`,
    /// `k <= approx.max_degree()`). `data` must be the data the truth was computed on; with
    /// [`Ties::Distance`] the found neighbours' distances are recomputed from it.
    pub fn recall<T: Element, G: GraphView + ?Sized>(
        &self,
        approx: &G,
        data: DatasetView<'_, T>,
        k: usize,
        ties: Ties,
    ) -> Result<Recall> {
        let n = data.rows();
        if approx.num_nodes() != n {
            return Err(Error::dim_mismatch(
                "graph vertices vs data rows",
                n,
                approx.num_nodes(),
            ));
        }
        check_recall_k(k, approx.max_degree(), "graph")?;
        check_recall_k(k, self.k(), "sampled truth")?;
        if let Some(&r) = self.rows.iter().find(|&&r| r as usize >= n) {
            return Err(Error::InvalidInput(format!(
                "sampled row {r} is out of range (n = {n})"
            )));
        }
        let dist = self.metric.distance_fn::<T>();
        let with_d = ties == Ties::Distance;
        let per_row = self
            .rows
            .par_iter()
            .enumerate()
            .map_init(
                || (Scratch::default(), Vec::new()),
                |(s, found_d), (i, &v)| {
                    let nb = approx.neighbors(v);
                    let found = &nb[..nb.len().min(k)];
                    if let Some(&u) = found.iter().find(|&&u| u != INVALID && u as usize >= n) {
                        return Err(Error::InvalidGraph(format!(
                            "vertex {v} has neighbour {u}, out of range (n = {n})"
                        )));
                    }
                    if with_d {
                        found_d.clear();
                        found_d.extend(found.iter().map(|&u| {
                            if u == INVALID {
                                f32::INFINITY
                            } else {
                                dist.eval(data.row(v as usize), data.row(u as usize))
                            }
                        }));
                    }
                    Ok(row_hits(
                        s,
                        found,
                        with_d.then_some(found_d.as_slice()),
                        &self.exact.row_ids(i)[..k],
                        with_d.then(|| &self.exact.row_dists(i)[..k]),
                        Some(v),
                    ))
                },
            )
            .collect::<Result<Vec<_>>>()?;
        Ok(Recall::from_rows(&per_row, k))
    }
}

/// Recall@k of a graph's first `k` out-neighbours on a seeded sample of `sample` rows, whose
/// exact neighbours are computed from `data`: the way to measure graphs too large for an exact
/// k-NN graph. Shorthand for [`SampledTruth::compute`] then [`SampledTruth::recall`] (on
/// `ctx`'s thread pool); keep the [`SampledTruth`] to measure several graphs.
pub fn sampled_graph_recall<T: Element, G: GraphView + ?Sized>(
    approx: &G,
    data: DatasetView<'_, T>,
    metric: Metric,
    k: usize,
    sample: usize,
    ties: Ties,
    ctx: &BuildCtx,
) -> Result<Recall> {
    if approx.num_nodes() != data.rows() {
        return Err(Error::dim_mismatch(
            "graph vertices vs data rows",
            data.rows(),
            approx.num_nodes(),
        ));
    }
    check_recall_k(k, approx.max_degree(), "graph")?;
    let truth = SampledTruth::compute(data, metric, k, sample, ctx)?;
    ctx.install(|| truth.recall(approx, data, k, ties))?
}

/// Search recall@k against ground-truth ids: `gt_ids` holds `found.rows()` rows of `gt_k` ids
/// (e.g. an `.ivecs` ground-truth file), `k <= gt_k` and `k <= found.k()`. Ids only.
pub fn search_recall(
    found: &Neighbors,
    gt_ids: &[NodeId],
    gt_k: usize,
    k: usize,
) -> Result<Recall> {
    check_recall_k(k, found.k(), "result")?;
    check_recall_k(k, gt_k, "ground truth")?;
    if gt_ids.len() != found.rows() * gt_k {
        return Err(Error::dim_mismatch(
            "ground-truth ids (queries x gt_k)",
            found.rows() * gt_k,
            gt_ids.len(),
        ));
    }
    let per_row: Vec<_> = (0..found.rows())
        .into_par_iter()
        .map_init(Scratch::default, |s, q| {
            row_hits(
                s,
                &found.row_ids(q)[..k],
                None,
                &gt_ids[q * gt_k..q * gt_k + k],
                None,
                None,
            )
        })
        .collect();
    Ok(Recall::from_rows(&per_row, k))
}

/// Search recall@k against exact results with distances (e.g. from
/// [`exact_search`](crate::cpu::exact_search)); with [`Ties::Distance`] the found distances
/// decide ties.
pub fn search_recall_exact(
    found: &Neighbors,
    exact: &Neighbors,
    k: usize,
    ties: Ties,
) -> Result<Recall> {
    if found.rows() != exact.rows() {
        return Err(Error::dim_mismatch(
            "result vs exact rows",
            exact.rows(),
            found.rows(),
        ));
    }
    check_recall_k(k, found.k(), "result")?;
    check_recall_k(k, exact.k(), "exact result")?;
    let with_d = ties == Ties::Distance;
    let per_row: Vec<_> = (0..found.rows())
        .into_par_iter()
        .map_init(Scratch::default, |s, q| {
            row_hits(
                s,
                &found.row_ids(q)[..k],
                with_d.then(|| &found.row_dists(q)[..k]),
                &exact.row_ids(q)[..k],
                with_d.then(|| &exact.row_dists(q)[..k]),
                None,
            )
        })
        .collect();
    Ok(Recall::from_rows(&per_row, k))
}
