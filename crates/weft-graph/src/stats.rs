//! Graph statistics and connectivity.
//!
//! - [`graph_stats`]: one pass over any [`GraphView`] giving out-degree histogram and summary,
//!   in-degree summary (with the number of vertices nobody points to), the fraction of vertices
//!   reachable from the entry points, and the strongly connected components (count and largest
//!   size), all in one serialisable [`GraphStats`].
//! - [`reachable_from`] / [`Reachability`]: which vertices a search started at given entry points
//!   can reach, for builders that repair connectivity (add an edge into an unreachable vertex, then
//!   [`Reachability::extend`] from it, repeat).
//!
//! Every traversal is iterative (graphs have millions of vertices, far deeper than a thread's
//! stack) and linear in the number of edges. Neighbour ids are checked: an id `>= n` is an
//! [`Error::InvalidGraph`], never a panic.

use std::sync::atomic::{AtomicU32, Ordering};

use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use weft_core::{Error, GraphView, NodeId, Result};

/// Minimum, mean and maximum of a degree distribution (all zero for an empty graph).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct DegreeSummary {
    /// Smallest degree.
    pub min: usize,
    /// Mean degree.
    pub mean: f64,
    /// Largest degree.
    pub max: usize,
}

/// Everything [`graph_stats`] measures.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GraphStats {
    /// Number of vertices.
    pub num_nodes: usize,
    /// The graph's declared maximum out-degree ([`GraphView::max_degree`]).
    pub max_degree: usize,
    /// Number of directed edges (valid neighbour slots).
    pub num_edges: u64,
    /// Out-degree summary.
    pub out_degree: DegreeSummary,
    /// `out_degree_histogram[d]` = number of vertices with out-degree `d`; its length is one more
    /// than the largest out-degree found (at least `max_degree + 1`).
    pub out_degree_histogram: Vec<u64>,
    /// In-degree summary.
    pub in_degree: DegreeSummary,
    /// Number of vertices with in-degree 0 (reachable only if they are entry points).
    pub zero_in_degree: usize,
    /// The entry points the reachability was measured from.
    pub entry_points: Vec<NodeId>,
    /// Number of vertices reachable from [`GraphStats::entry_points`] (entry points included).
    pub reachable: usize,
    /// `reachable / num_nodes` (1 for an empty graph).
    pub reachable_fraction: f64,
    /// Number of strongly connected components.
    pub scc_count: usize,
    /// Size of the largest strongly connected component.
    pub largest_scc: usize,
}

impl std::fmt::Display for GraphStats {
    /// A short human-readable summary, one line per aspect.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(
            f,
            "vertices: {}, max degree: {}, edges: {}",
            self.num_nodes, self.max_degree, self.num_edges
        )?;
        writeln!(
            f,
            "out-degree: min {}, mean {:.2}, max {}",
            self.out_degree.min, self.out_degree.mean, self.out_degree.max
        )?;
        writeln!(
            f,
            "in-degree: min {}, mean {:.2}, max {}, zero in-degree: {}",
            self.in_degree.min, self.in_degree.mean, self.in_degree.max, self.zero_in_degree
        )?;
        if self.entry_points.len() <= 8 {
            write!(f, "reachable from {:?}", self.entry_points)?;
        } else {
            write!(f, "reachable from {} entry points", self.entry_points.len())?;
        }
        writeln!(
            f,
            ": {} ({:.2}%)",
            self.reachable,
            100.0 * self.reachable_fraction
        )?;
        write!(
            f,
            "strongly connected components: {} (largest {})",
            self.scc_count, self.largest_scc
        )
    }
}

/// The entry points a traversal uses by default: the graph's own, or vertex 0 when it has none
/// (nothing for an empty graph).
pub fn default_entry_points<G: GraphView + ?Sized>(g: &G) -> Vec<NodeId> {
    let own = g.entry_points();
    if !own.is_empty() {
        own.to_vec()
    } else if g.num_nodes() > 0 {
        vec![0]
    } else {
        Vec::new()
    }
}

/// Computes [`GraphStats`] for `g`. Reachability is measured from `entry_points` when given and
/// non-empty, else from [`default_entry_points`].
///
/// Fails with [`Error::InvalidGraph`] when a neighbour id or an entry point is out of range.
/// Linear in vertices plus edges; the degree passes run on rayon's current pool.
pub fn graph_stats<G: GraphView + ?Sized>(
    g: &G,
    entry_points: Option<&[NodeId]>,
) -> Result<GraphStats> {
    let n = g.num_nodes();
    check_node_count(n)?;
    // Out-degrees and in-degrees, checking every id once.
    let (hist, in_deg) = degree_pass(g)?;
    let num_edges: u64 = hist.iter().enumerate().map(|(d, &c)| d as u64 * c).sum();
    let out_degree = if n == 0 {
        DegreeSummary::default()
    } else {
        DegreeSummary {
            min: hist.iter().position(|&c| c > 0).unwrap_or(0),
            mean: num_edges as f64 / n as f64,
            max: hist.iter().rposition(|&c| c > 0).unwrap_or(0),
        }
    };

    // In-degrees.
    let (in_min, in_max, zero_in_degree) = in_deg
        .par_iter()
        .with_min_len(4096)
        .fold(
            || (u32::MAX, 0u32, 0usize),
            |(lo, hi, z), &d| (lo.min(d), hi.max(d), z + usize::from(d == 0)),
        )
        .reduce(
            || (u32::MAX, 0u32, 0usize),
            |a, b| (a.0.min(b.0), a.1.max(b.1), a.2 + b.2),
        );
    drop(in_deg);
    let in_degree = if n == 0 {
        DegreeSummary::default()
    } else {
        DegreeSummary {
            min: in_min as usize,
            mean: num_edges as f64 / n as f64,
            max: in_max as usize,
        }
    };

    // Entry points.
    let entry_points = match entry_points {
        Some(e) if !e.is_empty() => e.to_vec(),
        _ => default_entry_points(g),
    };
    // Strongly connected components, and reachability: the depth-first search starts at the
    // entry points, so what it discovers from them is what they reach.
    let (mut scc_count, mut largest_scc) = (0usize, 0usize);
    let reachable = strongly_connected_components(g, &entry_points, |comp| {
        scc_count += 1;
        largest_scc = largest_scc.max(comp.len());
    })?;

    Ok(GraphStats {
        num_nodes: n,
        max_degree: g.max_degree(),
        num_edges,
        out_degree,
        out_degree_histogram: hist,
        in_degree,
        zero_in_degree,
        entry_points,
        reachable,
        reachable_fraction: if n == 0 {
            1.0
        } else {
            reachable as f64 / n as f64
        },
        scc_count,
        largest_scc,
    })
}

/// Total bytes the per-part in-degree arrays of [`degree_pass`] may take; beyond it the parts
/// share one array of atomic counters.
const PRIVATE_COUNTS_BUDGET: usize = 1 << 29;

/// Out-degree histogram of the rows in `range`, calling `inc(u)` for every neighbour `u`.
fn scan_rows<G: GraphView + ?Sized>(
    g: &G,
    range: std::ops::Range<usize>,
    mut inc: impl FnMut(usize),
) -> Result<Vec<u64>> {
    let n = g.num_nodes();
    let mut hist = vec![0u64; g.max_degree() + 1];
    for v in range {
        let nb = g.neighbors(v as NodeId);
        for &u in nb {
            if u as usize >= n {
                return Err(out_of_range(v, u, n));
            }
            inc(u as usize);
        }
        if nb.len() >= hist.len() {
            hist.resize(nb.len() + 1, 0);
        }
        hist[nb.len()] += 1;
    }
    Ok(hist)
}

fn add_hist(a: &mut Vec<u64>, b: &[u64]) {
    if b.len() > a.len() {
        a.resize(b.len(), 0);
    }
    for (x, y) in a.iter_mut().zip(b) {
        *x += y;
    }
}

/// The out-degree histogram and the in-degree of every vertex. The rows are split in one part
/// per thread; each part counts in-degrees in its own array (plain increments, no contention)
/// when they fit [`PRIVATE_COUNTS_BUDGET`], else all parts share atomic counters.
fn degree_pass<G: GraphView + ?Sized>(g: &G) -> Result<(Vec<u64>, Vec<u32>)> {
    let n = g.num_nodes();
    let parts = rayon::current_num_threads().clamp(1, n.max(1));
    let chunk = n.div_ceil(parts).max(1);
    let range = |p: usize| (p * chunk).min(n)..((p + 1) * chunk).min(n);
    if parts == 1 || parts * n * 4 <= PRIVATE_COUNTS_BUDGET {
        let results = (0..parts)
            .into_par_iter()
            .map(|p| {
                let mut counts = vec![0u32; n];
                let hist = scan_rows(g, range(p), |u| counts[u] += 1)?;
                Ok((hist, counts))
            })
            .collect::<Result<Vec<_>>>()?;
        let mut results = results.into_iter();
        let (mut hist, mut in_deg) = results
            .next()
            .unwrap_or_else(|| (vec![0; g.max_degree() + 1], Vec::new()));
        for (h, counts) in results {
            add_hist(&mut hist, &h);
            in_deg
                .par_iter_mut()
                .with_min_len(1 << 14)
                .zip(counts.par_iter())
                .for_each(|(a, b)| *a += b);
        }
        Ok((hist, in_deg))
    } else {
        let counts: Vec<AtomicU32> = (0..n).map(|_| AtomicU32::new(0)).collect();
        let hists = (0..parts)
            .into_par_iter()
            .map(|p| {
                scan_rows(g, range(p), |u| {
                    counts[u].fetch_add(1, Ordering::Relaxed);
                })
            })
            .collect::<Result<Vec<_>>>()?;
        let mut hist = vec![0u64; g.max_degree() + 1];
        for h in &hists {
            add_hist(&mut hist, h);
        }
        Ok((
            hist,
            counts.into_iter().map(AtomicU32::into_inner).collect(),
        ))
    }
}

fn check_node_count(n: usize) -> Result<()> {
    if n > weft_core::MAX_NODES {
        return Err(Error::InvalidGraph(format!(
            "{n} vertices exceed the id space ({} at most)",
            weft_core::MAX_NODES
        )));
    }
    Ok(())
}

fn out_of_range(v: usize, u: NodeId, n: usize) -> Error {
    Error::InvalidGraph(format!(
        "vertex {v} has neighbour {u}, out of range (n = {n})"
    ))
}

/// The vertices reachable from a set of sources, kept as a mask so that it can be extended after
/// the graph gains edges (connectivity repair).
#[derive(Clone, PartialEq, Eq)]
pub struct Reachability {
    visited: Vec<bool>,
    count: usize,
    queue: Vec<NodeId>,
}

impl std::fmt::Debug for Reachability {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reachability")
            .field("num_nodes", &self.visited.len())
            .field("num_reachable", &self.count)
            .finish()
    }
}

impl Reachability {
    /// Breadth-first search of `g` from `sources` (an empty slice reaches nothing).
    ///
    /// Fails with [`Error::InvalidGraph`] when a source or a neighbour id is out of range.
    pub fn new<G: GraphView + ?Sized>(g: &G, sources: &[NodeId]) -> Result<Self> {
        let n = g.num_nodes();
        check_node_count(n)?;
        let mut r = Reachability {
            visited: vec![false; n],
            count: 0,
            queue: Vec::new(),
        };
        r.extend(g, sources)?;
        Ok(r)
    }

    /// Continues the search from `sources` (typically vertices that just gained an in-edge from a
    /// reachable vertex) and returns how many vertices became reachable. `g` must have as many
    /// vertices as when this was created; edges may have been added.
    pub fn extend<G: GraphView + ?Sized>(&mut self, g: &G, sources: &[NodeId]) -> Result<usize> {
        let n = self.visited.len();
        if g.num_nodes() != n {
            return Err(Error::dim_mismatch(
                "reachability vertex count",
                n,
                g.num_nodes(),
            ));
        }
        let before = self.count;
        let queue = &mut self.queue;
        queue.clear();
        for &s in sources {
            let seen = self.visited.get_mut(s as usize).ok_or_else(|| {
                Error::InvalidGraph(format!("entry point {s} is out of range (n = {n})"))
            })?;
            if !*seen {
                *seen = true;
                queue.push(s);
            }
        }
        let mut head = 0;
        while head < queue.len() {
            let v = queue[head];
            head += 1;
            for &u in g.neighbors(v) {
                let seen = self
                    .visited
                    .get_mut(u as usize)
                    .ok_or_else(|| out_of_range(v as usize, u, n))?;
                if !*seen {
                    *seen = true;
                    queue.push(u);
                }
            }
        }
        self.count += queue.len();
        queue.clear();
        queue.shrink_to(1024);
        Ok(self.count - before)
    }

    /// Number of vertices of the graph.
    pub fn num_nodes(&self) -> usize {
        self.visited.len()
    }

    /// Number of reachable vertices (sources included).
    pub fn num_reachable(&self) -> usize {
        self.count
    }

    /// Whether `v` is reachable (false when out of range).
    pub fn is_reachable(&self, v: NodeId) -> bool {
        self.visited.get(v as usize).copied().unwrap_or(false)
    }

    /// The per-vertex mask.
    pub fn mask(&self) -> &[bool] {
        &self.visited
    }

    /// The unreachable vertices, ascending.
    pub fn unreachable(&self) -> Vec<NodeId> {
        self.visited
            .iter()
            .enumerate()
            .filter(|&(_, &r)| !r)
            .map(|(v, _)| v as NodeId)
            .collect()
    }
}

/// The vertices of `g` NOT reachable from `sources`, ascending (pass
/// [`default_entry_points`] for the graph's own). Builders connect these to repair the graph.
pub fn reachable_from<G: GraphView + ?Sized>(g: &G, sources: &[NodeId]) -> Result<Vec<NodeId>> {
    Ok(Reachability::new(g, sources)?.unreachable())
}

/// Strongly connected components: `(count, largest size)`, by an iterative Tarjan.
pub fn scc_summary<G: GraphView + ?Sized>(g: &G) -> Result<(usize, usize)> {
    let mut count = 0usize;
    let mut largest = 0usize;
    strongly_connected_components(g, &[], |comp| {
        count += 1;
        largest = largest.max(comp.len());
    })?;
    Ok((count, largest))
}

/// Labels every vertex with its strongly connected component: `labels[v]` is the component's
/// number, components numbered from 0 in the order Tarjan's algorithm completes them (a
/// component is numbered before any component that can reach it). Returns `(labels, count)`.
pub fn scc_labels<G: GraphView + ?Sized>(g: &G) -> Result<(Vec<u32>, usize)> {
    let mut labels = vec![u32::MAX; g.num_nodes()];
    let mut count = 0u32;
    strongly_connected_components(g, &[], |comp| {
        for &v in comp {
            labels[v as usize] = count;
        }
        count += 1;
    })?;
    Ok((labels, count as usize))
}

/// Iterative Tarjan: calls `on_component` with the vertices of each component as it completes.
/// The depth-first search starts from `first_roots` (in order) before the other vertices, so the
/// number of vertices discovered from them — returned — is the number reachable from them.
fn strongly_connected_components<G: GraphView + ?Sized>(
    g: &G,
    first_roots: &[NodeId],
    mut on_component: impl FnMut(&[NodeId]),
) -> Result<usize> {
    const UNSEEN: u32 = u32::MAX;
    // Once a vertex's component is emitted its `low` is set to DONE so that later edges into it
    // are ignored (it is no longer on the stack).
    const DONE: u32 = u32::MAX;
    let n = g.num_nodes();
    check_node_count(n)?;
    if let Some(&e) = first_roots.iter().find(|&&e| e as usize >= n) {
        return Err(Error::InvalidGraph(format!(
            "entry point {e} is out of range (n = {n})"
        )));
    }
    // `node[v] = [index, low]`: discovery order, and the lowest index reachable through the DFS
    // subtree plus one edge. Kept together: one cache miss per edge on large graphs.
    let mut node = vec![[UNSEEN, 0u32]; n];
    let mut stack: Vec<NodeId> = Vec::new();
    let mut calls: Vec<(NodeId, &[NodeId], usize)> = Vec::new();
    let mut next = 0u32;
    let mut search = |root: NodeId| -> Result<u32> {
        if node[root as usize][0] != UNSEEN {
            return Ok(next);
        }
        node[root as usize] = [next, next];
        next += 1;
        stack.push(root);
        calls.push((root, g.neighbors(root), 0));
        while let Some(frame) = calls.last_mut() {
            let (v, nb, pos) = (frame.0, frame.1, frame.2);
            if pos < nb.len() {
                frame.2 += 1;
                let w = nb[pos];
                let [wi, wl] = *node
                    .get(w as usize)
                    .ok_or_else(|| out_of_range(v as usize, w, n))?;
                if wi == UNSEEN {
                    node[w as usize] = [next, next];
                    next += 1;
                    stack.push(w);
                    calls.push((w, g.neighbors(w), 0));
                } else if wl != DONE {
                    // w is on the stack: an edge inside the current component.
                    let lv = &mut node[v as usize][1];
                    *lv = (*lv).min(wi);
                }
            } else {
                calls.pop();
                let [vi, lv] = node[v as usize];
                let emitted = lv == vi;
                if emitted {
                    let start = stack
                        .iter()
                        .rposition(|&x| x == v)
                        .expect("a vertex stays on the stack until its component is emitted");
                    on_component(&stack[start..]);
                    for &x in &stack[start..] {
                        node[x as usize][1] = DONE;
                    }
                    stack.truncate(start);
                }
                if let Some(parent) = calls.last()
                    && !emitted
                {
                    let lp = &mut node[parent.0 as usize][1];
                    *lp = (*lp).min(lv);
                }
            }
        }
        Ok(next)
    };
    let mut reached = 0;
    for &r in first_roots {
        reached = search(r)?;
    }
    for root in 0..n {
        search(root as NodeId)?;
    }
    Ok(reached as usize)
}
