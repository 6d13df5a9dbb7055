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
//!   entry point as long as there are at most `count` such regions. A search starts from the
//!   best of them, i.e. in the query's own cluster: the GPU searches score them all, the CPU beam
//!   search finds the best through a small graph over them (`weft_search::EntryLayer`) once there
//!   are 64 or more.
//! - [`repair_connectivity`]: whatever is still unreachable from the entry points is linked in.
//!   An unreachable vertex whose row holds a reachable vertex `r` gets the reverse edge `r -> u`
//!   (a near neighbour of `u`: cheap and local). A component with no edge out of it gets a bridge
//!   from the reachable vertex nearest to it, found by a beam search over the reachable graph,
//!   and, where it costs no needed edge, the bridge's reverse edge, so that a search can leave the
//!   component too. Edges are written into free slots, else over a row's farthest edge that is
//!   not an edge of the breadth-first tree of what is reached (so no reached vertex is cut off).
//!
//! Both are deterministic for a seed and independent of the thread count.

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};

use rayon::prelude::*;
use weft_core::rng::{SplitMix64, hash3};
use weft_core::{
    BuildCtx, CancelToken, DatasetView, Element, Error, FixedDegreeGraph, GraphView, INVALID,
    Metric, NodeId, Result,
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
/// Frontier vertices per parallel task of the breadth-first search.
const REACH_CHUNK: usize = 256;
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

/// The last step of a fixed-degree search-graph builder: gives `graph` (built over `data`)
/// `entry_points` entry points spread over the data ([`spread_entry_points`], seeded by the
/// build's seed) and, with `repair`, makes every vertex reachable from them
/// ([`repair_connectivity`]; the report is all zero when `repair` is off). Runs on the current
/// rayon pool: call it inside [`BuildCtx::install`].
pub fn connect_graph<T: Element>(
    graph: FixedDegreeGraph,
    data: DatasetView<'_, T>,
    metric: Metric,
    entry_points: usize,
    repair: bool,
    ctx: &BuildCtx,
) -> Result<(FixedDegreeGraph, RepairReport)> {
    ctx.check_cancelled()?;
    let entries = spread_entry_points(data, metric, entry_points, ctx.seed())?;
    connect_graph_with_entries(graph, entries, data, metric, repair, ctx)
}

/// [`connect_graph`] with the entry points already picked by [`spread_entry_points`] (for a
/// builder that computes them on the host while a device builds the graph): gives `graph` the
/// `entries` and, with `repair`, makes every vertex reachable from them. Runs on the current
/// rayon pool.
pub fn connect_graph_with_entries<T: Element>(
    graph: FixedDegreeGraph,
    entries: Vec<NodeId>,
    data: DatasetView<'_, T>,
    metric: Metric,
    repair: bool,
    ctx: &BuildCtx,
) -> Result<(FixedDegreeGraph, RepairReport)> {
    ctx.check_cancelled()?;
    let mut graph = graph.with_entry_points(entries);
    let report = if repair {
        repair_connectivity(&mut graph, data, metric, ctx.cancel_token())?
    } else {
        RepairReport::default()
    };
    Ok((graph, report))
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
    /// Components linked by a bridge from the reachable vertex nearest to them (with the
    /// bridge's reverse edge where it costs no needed edge).
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
    rows.check_ids()?;
    // The common case, a graph already connected, needs no tree: count what the entry points
    // reach first (cheaper: no parents), and build the tree only when something is missing.
    report.unreachable_before = n - rows.count_reached(entries);
    if entries.is_empty() || report.unreachable_before == 0 {
        report.unreachable_after = report.unreachable_before;
        return Ok(report);
    }
    let mut tree = rows.reach(entries);
    let mut stack = Vec::new();
    let mut search = BridgeSearch::new(n);
    while report.passes < REPAIR_PASSES && tree.unreachable() > 0 {
        report.passes += 1;
        let mut forced = false;
        // Local links: an unreachable vertex with a reachable out-neighbour r gets r -> u.
        for u in 0..n {
            if !tree.reached(u)
                && let Some((r, replaced)) = rows.local_link(u, &tree)
            {
                report.replaced += usize::from(replaced);
                report.local_links += 1;
                rows.flood(r, u as NodeId, &mut tree, &mut stack);
            }
        }
        // Bridges: the rest lie in components with no edge out to the reachable part.
        for u in 0..n {
            if tree.reached(u) {
                continue;
            }
            cancel.check()?;
            if let Some((r, replaced)) = rows.local_link(u, &tree) {
                report.replaced += usize::from(replaced);
                report.local_links += 1;
                rows.flood(r, u as NodeId, &mut tree, &mut stack);
                continue;
            }
            let near = search.nearest_reachable(&rows, entries, &tree, u as NodeId, &dist);
            // The nearest found with room for the edge; else the nearest of all reachable
            // vertices with room (a scan, rare: only rows full of tree edges); else the nearest
            // found, over its last edge (the next pass repairs what that cuts off).
            let has_room = |r: NodeId| rows.slot_for(r as usize, &tree).is_some();
            let r = near
                .iter()
                .copied()
                .find(|&r| has_room(r))
                .or_else(|| {
                    (0..n as NodeId)
                        .filter(|&r| tree.reached(r as usize) && has_room(r))
                        .map(|r| (dist(u as NodeId, r), r))
                        .min_by(|a, b| a.0.total_cmp(&b.0))
                        .map(|(_, r)| r)
                })
                .unwrap_or(near[0]);
            // Only a link over a tree edge can cut reached vertices off.
            forced |= !has_room(r);
            report.replaced += usize::from(rows.link(r as usize, u as NodeId, &tree));
            // The way back, only where it costs no edge the graph needs.
            if let Some(slot) = rows.back_slot(u, &tree) {
                report.replaced += usize::from(rows.write(u, slot, r));
            }
            report.bridges += 1;
            rows.flood(r, u as NodeId, &mut tree, &mut stack);
        }
        // A forced replacement can have cut a subtree off: start the next pass afresh. Without
        // one, every edge replaced was off the tree, which now spans every vertex.
        if forced {
            tree = rows.reach(entries);
        }
    }
    report.unreachable_after = tree.unreachable();
    Ok(report)
}

/// A spanning tree of what the entry points reach: `parent[v]` is the vertex whose edge first
/// reached `v` ([`ROOT`] for an entry point, [`INVALID`] while unreached). Replacing an edge that
/// is not a tree edge never makes a reached vertex unreachable.
struct Tree {
    parent: Vec<NodeId>,
}

/// The parent of an entry point in a [`Tree`].
const ROOT: NodeId = INVALID - 1;

impl Tree {
    fn reached(&self, v: usize) -> bool {
        self.parent[v] != INVALID
    }

    fn unreachable(&self) -> usize {
        self.parent.iter().filter(|&&p| p == INVALID).count()
    }

    /// Whether the edge `from -> to` is a tree edge.
    fn is_tree_edge(&self, from: usize, to: NodeId) -> bool {
        self.parent[to as usize] as usize == from
    }
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

    /// Fails on an id that is neither a vertex nor padding (checked in parallel).
    fn check_ids(&self) -> Result<()> {
        let n = self.n;
        // A branch-free scan first (the common case: nothing wrong), the position only after.
        let out_of_range = |w: &NodeId| *w != INVALID && *w as usize >= n;
        let any_bad = self
            .ids
            .par_chunks(1 << 16)
            .any(|chunk| chunk.iter().fold(false, |acc, w| acc | out_of_range(w)));
        if !any_bad {
            return Ok(());
        }
        let bad = self.ids.iter().position(out_of_range);
        match bad {
            Some(i) => Err(Error::InvalidGraph(format!(
                "vertex {} has neighbour {}, out of range (n = {n})",
                i / self.degree,
                self.ids[i]
            ))),
            None => Ok(()),
        }
    }

    /// How many vertices `entries` reach (a parallel breadth-first search that records no
    /// parents; each vertex is claimed once, by whichever thread gets there first).
    fn count_reached(&self, entries: &[NodeId]) -> usize {
        let seen: Vec<AtomicBool> = (0..self.n).map(|_| AtomicBool::new(false)).collect();
        let mut frontier: Vec<NodeId> = entries
            .iter()
            .copied()
            .filter(|&e| !seen[e as usize].swap(true, Ordering::Relaxed))
            .collect();
        let mut reached = frontier.len();
        while !frontier.is_empty() {
            frontier = frontier
                .par_chunks(REACH_CHUNK)
                .flat_map_iter(|chunk| {
                    let mut next = Vec::new();
                    for &v in chunk {
                        for &w in self.row(v as usize) {
                            let Some(flag) = seen.get(w as usize) else {
                                continue;
                            };
                            // A plain load first: most edges lead to vertices already seen.
                            if !flag.load(Ordering::Relaxed) && !flag.swap(true, Ordering::Relaxed)
                            {
                                next.push(w);
                            }
                        }
                    }
                    next
                })
                .collect();
            reached += frontier.len();
        }
        reached
    }

    /// The breadth-first tree of what `entries` reach, level by level, each level's vertices
    /// expanded in parallel. A vertex's parent is the smallest vertex of the previous level with
    /// an edge to it, so the tree does not depend on the order of the parallel work.
    fn reach(&self, entries: &[NodeId]) -> Tree {
        const UNSEEN: u32 = u32::MAX;
        let level: Vec<AtomicU32> = (0..self.n).map(|_| AtomicU32::new(UNSEEN)).collect();
        let parent: Vec<AtomicU32> = (0..self.n).map(|_| AtomicU32::new(INVALID)).collect();
        let mut frontier: Vec<NodeId> = Vec::new();
        for &e in entries {
            if level[e as usize].swap(0, Ordering::Relaxed) == UNSEEN {
                parent[e as usize].store(ROOT, Ordering::Relaxed);
                frontier.push(e);
            }
        }
        let mut depth = 0u32;
        while !frontier.is_empty() {
            depth += 1;
            frontier = frontier
                .par_chunks(REACH_CHUNK)
                .flat_map_iter(|chunk| {
                    let mut next = Vec::new();
                    for &v in chunk {
                        for &w in self.row(v as usize) {
                            let wi = w as usize;
                            if wi >= self.n {
                                continue;
                            }
                            // Reached at an earlier level: nothing to claim (a plain load).
                            let seen_at = level[wi].load(Ordering::Relaxed);
                            if seen_at != UNSEEN && seen_at != depth {
                                continue;
                            }
                            let claimed = match level[wi].compare_exchange(
                                UNSEEN,
                                depth,
                                Ordering::Relaxed,
                                Ordering::Relaxed,
                            ) {
                                Ok(_) => {
                                    next.push(w);
                                    true
                                }
                                Err(l) => l == depth,
                            };
                            if claimed {
                                parent[wi].fetch_min(v, Ordering::Relaxed);
                            }
                        }
                    }
                    next
                })
                .collect();
        }
        Tree {
            parent: parent.into_iter().map(AtomicU32::into_inner).collect(),
        }
    }

    /// Marks `from` (just linked from the reached vertex `via`) and everything it reaches
    /// through unreached vertices, with their tree parents.
    fn flood(&self, via: NodeId, from: NodeId, tree: &mut Tree, stack: &mut Vec<NodeId>) {
        if tree.reached(from as usize) {
            return;
        }
        tree.parent[from as usize] = via;
        stack.push(from);
        while let Some(v) = stack.pop() {
            for &w in self.row(v as usize) {
                let wi = w as usize;
                if wi < self.n && !tree.reached(wi) {
                    tree.parent[wi] = v;
                    stack.push(w);
                }
            }
        }
    }

    /// Where row `from` can take a new edge without cutting anything: its first free slot,
    /// else its farthest edge that is not a tree edge.
    fn slot_for(&self, from: usize, tree: &Tree) -> Option<usize> {
        let row = self.row(from);
        row.iter().position(|&w| w == INVALID).or_else(|| {
            (0..self.degree)
                .rev()
                .find(|&j| !tree.is_tree_edge(from, row[j]))
        })
    }

    /// Where row `u` can take an optional edge: a free slot that leaves another one free, or
    /// (in a full row) an edge that is not a tree edge.
    fn back_slot(&self, u: usize, tree: &Tree) -> Option<usize> {
        match self.row(u).iter().position(|&w| w == INVALID) {
            Some(slot) => (slot + 1 < self.degree).then_some(slot),
            None => self.slot_for(u, tree),
        }
    }

    /// Writes `to` into slot `slot` of row `from`; returns whether an edge was replaced.
    fn write(&mut self, from: usize, slot: usize, to: NodeId) -> bool {
        std::mem::replace(&mut self.ids[from * self.degree + slot], to) != INVALID
    }

    /// Writes the edge `from -> to` (absent, `from != to`) where [`Rows::slot_for`] says, else
    /// over the row's last edge. Returns whether an edge was replaced.
    fn link(&mut self, from: usize, to: NodeId, tree: &Tree) -> bool {
        let slot = self.slot_for(from, tree).unwrap_or(self.degree - 1);
        self.write(from, slot, to)
    }

    /// For an unreached `u`: the edge `r -> u` from the first (closest) reached out-neighbour
    /// `r` of `u` with room for it. `None` when there is none (the caller bridges); else `r`
    /// and whether an edge was replaced.
    fn local_link(&mut self, u: usize, tree: &Tree) -> Option<(NodeId, bool)> {
        let r = self
            .row(u)
            .iter()
            .copied()
            .filter(|&w| (w as usize) < self.n && tree.reached(w as usize))
            .find(|&r| self.slot_for(r as usize, tree).is_some())?;
        Some((r, self.link(r as usize, u as NodeId, tree)))
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

    /// The reachable vertices closest to `u` that a beam search from the entry points finds
    /// (following only reachable vertices), nearest first; never empty.
    fn nearest_reachable<D: Fn(NodeId, NodeId) -> f32>(
        &mut self,
        rows: &Rows<'_>,
        entries: &[NodeId],
        tree: &Tree,
        u: NodeId,
        dist: &D,
    ) -> Vec<NodeId> {
        if self.generation == u32::MAX {
            self.stamp.fill(0);
            self.generation = 0;
        }
        self.generation += 1;
        let g = self.generation;
        self.pool.clear();
        let offer = |pool: &mut Vec<(f32, NodeId, bool)>, stamp: &mut [u32], w: NodeId| {
            let wi = w as usize;
            if wi >= rows.n || !tree.reached(wi) || stamp[wi] == g {
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
        self.pool.iter().map(|c| c.1).collect()
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

    #[test]
    fn repair_rejects_out_of_range_ids() {
        let mut ids = vec![1, 7, 0, INVALID];
        let r = repair_rows(&mut ids, 2, &[0], |_, _| 0.0, &CancelToken::new());
        assert!(matches!(r, Err(Error::InvalidGraph(_))));
        let mut ids = vec![1, INVALID, 0, INVALID];
        let r = repair_rows(&mut ids, 2, &[5], |_, _| 0.0, &CancelToken::new());
        assert!(matches!(r, Err(Error::InvalidGraph(_))));
    }

    #[test]
    fn repair_honours_cancellation() {
        let mut ids = vec![INVALID; 8];
        let cancel = CancelToken::new();
        cancel.cancel();
        let r = repair_rows(&mut ids, 2, &[0], |_, _| 0.0, &cancel);
        assert!(matches!(r, Err(Error::Cancelled)));
    }

    proptest::proptest! {
        #[test]
        fn repair_makes_every_vertex_reachable(
            n in 1usize..120,
            degree in 1usize..6,
            fill in 0usize..7,
            entries in 1usize..4,
            seed in proptest::prelude::any::<u64>(),
        ) {
            // Random rows (distinct, no self-loop, padding last) over points on a line.
            let mut rng = SplitMix64::new(seed);
            let mut ids = vec![INVALID; n * degree];
            for v in 0..n {
                let want = fill.min(degree).min(n - 1);
                let mut row: Vec<NodeId> = Vec::new();
                while row.len() < want {
                    let w = rng.below(n as u64) as NodeId;
                    if w as usize != v && !row.contains(&w) {
                        row.push(w);
                    }
                }
                ids[v * degree..v * degree + row.len()].copy_from_slice(&row);
            }
            let entry_ids: Vec<NodeId> =
                (0..entries).map(|_| rng.below(n as u64) as NodeId).collect();
            let xs: Vec<f32> = (0..n).map(|_| rng.below(1000) as f32).collect();
            let dist = |a: NodeId, b: NodeId| (xs[a as usize] - xs[b as usize]).abs();
            // The parent-free count agrees with the tree on the graph as drawn.
            let before = Rows { ids: &mut ids, degree, n };
            let reached = before.count_reached(&entry_ids);
            proptest::prop_assert_eq!(n - reached, before.reach(&entry_ids).unreachable());
            let report =
                repair_rows(&mut ids, degree, &entry_ids, dist, &CancelToken::new()).unwrap();
            proptest::prop_assert_eq!(report.unreachable_before, n - reached);
            let rows = Rows { ids: &mut ids, degree, n };
            let tree = rows.reach(&entry_ids);
            proptest::prop_assert_eq!(tree.unreachable(), 0, "{:?}", report);
            proptest::prop_assert_eq!(report.unreachable_after, 0);
            for v in 0..n {
                let row = rows.row(v);
                let valid = row.iter().take_while(|&&w| w != INVALID).count();
                proptest::prop_assert!(row[valid..].iter().all(|&w| w == INVALID));
                let mut sorted: Vec<NodeId> = row[..valid].to_vec();
                proptest::prop_assert!(!sorted.contains(&(v as NodeId)));
                sorted.sort_unstable();
                sorted.dedup();
                proptest::prop_assert_eq!(sorted.len(), valid);
            }
        }
    }
}
