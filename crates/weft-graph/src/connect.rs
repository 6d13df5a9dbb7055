//! Search-graph connectivity: entry points spread over the data, and the one repair that makes
//! every vertex of a fixed-degree graph reachable from them.
//!
//! On strongly clustered data (clusters farther apart than their own spread) a proximity graph
//! built from near neighbours falls apart into one component per cluster, and a search that starts
//! in the wrong cluster never reaches the query's. Two things fix that, and every search-graph
//! builder uses both:
//!
//! - [`spread_entry_points`]: the graph's entry points are chosen by farthest-first traversal
//!   (Gonzalez's 2-approximation of k-center) over a seeded sample, so that every region of the
//!   data, every cluster farther from the others than its own diameter in particular, holds an
//!   entry point as long as there are at most `count` such regions. A search scores all of them
//!   and starts from the best, i.e. in the query's own cluster.
//! - [`repair_connectivity`]: whatever is still unreachable from the entry points is linked in.
//!   An unreachable vertex whose row holds a reachable vertex `r` gets the reverse edge `r -> u`
//!   (a near neighbour of `u`: cheap and local). A component with no edge out of it gets a bridge
//!   from the reachable vertex nearest to it, found by a beam search over the reachable graph,
//!   and the bridge's reverse edge, so that a search can leave the component too. Edges are
//!   written into free slots, else over a row's farthest edge whose target keeps another in-edge.
//!
//! Both are deterministic for a seed and independent of the thread count.

use rayon::prelude::*;
use weft_core::rng::{SplitMix64, hash3};
use weft_core::{
    CancelToken, DatasetView, Element, Error, FixedDegreeGraph, GraphView, INVALID, Metric, NodeId,
    Result,
};

/// The default number of spread entry points of a search graph.
pub const DEFAULT_ENTRY_POINTS: usize = 256;

/// Rows sampled per requested entry point by [`spread_entry_points`] (at least
/// [`MIN_ENTRY_SAMPLE`] rows, at most all of them).
const SAMPLE_PER_ENTRY: usize = 32;
/// The smallest sample [`spread_entry_points`] draws from (all rows when there are fewer).
const MIN_ENTRY_SAMPLE: usize = 4096;
/// List size of the beam search that finds a bridge's reachable end.
const BRIDGE_BEAM: usize = 32;
/// Passes of [`repair_connectivity`] before it reports what is left.
const REPAIR_PASSES: usize = 16;

/// The metric entry points are spread in: inner product is not a distance between points (a
/// point is not closest to itself), so it is spread in squared L2; the others in their own.
fn spread_metric(metric: Metric) -> Metric {
    match metric {
        Metric::InnerProduct => Metric::L2Squared,
        m => m,
    }
}

/// `min(count, rows)` entry points spread over `data` (see the [module docs](self)), in the
/// order they were picked: the first is the sampled point closest to the sample's centre, each
/// next one the sampled point farthest from all picked so far (ties to the lowest sample
/// position).
///
/// The sample holds `max(4096, 32 * count)` seeded distinct rows (all rows when there are
/// fewer). Costs about `count * sample` distance evaluations, in parallel; the result depends
/// only on the data, `count`, the metric and `seed`. `count == 0` gives no entry points.
pub fn spread_entry_points<T: Element>(
    data: DatasetView<'_, T>,
    metric: Metric,
    count: usize,
    seed: u64,
) -> Result<Vec<NodeId>> {
    let n = data.rows();
    if n > NodeId::MAX as usize {
        return Err(Error::InvalidInput(format!(
            "{n} vectors exceed the id range of a graph"
        )));
    }
    if count == 0 || n == 0 {
        return Ok(Vec::new());
    }
    let want = MIN_ENTRY_SAMPLE.max(count.saturating_mul(SAMPLE_PER_ENTRY));
    let sample: Vec<NodeId> = if want >= n {
        (0..n as NodeId).collect()
    } else {
        let mut rng = SplitMix64::new(hash3(seed, 0x7370_7265_6164, n as u64));
        let mut ids: Vec<NodeId> = (0..want).map(|_| rng.below(n as u64) as NodeId).collect();
        ids.sort_unstable();
        ids.dedup();
        ids
    };
    let count = count.min(sample.len());
    let dist = spread_metric(metric).distance_fn::<T>();

    // The first pick: the sampled point closest (in squared L2) to the sample's mean.
    let dim = data.dim();
    let mut mean = vec![0f64; dim];
    for &i in &sample {
        for (m, x) in mean.iter_mut().zip(data.row(i as usize)) {
            *m += x.to_f32() as f64;
        }
    }
    let centre: Vec<T> = mean
        .iter()
        .map(|&s| T::from_f32((s / sample.len() as f64) as f32))
        .collect();
    let l2 = Metric::L2Squared.distance_fn::<T>();
    let mut picks = Vec::with_capacity(count);
    let first = argmin(
        sample
            .par_iter()
            .map(|&i| l2.eval(data.row(i as usize), &centre))
            .collect::<Vec<_>>()
            .as_slice(),
    );
    picks.push(sample[first]);

    // Farthest-first traversal: `nearest[j]` is sample point j's distance to the closest pick.
    let mut nearest = vec![f32::INFINITY; sample.len()];
    let mut last = sample[first];
    while picks.len() < count {
        let row = data.row(last as usize);
        nearest
            .par_iter_mut()
            .zip(sample.par_iter())
            .with_min_len(256)
            .for_each(|(best, &i)| {
                let d = dist.eval(data.row(i as usize), row);
                // A NaN (never from finite data) must not win the argmax below.
                if d < *best || best.is_nan() {
                    *best = d;
                }
            });
        let far = argmax(&nearest);
        if nearest[far] <= 0.0 {
            break; // every sampled point coincides with a pick
        }
        last = sample[far];
        picks.push(last);
    }
    Ok(picks)
}

/// Position of the smallest value (the first among equals; NaN never wins).
fn argmin(v: &[f32]) -> usize {
    let mut best = 0;
    for (i, &x) in v.iter().enumerate() {
        if x < v[best] || v[best].is_nan() {
            best = i;
        }
    }
    best
}

/// Position of the largest value (the first among equals; NaN never wins).
fn argmax(v: &[f32]) -> usize {
    let mut best = 0;
    for (i, &x) in v.iter().enumerate() {
        if x > v[best] || v[best].is_nan() {
            best = i;
        }
    }
    best
}

/// What [`repair_connectivity`] did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct RepairReport {
    /// Vertices unreachable from the entry points before the repair.
    pub unreachable_before: usize,
    /// Reverse edges `r -> u` written from a reachable out-neighbour `r` of an unreachable `u`.
    pub local_links: usize,
    /// Components linked by a bridge from the reachable vertex nearest to them (each bridge also
    /// gets its reverse edge).
    pub bridges: usize,
    /// Edges of the input that a new edge replaced (rows were full).
    pub replaced: usize,
    /// Passes run (each starts with a fresh breadth-first search).
    pub passes: usize,
    /// Vertices still unreachable afterwards: 0 unless the graph has no entry points, or a
    /// degree of 0, or the pass limit was hit (not seen in practice).
    pub unreachable_after: usize,
}

/// Links every vertex of `graph` that its entry points do not reach (see the
/// [module docs](self)); the graph's rows keep their padding at the end and gain no
/// duplicates or self-loops. `data` and `metric` are those the graph was built for.
///
/// A graph without entry points is left as it is (nothing is reachable from nothing: the report
/// says so). Fails with [`Error::DimensionMismatch`] when `data` has another number of rows,
/// [`Error::InvalidGraph`] on an out-of-range id, and [`Error::Cancelled`] when `cancel` fires.
pub fn repair_connectivity<T: Element>(
    graph: &mut FixedDegreeGraph,
    data: DatasetView<'_, T>,
    metric: Metric,
    cancel: &CancelToken,
) -> Result<RepairReport> {
    if data.rows() != graph.n() {
        return Err(Error::dim_mismatch(
            "rows of the graph's data",
            graph.n(),
            data.rows(),
        ));
    }
    let entries = graph.entry_points().to_vec();
    let degree = graph.degree();
    let dist = metric.distance_fn::<T>();
    repair_rows(
        graph.ids_mut(),
        degree,
        &entries,
        |a, b| dist.eval(data.row(a as usize), data.row(b as usize)),
        cancel,
    )
}

/// [`repair_connectivity`] on raw rows: `ids` holds `n = ids.len() / degree` rows of `degree`
/// ids (INVALID padding at the end of a row), `dist(a, b)` is the distance between vertices `a`
/// and `b`. For builders that keep their graph as a plain buffer.
pub fn repair_rows<D: Fn(NodeId, NodeId) -> f32>(
    ids: &mut [NodeId],
    degree: usize,
    entries: &[NodeId],
    dist: D,
    cancel: &CancelToken,
) -> Result<RepairReport> {
    let mut report = RepairReport::default();
    if degree == 0 {
        let n = ids.len();
        report.unreachable_before = n.saturating_sub(entries.len());
        report.unreachable_after = report.unreachable_before;
        return Ok(report);
    }
    if !ids.len().is_multiple_of(degree) {
        return Err(Error::InvalidGraph(format!(
            "{} ids do not form rows of {degree}",
            ids.len()
        )));
    }
    let n = ids.len() / degree;
    if let Some(&e) = entries.iter().find(|&&e| e as usize >= n) {
        return Err(Error::InvalidGraph(format!(
            "entry point {e} is out of range (n = {n})"
        )));
    }
    let mut rows = Rows { ids, degree, n };
    let mut in_degree = rows.in_degrees()?;
    let mut seen = rows.reach(entries);
    report.unreachable_before = seen.iter().filter(|&&s| !s).count();
    if entries.is_empty() {
        report.unreachable_after = report.unreachable_before;
        return Ok(report);
    }
    let mut stack = Vec::new();
    let mut search = BridgeSearch::new(n);
    while report.passes < REPAIR_PASSES && seen.iter().any(|&s| !s) {
        report.passes += 1;
        // Local links: an unreachable vertex with a reachable out-neighbour r gets r -> u from
        // the closest such r.
        for u in 0..n {
            if seen[u] {
                continue;
            }
            let Some(r) = rows.row(u).iter().copied().find(|&w| {
                let w = w as usize;
                w < n && seen[w]
            }) else {
                continue;
            };
            report.replaced += usize::from(rows.link(r as usize, u as NodeId, &mut in_degree));
            report.local_links += 1;
            rows.flood(u as NodeId, &mut seen, &mut stack);
        }
        // Bridges: the rest lie in components with no edge out to the reachable part.
        for u in 0..n {
            if seen[u] {
                continue;
            }
            cancel.check()?;
            if let Some(r) = rows.row(u).iter().copied().find(|&w| {
                let w = w as usize;
                w < n && seen[w]
            }) {
                report.replaced += usize::from(rows.link(r as usize, u as NodeId, &mut in_degree));
                report.local_links += 1;
            } else {
                let r = search.nearest_reachable(&rows, entries, &seen, u as NodeId, &dist);
                report.replaced += usize::from(rows.link(r as usize, u as NodeId, &mut in_degree));
                report.replaced += usize::from(rows.link(u, r, &mut in_degree));
                report.bridges += 1;
            }
            rows.flood(u as NodeId, &mut seen, &mut stack);
        }
        // A replaced edge can have cut its old target off: start the next pass afresh.
        seen = rows.reach(entries);
    }
    report.unreachable_after = seen.iter().filter(|&&s| !s).count();
    Ok(report)
}

/// The rows being repaired.
struct Rows<'a> {
    ids: &'a mut [NodeId],
    degree: usize,
    n: usize,
}

impl Rows<'_> {
    fn row(&self, v: usize) -> &[NodeId] {
        &self.ids[v * self.degree..(v + 1) * self.degree]
    }

    fn in_degrees(&self) -> Result<Vec<u32>> {
        let mut d = vec![0u32; self.n];
        for (i, &w) in self.ids.iter().enumerate() {
            if w == INVALID {
                continue;
            }
            let slot = d.get_mut(w as usize).ok_or_else(|| {
                Error::InvalidGraph(format!(
                    "vertex {} has neighbour {w}, out of range (n = {})",
                    i / self.degree,
                    self.n
                ))
            })?;
            *slot += 1;
        }
        Ok(d)
    }

    /// Marks what `entries` reach.
    fn reach(&self, entries: &[NodeId]) -> Vec<bool> {
        let mut seen = vec![false; self.n];
        let mut stack = Vec::new();
        for &e in entries {
            self.flood(e, &mut seen, &mut stack);
        }
        seen
    }

    /// Marks `from` and everything it reaches through unmarked vertices.
    fn flood(&self, from: NodeId, seen: &mut [bool], stack: &mut Vec<NodeId>) {
        if seen[from as usize] {
            return;
        }
        seen[from as usize] = true;
        stack.push(from);
        while let Some(v) = stack.pop() {
            for &w in self.row(v as usize) {
                let wi = w as usize;
                if wi < self.n && !seen[wi] {
                    seen[wi] = true;
                    stack.push(w);
                }
            }
        }
    }

    /// Writes the edge `from -> to` (absent, `from != to`): into the row's first free slot,
    /// else over its farthest edge whose target keeps another in-edge (over the very last edge
    /// when none does). Returns whether an edge was replaced.
    fn link(&mut self, from: usize, to: NodeId, in_degree: &mut [u32]) -> bool {
        let d = self.degree;
        let row = &mut self.ids[from * d..(from + 1) * d];
        in_degree[to as usize] += 1;
        if let Some(slot) = row.iter().position(|&w| w == INVALID) {
            row[slot] = to;
            return false;
        }
        let slot = (0..d)
            .rev()
            .find(|&j| in_degree[row[j] as usize] > 1)
            .unwrap_or(d - 1);
        in_degree[row[slot] as usize] -= 1;
        row[slot] = to;
        true
    }
}

/// The beam search that finds a bridge's reachable end.
struct BridgeSearch {
    stamp: Vec<u32>,
    generation: u32,
    pool: Vec<(f32, NodeId, bool)>,
}

impl BridgeSearch {
    fn new(n: usize) -> Self {
        BridgeSearch {
            stamp: vec![0; n],
            generation: 0,
            pool: Vec::with_capacity(BRIDGE_BEAM + 1),
        }
    }

    /// The reachable vertex closest to `u` that a beam search from the entry points finds
    /// (following only reachable vertices).
    fn nearest_reachable<D: Fn(NodeId, NodeId) -> f32>(
        &mut self,
        rows: &Rows<'_>,
        entries: &[NodeId],
        seen: &[bool],
        u: NodeId,
        dist: &D,
    ) -> NodeId {
        if self.generation == u32::MAX {
            self.stamp.fill(0);
            self.generation = 0;
        }
        self.generation += 1;
        let g = self.generation;
        self.pool.clear();
        let offer = |pool: &mut Vec<(f32, NodeId, bool)>, stamp: &mut [u32], w: NodeId| {
            let wi = w as usize;
            if wi >= rows.n || !seen[wi] || stamp[wi] == g {
                return;
            }
            stamp[wi] = g;
            let d = dist(u, w);
            let d = if d.is_nan() { f32::INFINITY } else { d };
            if pool.len() == BRIDGE_BEAM {
                match pool.last() {
                    Some(worst) if d < worst.0 => {
                        pool.pop();
                    }
                    _ => return,
                }
            }
            let at = pool.partition_point(|c| (c.0, c.1) < (d, w));
            pool.insert(at, (d, w, false));
        };
        for &e in entries {
            offer(&mut self.pool, &mut self.stamp, e);
        }
        while let Some(i) = self.pool.iter().position(|c| !c.2) {
            self.pool[i].2 = true;
            let v = self.pool[i].1;
            for &w in rows.row(v as usize) {
                offer(&mut self.pool, &mut self.stamp, w);
            }
        }
        // Entries are reachable and valid, so the pool is never empty.
        self.pool.first().map_or(entries[0], |c| c.1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(n: usize) -> Vec<f32> {
        (0..n).map(|i| i as f32).collect()
    }

    #[test]
    fn spread_picks_cover_separated_clusters() {
        // Four tight clusters on a line, far apart: four picks land in four clusters.
        let mut v = Vec::new();
        for c in 0..4 {
            for i in 0..50 {
                v.push(1000.0 * c as f32 + i as f32 * 0.01);
            }
        }
        let data = DatasetView::new(&v, 200, 1).unwrap();
        let picks = spread_entry_points(data, Metric::L2Squared, 4, 3).unwrap();
        let mut clusters: Vec<usize> = picks.iter().map(|&p| p as usize / 50).collect();
        clusters.sort_unstable();
        assert_eq!(clusters, vec![0, 1, 2, 3]);
        assert_eq!(
            picks,
            spread_entry_points(data, Metric::L2Squared, 4, 3).unwrap()
        );
        assert!(
            spread_entry_points(data, Metric::L2Squared, 0, 3)
                .unwrap()
                .is_empty()
        );
        assert_eq!(
            spread_entry_points(data, Metric::InnerProduct, 500, 3)
                .unwrap()
                .len(),
            200
        );
    }

    #[test]
    fn repair_links_components_and_keeps_rows_valid() {
        // Three chains 0..10, 10..20, 20..30 on a line, each pointing forward only; entry 0.
        let n = 30;
        let degree = 2;
        let mut ids = vec![INVALID; n * degree];
        for v in 0..n {
            if v % 10 != 9 {
                ids[v * degree] = v as NodeId + 1;
            }
        }
        let data = line(n);
        let dist = |a: NodeId, b: NodeId| (data[a as usize] - data[b as usize]).powi(2);
        let report = repair_rows(&mut ids, degree, &[0], dist, &CancelToken::new()).unwrap();
        assert_eq!(report.unreachable_before, 20);
        assert_eq!(report.unreachable_after, 0);
        assert_eq!(report.bridges, 2);
        // The bridges come from the nearest reachable vertex: 9 -> 10 and 19 -> 20.
        assert!(ids[9 * degree..10 * degree].contains(&10));
        assert!(ids[19 * degree..20 * degree].contains(&20));
        for v in 0..n {
            let row = &ids[v * degree..(v + 1) * degree];
            assert!(!row.contains(&(v as NodeId)));
            let valid = row.iter().take_while(|&&w| w != INVALID).count();
            assert!(row[valid..].iter().all(|&w| w == INVALID));
        }
    }
}
