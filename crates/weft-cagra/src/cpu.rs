//! The CPU optimiser ([`CagraCpu`]) and the stage functions it is made of, which are also the
//! reference the GPU optimiser is tested against bit for bit.

use rayon::prelude::*;
use weft_core::{
    BuildCtx, DatasetView, Element, Error, FixedDegreeGraph, GraphOptimizer, INVALID, KnnGraph,
    Metric, NodeId, Params, Result,
};

use crate::CagraParams;

/// Rows handled between two cancellation checks and progress reports.
const CHUNK: usize = 4096;

/// An open-addressing table from neighbour id to rank in one k-NN row (linear probing, at least
/// twice as many slots as entries, so a probe sequence is short and the table stays in L1).
#[derive(Default)]
pub(crate) struct RankTable {
    keys: Vec<NodeId>,
    ranks: Vec<u32>,
    shift: u32,
}

impl RankTable {
    /// Empties the table and sizes it for `m` entries.
    fn reset(&mut self, m: usize) {
        let slots = (2 * m).next_power_of_two().max(2);
        self.keys.clear();
        self.keys.resize(slots, INVALID);
        self.ranks.resize(slots, 0);
        self.shift = 32 - slots.trailing_zeros();
    }

    #[inline]
    fn slot(&self, id: NodeId) -> usize {
        (id.wrapping_mul(0x9E37_79B1) >> self.shift) as usize
    }

    /// Inserts `id` with `rank`; returns false if `id` was already there.
    #[inline]
    fn insert(&mut self, id: NodeId, rank: u32) -> bool {
        let mask = self.keys.len() - 1;
        let mut s = self.slot(id);
        loop {
            let k = self.keys[s];
            if k == INVALID {
                self.keys[s] = id;
                self.ranks[s] = rank;
                return true;
            }
            if k == id {
                return false;
            }
            s = (s + 1) & mask;
        }
    }

    /// The rank of `id`, if it is in the table.
    #[inline]
    fn get(&self, id: NodeId) -> Option<u32> {
        let mask = self.keys.len() - 1;
        let mut s = self.slot(id);
        loop {
            let k = self.keys[s];
            if k == id {
                return Some(self.ranks[s]);
            }
            if k == INVALID {
                return None;
            }
            s = (s + 1) & mask;
        }
    }
}

/// The length of the valid prefix of a padded row.
#[inline]
pub(crate) fn valid_len(row: &[NodeId]) -> usize {
    row.iter().position(|&x| x == INVALID).unwrap_or(row.len())
}

/// Detour counts of row `a` of a k-NN graph (`ids`: `n * k` row-major, rows valid and sorted
/// by distance): `counts[r]` = the number of ranks `j < r` such that the `r`-th neighbour of `a`
/// is in the row of its `j`-th neighbour. Writes `counts[..m]` for the `m` valid entries of the
/// row and returns `m`.
///
/// Cost: the row's ids go into a [`RankTable`] (id -> rank), then every entry of the rows of
/// the first `m - 1` neighbours is looked up once: `O(m * k)` probes per row, where the naive
/// loop compares each of them with up to `m` entries of the row (`O(m^2 * k)`).
pub(crate) fn detour_counts_row(
    a: usize,
    ids: &[NodeId],
    k: usize,
    table: &mut RankTable,
    counts: &mut [u32],
) -> usize {
    let row = &ids[a * k..(a + 1) * k];
    let m = valid_len(row);
    table.reset(m);
    for (r, &id) in row[..m].iter().enumerate() {
        table.insert(id, r as u32);
    }
    counts[..m].fill(0);
    for (j, &dnode) in row[..m.saturating_sub(1)].iter().enumerate() {
        let drow = &ids[dnode as usize * k..(dnode as usize + 1) * k];
        for &b in drow {
            if b == INVALID {
                break;
            }
            if let Some(r) = table.get(b)
                && r as usize > j
            {
                counts[r as usize] += 1;
            }
        }
    }
    m
}

/// Rank-based pruning of one row: the `min(m, degree)` entries of `row[..m]` with the fewest
/// detours, ordered by (detour count, initial rank) ascending; the rest of `out` is padding.
pub(crate) fn prune_row(
    row: &[NodeId],
    counts: &[u32],
    m: usize,
    order: &mut Vec<u32>,
    out: &mut [NodeId],
) {
    order.clear();
    order.extend(0..m as u32);
    // Keys are distinct (the rank breaks ties), so an unstable sort is deterministic.
    order.sort_unstable_by_key(|&r| ((counts[r as usize] as u64) << 32) | r as u64);
    out.fill(INVALID);
    for (slot, &r) in out.iter_mut().zip(order.iter()) {
        *slot = row[r as usize];
    }
}

/// The reverse graph of a pruned graph (`pruned`: `n * degree`): `rev[v]` lists the sources `s`
/// with an edge `s -> v`, ordered by (position of `v` in the row of `s`, `s`) ascending and
/// capped at `degree`. Returns the rows (`n * degree`, padded) and the per-row counts.
pub fn reverse_graph(n: usize, degree: usize, pruned: &[NodeId]) -> (Vec<NodeId>, Vec<u32>) {
    let mut rev = vec![INVALID; n * degree];
    let mut counts = vec![0u32; n];
    for col in 0..degree {
        for src in 0..n {
            let dst = pruned[src * degree + col];
            if dst == INVALID {
                continue;
            }
            let c = &mut counts[dst as usize];
            if (*c as usize) < degree {
                rev[dst as usize * degree + *c as usize] = src as NodeId;
                *c += 1;
            }
        }
    }
    (rev, counts)
}

/// The merge of one node's pruned row `p` and reverse row `r` (`r`: the valid reverse edges,
/// best first) into `out` (`degree` slots): the first `h = degree / 2` pruned edges (protected),
/// then the reverse edges that are not among them in order, then the remaining pruned edges that
/// are not reverse edges in order, truncated to `degree` and padded.
pub(crate) fn merge_row(p: &[NodeId], r: &[NodeId], scratch: &mut Vec<NodeId>, out: &mut [NodeId]) {
    let degree = out.len();
    let m = valid_len(p);
    let hp = (degree / 2).min(m);
    out.fill(INVALID);
    let mut len = 0;
    let mut push = |x: NodeId| {
        if len < degree {
            out[len] = x;
            len += 1;
        }
    };
    for &x in &p[..hp] {
        push(x);
    }
    scratch.clear();
    scratch.extend_from_slice(&p[..hp]);
    scratch.sort_unstable();
    for &x in r {
        if scratch.binary_search(&x).is_err() {
            push(x);
        }
    }
    scratch.clear();
    scratch.extend_from_slice(r);
    scratch.sort_unstable();
    for &x in &p[hp..m] {
        if scratch.binary_search(&x).is_err() {
            push(x);
        }
    }
}

/// Gives an optimised graph of `data` its entry points ([`CagraParams::entry_points`], spread
/// over the data) and, with [`CagraParams::repair`], makes every vertex reachable from them:
/// the last step of the CPU and the GPU optimisers, so both give the same graph.
pub fn connect<T: Element>(
    graph: FixedDegreeGraph,
    data: DatasetView<'_, T>,
    metric: Metric,
    params: &CagraParams,
    ctx: &BuildCtx,
) -> Result<FixedDegreeGraph> {
    connect_entries(graph, None, data, metric, params, ctx)
}

/// [`connect`] with the entry points already picked
/// ([`weft_graph::connect::spread_entry_points`] with [`CagraParams::entry_points`] and the
/// build's seed), as the GPU optimiser does while the device works.
pub fn connect_with_entries<T: Element>(
    graph: FixedDegreeGraph,
    entries: Vec<NodeId>,
    data: DatasetView<'_, T>,
    metric: Metric,
    params: &CagraParams,
    ctx: &BuildCtx,
) -> Result<FixedDegreeGraph> {
    connect_entries(graph, Some(entries), data, metric, params, ctx)
}

/// [`connect`] (`entries` `None`: picked here) and [`connect_with_entries`].
fn connect_entries<T: Element>(
    graph: FixedDegreeGraph,
    entries: Option<Vec<NodeId>>,
    data: DatasetView<'_, T>,
    metric: Metric,
    params: &CagraParams,
    ctx: &BuildCtx,
) -> Result<FixedDegreeGraph> {
    let progress = ctx.progress();
    progress.begin(
        if entries.is_some() {
            "cagra: connectivity"
        } else {
            "cagra: entry points and connectivity"
        },
        None,
    );
    let (graph, _) = ctx.install(|| match entries {
        Some(e) => weft_graph::connect::connect_graph_with_entries(
            graph,
            e,
            data,
            metric,
            params.repair,
            ctx,
        ),
        None => {
            weft_graph::connect_graph(graph, data, metric, params.entry_points, params.repair, ctx)
        }
    })??;
    progress.end();
    Ok(graph)
}

/// Every intermediate result of the optimisation, for tests and for the GPU oracle.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Stages {
    /// Detour count of every k-NN edge (`n * k`, 0 for padding).
    pub detours: Vec<u32>,
    /// The pruned graph (`n * degree`, ordered by (detours, rank), padded).
    pub pruned: Vec<NodeId>,
    /// The reverse graph (`n * degree`, the first `reverse_counts[v]` entries of row `v` valid).
    pub reverse: Vec<NodeId>,
    /// Valid entries per reverse row.
    pub reverse_counts: Vec<u32>,
    /// The optimised graph (`n * degree`, padded).
    pub graph: Vec<NodeId>,
}

/// Checks that `knn` can be optimised to `degree`.
pub(crate) fn check_input(knn: &KnnGraph, degree: usize) -> Result<()> {
    if knn.n() == 0 {
        return Err(Error::InvalidInput("the k-NN graph is empty".into()));
    }
    if degree == 0 || degree > knn.k() {
        return Err(Error::invalid_param(
            "degree",
            format!(
                "output degree {degree} must be between 1 and the k-NN graph's degree {}",
                knn.k()
            ),
        ));
    }
    if knn.n() >= INVALID as usize {
        return Err(Error::InvalidInput(format!(
            "{} vertices exceed the id range",
            knn.n()
        )));
    }
    Ok(())
}

/// Runs every stage on the current thread pool and keeps every intermediate result (memory:
/// `n * k` counts on top of the graphs; [`CagraCpu`] keeps none of them).
pub fn optimize_stages(knn: &KnnGraph, degree: usize, ctx: &BuildCtx) -> Result<Stages> {
    check_input(knn, degree)?;
    knn.validate()?;
    let (n, k) = (knn.n(), knn.k());
    let ids = knn.ids();
    let mut detours = vec![0u32; n * k];
    let mut pruned = vec![INVALID; n * degree];
    ctx.install(|| {
        detours
            .par_chunks_mut(k)
            .zip(pruned.par_chunks_mut(degree))
            .enumerate()
            .for_each_init(
                || (RankTable::default(), Vec::new()),
                |(table, order), (a, (counts, out))| {
                    let m = detour_counts_row(a, ids, k, table, counts);
                    prune_row(&ids[a * k..], counts, m, order, out);
                },
            )
    })?;
    let (reverse, reverse_counts) = reverse_graph(n, degree, &pruned);
    let mut graph = vec![INVALID; n * degree];
    ctx.install(|| merge_all(&pruned, &reverse, &reverse_counts, degree, &mut graph))?;
    Ok(Stages {
        detours,
        pruned,
        reverse,
        reverse_counts,
        graph,
    })
}

/// [`merge_row`] for every node, in parallel.
fn merge_all(pruned: &[NodeId], rev: &[NodeId], counts: &[u32], degree: usize, out: &mut [NodeId]) {
    out.par_chunks_mut(degree)
        .enumerate()
        .for_each_init(Vec::new, |scratch, (v, row)| {
            let base = v * degree;
            merge_row(
                &pruned[base..base + degree],
                &rev[base..base + counts[v] as usize],
                scratch,
                row,
            );
        });
}

/// CAGRA graph optimisation on the CPU (rayon), name `cagra`: see the crate documentation for
/// the algorithm. The output does not depend on the thread count, and the GPU optimiser
/// reproduces it bit for bit.
#[derive(Clone, Copy, Debug, Default)]
pub struct CagraCpu;

impl CagraCpu {
    /// Optimises `knn` into a graph of out-degree `degree` (no dataset needed: only the ranks of
    /// the k-NN rows are used). The rows of `knn` must be sorted by distance, as
    /// [`KnnGraph::validate`] checks.
    pub fn optimize_knn(
        &self,
        knn: &KnnGraph,
        degree: usize,
        ctx: &BuildCtx,
    ) -> Result<FixedDegreeGraph> {
        check_input(knn, degree)?;
        ctx.check_cancelled()?;
        knn.validate()?;
        let (n, k) = (knn.n(), knn.k());
        let ids = knn.ids();
        let progress = ctx.progress();
        let mut pruned = vec![INVALID; n * degree];
        progress.begin("cagra: detour counting and pruning", Some(n as u64));
        for (c, chunk) in pruned.chunks_mut(CHUNK * degree).enumerate() {
            ctx.check_cancelled()?;
            let first = c * CHUNK;
            let rows = chunk.len() / degree;
            ctx.install(|| {
                chunk.par_chunks_mut(degree).enumerate().for_each_init(
                    || (RankTable::default(), Vec::new(), vec![0u32; k]),
                    |(table, order, counts), (i, out)| {
                        let a = first + i;
                        let m = detour_counts_row(a, ids, k, table, counts);
                        prune_row(&ids[a * k..], counts, m, order, out);
                    },
                )
            })?;
            progress.advance(rows as u64);
        }
        progress.end();
        ctx.check_cancelled()?;
        progress.begin("cagra: reverse edges and merge", None);
        let (rev, counts) = reverse_graph(n, degree, &pruned);
        ctx.check_cancelled()?;
        let mut graph = vec![INVALID; n * degree];
        ctx.install(|| merge_all(&pruned, &rev, &counts, degree, &mut graph))?;
        progress.end();
        FixedDegreeGraph::new(n, degree, graph)
    }
}

/// The checks both optimisers make before any work: the parameters against the data, and the
/// k-NN graph's vertex count against the data's rows.
pub(crate) fn check_optimize_inputs<T: Element>(
    data: DatasetView<'_, T>,
    knn: &KnnGraph,
    params: &CagraParams,
) -> Result<()> {
    params.validate(data.rows(), data.dim())?;
    if knn.n() != data.rows() {
        return Err(Error::dim_mismatch(
            "k-NN graph vertices vs data rows",
            data.rows(),
            knn.n(),
        ));
    }
    Ok(())
}

impl GraphOptimizer for CagraCpu {
    type Params = CagraParams;

    fn name(&self) -> &'static str {
        "cagra"
    }

    fn optimize<T: Element>(
        &self,
        data: DatasetView<'_, T>,
        metric: Metric,
        knn: &KnnGraph,
        degree: usize,
        params: &CagraParams,
        ctx: &BuildCtx,
    ) -> Result<FixedDegreeGraph> {
        check_optimize_inputs(data, knn, params)?;
        let graph = self.optimize_knn(knn, degree, ctx)?;
        connect(graph, data, metric, params, ctx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A k-NN graph with the given rows (distances 1, 2, 3, ...; padding after the ids).
    fn knn_of(rows: &[Vec<NodeId>], k: usize) -> KnnGraph {
        let n = rows.len();
        let mut ids = vec![INVALID; n * k];
        let mut dists = vec![f32::INFINITY; n * k];
        for (v, r) in rows.iter().enumerate() {
            for (j, &x) in r.iter().enumerate() {
                ids[v * k + j] = x;
                dists[v * k + j] = (j + 1) as f32;
            }
        }
        let g = KnnGraph::from_parts(n, k, ids, dists).unwrap();
        g.validate().unwrap();
        g
    }

    /// The naive cubic count: for each rank j, each entry of the row of the j-th neighbour is
    /// searched among the entries ranked after j.
    fn naive_detours(g: &KnnGraph) -> Vec<u32> {
        let (n, k) = (g.n(), g.k());
        let mut out = vec![0u32; n * k];
        for a in 0..n {
            let row = g.row_ids(a);
            let m = valid_len(row);
            for j in 0..m {
                let d = row[j] as usize;
                for &b in &g.row_ids(d)[..valid_len(g.row_ids(d))] {
                    for r in j + 1..m {
                        if row[r] == b {
                            out[a * k + r] += 1;
                            break;
                        }
                    }
                }
            }
        }
        out
    }

    #[test]
    fn hand_checked_five_node_graph() {
        let g = knn_of(
            &[
                vec![1, 2, 3],
                vec![2, 0, 4],
                vec![1, 3, 0],
                vec![4, 2, 1],
                vec![3, 1, 0],
            ],
            3,
        );
        let s = optimize_stages(&g, 2, &BuildCtx::new(0)).unwrap();
        assert_eq!(s.detours, vec![0, 1, 1, 0, 1, 0, 0, 0, 1, 0, 0, 2, 0, 1, 1]);
        assert_eq!(s.pruned, vec![1, 2, 2, 4, 1, 3, 4, 2, 3, 1]);
        assert_eq!(s.reverse_counts, vec![0, 2, 2, 2, 2]);
        let rev = |v: usize| &s.reverse[v * 2..v * 2 + s.reverse_counts[v] as usize];
        assert_eq!(rev(1), &[0, 2]);
        assert_eq!(rev(2), &[1, 0]);
        assert_eq!(rev(3), &[4, 2]);
        assert_eq!(rev(4), &[3, 1]);
        assert_eq!(s.graph, vec![1, 2, 2, 0, 1, 0, 4, 2, 3, 1]);
        let cpu = CagraCpu.optimize_knn(&g, 2, &BuildCtx::new(0)).unwrap();
        assert_eq!(cpu.ids(), &s.graph[..]);
    }

    #[test]
    fn merge_keeps_protected_half_then_reverse_then_rest() {
        let mut out = [0; 6];
        let mut scratch = Vec::new();
        // Protected 10, 11, 12; reverse 11 (skipped), 20, 13 (moves up), 21; rest 13 dropped
        // from its old place, 14 and 15 fill and 15 falls off the end.
        merge_row(
            &[10, 11, 12, 13, 14, 15],
            &[11, 20, 13, 21],
            &mut scratch,
            &mut out,
        );
        assert_eq!(out, [10, 11, 12, 20, 13, 21]);
        // A short pruned row and few reverse edges: no holes, padding at the end.
        let mut out = [0; 6];
        merge_row(
            &[10, INVALID, INVALID, INVALID, INVALID, INVALID],
            &[7],
            &mut scratch,
            &mut out,
        );
        assert_eq!(out, [10, 7, INVALID, INVALID, INVALID, INVALID]);
    }

    #[test]
    fn reverse_graph_orders_by_column_then_source_and_caps() {
        // Every node points at 0 first; the cap 2 keeps sources 1 and 2.
        let pruned = vec![1, 2, 0, 2, 0, 1, 0, 1];
        let (rev, counts) = reverse_graph(4, 2, &pruned);
        assert_eq!(counts, vec![2, 2, 2, 0]);
        assert_eq!(&rev[0..2], &[1, 2]);
        assert_eq!(&rev[2..4], &[0, 2]);
        assert_eq!(&rev[4..6], &[0, 1]);
    }

    fn random_rows(n: usize, k: usize, seed: u64, short: bool) -> Vec<Vec<NodeId>> {
        let mut rng = weft_core::rng::SplitMix64::new(seed);
        (0..n)
            .map(|v| {
                let m = if short && rng.below(4) == 0 {
                    rng.below(k as u64 + 1) as usize
                } else {
                    k
                };
                let mut row: Vec<NodeId> = Vec::new();
                while row.len() < m {
                    let x = rng.below(n as u64) as NodeId;
                    if x as usize != v && !row.contains(&x) {
                        row.push(x);
                    }
                }
                row
            })
            .collect()
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(48))]
        #[test]
        fn hashed_count_equals_naive_count(n in 2usize..60, k in 1usize..12, seed: u64, short: bool) {
            let k = k.min(n - 1);
            let g = knn_of(&random_rows(n, k, seed, short), k);
            let s = optimize_stages(&g, k, &BuildCtx::new(0)).unwrap();
            prop_assert_eq!(s.detours, naive_detours(&g));
        }
    }
}
