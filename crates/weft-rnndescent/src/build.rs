//! The CPU builder.

use rayon::prelude::*;
use weft_core::prefetch::prefetch_slice;
use weft_core::rng::{SplitMix64, hash3};
use weft_core::{
    BuildCtx, DatasetView, Element, Error, FixedDegreeGraph, GraphBuilder, INVALID, MAX_NODES,
    Metric, NodeId, Params, Result,
};

use crate::RnnDescentParams;

/// One candidate of a neighbour list.
#[derive(Clone, Copy, Debug)]
struct Entry {
    id: NodeId,
    dist: f32,
    /// Not yet compared with the list's other entries ("new" in NN-Descent terms).
    new: bool,
}

/// One work item's output of a scatter: `(target, entry)` pairs grouped by target block (in
/// emission order within a block), in one allocation.
struct Buckets {
    items: Vec<(NodeId, Entry)>,
    /// Block `b`'s pairs are `items[starts[b]..starts[b + 1]]`.
    starts: Vec<u32>,
}

impl Buckets {
    /// Groups `pairs` by target block (a stable counting sort).
    fn new(pairs: &[(NodeId, Entry)], nblocks: usize, block_len: usize) -> Self {
        let mut starts = vec![0u32; nblocks + 1];
        for &(t, _) in pairs {
            starts[t as usize / block_len + 1] += 1;
        }
        for b in 0..nblocks {
            starts[b + 1] += starts[b];
        }
        let mut next = starts.clone();
        let none = Entry {
            id: INVALID,
            dist: 0.0,
            new: false,
        };
        let mut items = vec![(INVALID, none); pairs.len()];
        for &(t, e) in pairs {
            let slot = &mut next[t as usize / block_len];
            items[*slot as usize] = (t, e);
            *slot += 1;
        }
        Buckets { items, starts }
    }

    /// The pairs of target block `b`.
    fn block(&self, b: usize) -> &[(NodeId, Entry)] {
        &self.items[self.starts[b] as usize..self.starts[b + 1] as usize]
    }
}

/// Number of target blocks of the deterministic scatter (fixed, so results do not depend on the
/// thread count).
const BLOCKS: usize = 256;
/// Source vertices per work item of a scatter.
const SRC_CHUNK: usize = 256;

/// RNN-Descent on the CPU (name `rnndescent`), after Ono & Matsui's reference code (digest §2).
///
/// Random `S`-neighbour start, then `T1` outer iterations of `T2` UpdateNeighbors rounds with the
/// RNG rule and redirection (a pruned candidate `n` of `v`, beaten by a closer kept `n'`, becomes
/// the candidate `n' -> n`), new/old flags so old-old pairs are never compared twice, and
/// reverse edges with the in-degree cap `R` and out-degree cap `R` between outer iterations.
/// Every metric and element type.
///
/// **Deterministic** for a given seed whatever the thread count: rounds are Jacobi-style. Each
/// vertex's update reads only its own list and the data, the redirects it emits are collected in
/// source order and appended to their targets' lists in a fixed (source-vertex) order, which
/// also holds for reverse edges; all randomness comes from per-vertex streams of the seed. (The
/// reference code is Gauss-Seidel with per-vertex locks, so its output depends on scheduling;
/// redirects here become visible at the next round instead of within the same one.)
///
/// The output is a [`FixedDegreeGraph`] of degree [`RnnDescentParams::degree`] whose rows are
/// the closest entries of each final list, filled up to [`RnnDescentParams::fill_len`] entries
/// with the closest candidates pruned during the last outer iteration where the list is
/// shorter, ascending by distance, with
/// [`RnnDescentParams::entry_points`] entry points spread over the data; with
/// [`RnnDescentParams::repair`] every vertex is reachable from them.
///
/// Memory: the lists, during the last outer iteration the pruned candidates kept for filling
/// (at most `fill_len` per vertex), plus, for data of 16 MiB or more on Linux while that takes at most half
/// of the available memory, a copy of the data in transparent huge pages (fewer TLB misses on
/// the updates' scattered row reads; same values, same graph).
///
/// Cancellation is polled before every round and reverse-edge step; progress is one stage,
/// `rnndescent`, of `t1 * t2` rounds. Fields of [`RnnDescentParams`] marked "GPU only" are
/// ignored.
#[derive(Clone, Copy, Debug, Default)]
pub struct RnnDescentCpu;

impl GraphBuilder for RnnDescentCpu {
    type Params = RnnDescentParams;
    type Output = FixedDegreeGraph;

    fn name(&self) -> &'static str {
        "rnndescent"
    }

    fn build<T: Element>(
        &self,
        data: DatasetView<'_, T>,
        metric: Metric,
        params: &RnnDescentParams,
        ctx: &BuildCtx,
    ) -> Result<FixedDegreeGraph> {
        self.build_with_stats(data, metric, params, ctx)
            .map(|(g, _)| g)
    }
}

impl RnnDescentCpu {
    /// [`GraphBuilder::build`], also returning what the build did.
    pub fn build_with_stats<T: Element>(
        &self,
        data: DatasetView<'_, T>,
        metric: Metric,
        params: &RnnDescentParams,
        ctx: &BuildCtx,
    ) -> Result<(FixedDegreeGraph, BuildStats)> {
        let n = data.rows();
        if n == 0 {
            return Err(Error::InvalidInput(
                "cannot build a graph over an empty set".into(),
            ));
        }
        if n > MAX_NODES {
            return Err(Error::InvalidInput(format!(
                "{n} vectors exceed the largest indexable count {MAX_NODES}"
            )));
        }
        params.validate(n, data.dim())?;
        ctx.check_cancelled()?;
        data.check_finite()?;
        ctx.install(|| {
            let staged = data.copy_to_huge_pages();
            let data = staged.as_ref().map_or(data, |s| s.view());
            Builder::new(data, metric, params, ctx).run()
        })?
    }
}

/// The state of one build.
struct Builder<'a, T: Element> {
    data: DatasetView<'a, T>,
    metric: Metric,
    dist: weft_core::distance::DistanceFn<T>,
    params: &'a RnnDescentParams,
    ctx: &'a BuildCtx,
    lists: Vec<Vec<Entry>>,
    /// With [`RnnDescentParams::fill_fraction`] above 0, during the last outer iteration: per vertex, the
    /// closest candidates its updates pruned (at most `fill_len`, sorted by `(dist, id)`); else
    /// empty.
    pruned: Vec<Vec<Entry>>,
    stats: BuildStats,
}

/// What a build did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BuildStats {
    /// Distance evaluations between data points (initialisation and updates).
    pub distance_computations: u64,
    /// UpdateNeighbors rounds run (`t1 * t2`).
    pub rounds: u64,
    /// Edges of the final lists before the cut to the output degree.
    pub edges_before_cut: u64,
    /// Edges the export added from pruned candidates ([`RnnDescentParams::fill_fraction`]).
    pub filled_edges: u64,
    /// What the connectivity repair did (all zero when it was off).
    pub repair: weft_graph::RepairReport,
}

/// A key whose unsigned order is the order of `(dist.total_cmp, id)`.
#[inline]
fn dist_id_key(e: &Entry) -> u64 {
    let bits = e.dist.to_bits();
    // Negative values (sign set): all bits flipped; others: sign set. As `f32::total_cmp`.
    let ordered = if bits >> 31 == 1 {
        !bits
    } else {
        bits | 0x8000_0000
    };
    (u64::from(ordered) << 32) | u64::from(e.id)
}

/// Removes repeated ids from `list`, keeping the first copy of each in place and the order of
/// the kept ones; with `merge_new` a kept copy is "new" when any copy was. The ids seen go
/// through a small open-addressing table that stays in the L1 cache (an id-indexed array of all
/// vertices missed the cache on nearly every lookup).
fn dedup_ids(list: &mut Vec<Entry>, merge_new: bool) {
    let m = list.len();
    if m < 2 {
        return;
    }
    let bits = (2 * m).next_power_of_two().trailing_zeros().max(4);
    let size = 1usize << bits;
    let mut on_stack = [0u32; 256];
    let mut on_heap = Vec::new();
    let table: &mut [u32] = if size <= on_stack.len() {
        &mut on_stack[..size]
    } else {
        on_heap.resize(size, 0);
        &mut on_heap
    };
    let mask = size - 1;
    let mut len = 0;
    for i in 0..m {
        let e = list[i];
        let mut h = (e.id.wrapping_mul(0x9e37_79b1) >> (32 - bits)) as usize;
        loop {
            match table[h] {
                0 => {
                    // Slots hold `1 + position` of a kept entry (positions below `i`).
                    table[h] = len as u32 + 1;
                    list[len] = e;
                    len += 1;
                    break;
                }
                s if list[s as usize - 1].id == e.id => {
                    if merge_new {
                        list[s as usize - 1].new |= e.new;
                    }
                    break;
                }
                _ => h = (h + 1) & mask,
            }
        }
    }
    list.truncate(len);
}

/// Sorts `list` by (distance, id) and removes repeated ids, keeping one copy (the "new" one if
/// any copy is new, the smallest distance): one sort, then the first copy of each id in that
/// order is kept.
fn sort_dedup(list: &mut Vec<Entry>) {
    list.sort_unstable_by_key(dist_id_key);
    dedup_ids(list, true);
}

/// Fills `row` (sorted by `(dist, id)`, without repeats) up to `len` entries with the closest entries of `pruned` (sorted by `(dist, id)`) whose ids it lacks, and
/// leaves it sorted by `(dist, id)`.
fn fill_row(row: &mut Vec<Entry>, pruned: &[Entry], len: usize) {
    let kept = row.len();
    for &e in pruned {
        if row.len() >= len {
            break;
        }
        if !row[..kept].iter().any(|k| k.id == e.id) {
            row.push(e);
        }
    }
    if row.len() > kept {
        row.sort_unstable_by_key(dist_id_key);
    }
}

/// Appends `items[chunk][block]` (target, entry) pairs to `lists[target]`, in chunk order:
/// parallel over target blocks, deterministic.
fn scatter(lists: &mut [Vec<Entry>], items: &[Buckets]) {
    let block_len = lists.len().div_ceil(BLOCKS).max(1);
    lists
        .par_chunks_mut(block_len)
        .enumerate()
        .for_each(|(b, block)| {
            let base = b * block_len;
            for chunk in items {
                for &(t, e) in chunk.block(b) {
                    block[t as usize - base].push(e);
                }
            }
        });
}

impl<'a, T: Element> Builder<'a, T> {
    fn new(
        data: DatasetView<'a, T>,
        metric: Metric,
        params: &'a RnnDescentParams,
        ctx: &'a BuildCtx,
    ) -> Self {
        Builder {
            data,
            metric,
            dist: metric.distance_fn::<T>(),
            params,
            ctx,
            lists: Vec::new(),
            pruned: Vec::new(),
            stats: BuildStats::default(),
        }
    }

    #[inline]
    fn d(&self, a: NodeId, b: NodeId) -> f32 {
        // `+ 0.0` turns -0.0 into 0.0 so that equal distances compare equal bit for bit.
        self.dist
            .eval(self.data.row(a as usize), self.data.row(b as usize))
            + 0.0
    }

    fn run(mut self) -> Result<(FixedDegreeGraph, BuildStats)> {
        let p = self.params;
        let n = self.data.rows();
        let progress = self.ctx.progress();
        progress.begin("rnndescent", Some((p.t1 * p.t2) as u64));
        self.init();
        for t1 in 0..p.t1 {
            if p.fill_len() > 0 && t1 + 1 == p.t1 {
                self.pruned = vec![Vec::new(); n];
            }
            for _ in 0..p.t2 {
                self.ctx.check_cancelled()?;
                self.update_round();
                self.stats.rounds += 1;
                progress.advance(1);
            }
            if t1 + 1 != p.t1 || p.final_reverse_edges {
                self.ctx.check_cancelled()?;
                self.add_reverse_edges();
            }
        }
        progress.end();
        self.ctx.check_cancelled()?;

        let degree = p.degree;
        let mut ids = vec![INVALID; n * degree];
        let lists = std::mem::take(&mut self.lists);
        let mut pruned = std::mem::take(&mut self.pruned);
        pruned.resize_with(n, Vec::new);
        self.stats.edges_before_cut = lists.iter().map(|l| l.len() as u64).sum();
        let filled: u64 = ids
            .par_chunks_mut(degree)
            .zip(lists.into_par_iter().zip(pruned.into_par_iter()))
            .map(|(row, (mut list, pruned))| {
                sort_dedup(&mut list);
                list.truncate(degree);
                let kept = list.len();
                fill_row(&mut list, &pruned, p.fill_len());
                for (slot, e) in row.iter_mut().zip(&list) {
                    *slot = e.id;
                }
                (list.len() - kept) as u64
            })
            .sum();
        self.stats.filled_edges = filled;
        let (graph, repair) = weft_graph::connect_graph(
            FixedDegreeGraph::new(n, degree, ids)?,
            self.data,
            self.metric,
            p.entry_points,
            p.repair,
            self.ctx,
        )?;
        self.stats.repair = repair;
        Ok((graph, self.stats))
    }

    /// Random start: `min(S, n - 1)` distinct random neighbours per vertex, all new.
    fn init(&mut self) {
        let n = self.data.rows();
        let want = self.params.s.min(n - 1);
        let seed = self.ctx.seed();
        let lists: Vec<Vec<Entry>> = (0..n)
            .into_par_iter()
            .map_init(Vec::new, |perm: &mut Vec<NodeId>, v| {
                let mut rng = SplitMix64::new(hash3(seed, v as u64, 0x1a17));
                let mut ids: Vec<NodeId> = Vec::with_capacity(want);
                if want * 2 >= n - 1 {
                    // Small set: a partial Fisher-Yates shuffle of everything but v.
                    perm.clear();
                    perm.extend((0..n as NodeId).filter(|&u| u as usize != v));
                    for i in 0..want {
                        let j = i + rng.below((perm.len() - i) as u64) as usize;
                        perm.swap(i, j);
                    }
                    ids.extend_from_slice(&perm[..want]);
                } else {
                    while ids.len() < want {
                        let u = rng.below(n as u64) as NodeId;
                        if u as usize != v && !ids.contains(&u) {
                            ids.push(u);
                        }
                    }
                }
                ids.into_iter()
                    .map(|u| Entry {
                        id: u,
                        dist: self.d(v as NodeId, u),
                        new: true,
                    })
                    .collect()
            })
            .collect();
        self.stats.distance_computations += lists.iter().map(|l| l.len() as u64).sum::<u64>();
        self.lists = lists;
    }

    /// One UpdateNeighbors round over every vertex (digest §2.4), Jacobi-style.
    fn update_round(&mut self) {
        let n = self.data.rows();
        let block_len = n.div_ceil(BLOCKS).max(1);
        let nblocks = n.div_ceil(block_len);
        let p = self.params;
        let mut lists = std::mem::take(&mut self.lists);
        let mut pruned = std::mem::take(&mut self.pruned);
        // Before the last outer iteration (or without filling) there is no store: empty lists
        // that nothing is pushed to.
        let keep_pruned = !pruned.is_empty();
        let fill_len = p.fill_len();
        pruned.resize_with(n, Vec::new);
        let this = &*self;
        let (redirects, counts): (Vec<Buckets>, Vec<u64>) = lists
            .par_chunks_mut(SRC_CHUNK)
            .zip(pruned.par_chunks_mut(SRC_CHUNK))
            .map(|(chunk, store)| {
                let mut pruned_chunk = keep_pruned.then_some(store);
                let mut out: Vec<(NodeId, Entry)> = Vec::new();
                let mut kept: Vec<Entry> = Vec::new();
                let mut count = 0u64;
                for j in 0..chunk.len() {
                    // Start loading the rows of the next list that will be updated while this
                    // one is: the update is bound by memory latency, not arithmetic.
                    if let Some(next) = chunk.get(j + 1)
                        && next.iter().any(|e| e.new)
                    {
                        for e in next {
                            prefetch_slice(this.data.row(e.id as usize));
                        }
                    }
                    let list = &mut chunk[j];
                    // A list without new entries is sorted, deduplicated, at most `r` long and
                    // all old: the update would compare nothing and leave it as it is.
                    if !list.iter().any(|e| e.new) {
                        continue;
                    }
                    sort_dedup(list);
                    if p.truncate_updates {
                        list.truncate(p.r);
                    }
                    kept.clear();
                    for &e in list.iter() {
                        let mut keep = true;
                        for k in kept.iter() {
                            if p.new_old_flags && !e.new && !k.new {
                                continue;
                            }
                            let d = this.d(e.id, k.id);
                            count += 1;
                            let prune = if p.strict_prune {
                                d < e.dist
                            } else {
                                d <= e.dist
                            };
                            if prune {
                                keep = false;
                                if let Some(store) = pruned_chunk.as_deref_mut() {
                                    store[j].push(e);
                                }
                                out.push((
                                    k.id,
                                    Entry {
                                        id: e.id,
                                        dist: d,
                                        new: true,
                                    },
                                ));
                                break;
                            }
                        }
                        if keep {
                            kept.push(e);
                        }
                    }
                    list.clear();
                    list.extend(kept.iter().map(|e| Entry { new: false, ..*e }));
                    if let Some(store) = pruned_chunk.as_deref_mut() {
                        let store = &mut store[j];
                        sort_dedup(store);
                        store.truncate(fill_len);
                    }
                }
                (Buckets::new(&out, nblocks, block_len), count)
            })
            .unzip();
        self.stats.distance_computations += counts.iter().sum::<u64>();
        scatter(&mut lists, &redirects);
        self.lists = lists;
        if keep_pruned {
            self.pruned = pruned;
        }
    }

    /// AddReverseEdges with the reference code's semantics (digest §2.5): `w -> u` exists
    /// afterwards iff `{u, w}` were adjacent in either direction and `w` is among `u`'s `R`
    /// closest in- and out-neighbours; every list is then capped at `R`.
    fn add_reverse_edges(&mut self) {
        let n = self.data.rows();
        let r = self.params.r;
        let block_len = n.div_ceil(BLOCKS).max(1);
        let nblocks = n.div_ceil(block_len);
        // rev[w] += (u, d, flag) for every edge u -> w.
        let incoming = self.emit(nblocks, block_len, |u, e| (e.id, Entry { id: u, ..e }));
        let mut rev: Vec<Vec<Entry>> = vec![Vec::new(); n];
        scatter(&mut rev, &incoming);
        drop(incoming);
        // rev[u] += N_u as new, then sort, dedupe, cap at R (in-degree cap).
        let lists = std::mem::take(&mut self.lists);
        rev.par_iter_mut()
            .zip(lists.into_par_iter())
            .for_each(|(rv, out)| {
                rv.extend(out.into_iter().map(|e| Entry { new: true, ..e }));
                // A pair adjacent both ways yields one edge `w -> u` that already exists: it keeps
                // its own flag (the incoming copy), only true reverse edges are new. The first
                // copy of an id is the incoming one when there is one (incoming entries precede
                // the outgoing ones in `rv`).
                dedup_ids(rv, false);
                rv.sort_unstable_by_key(dist_id_key);
                rv.truncate(r);
            });
        // N_w += (u, d, flag) for every w in rev[u].
        self.lists = rev;
        let back = self.emit(nblocks, block_len, |u, e| (e.id, Entry { id: u, ..e }));
        let mut lists: Vec<Vec<Entry>> = vec![Vec::new(); n];
        scatter(&mut lists, &back);
        drop(back);
        lists.par_iter_mut().for_each(|l| {
            sort_dedup(l);
            l.truncate(r);
        });
        self.lists = lists;
    }

    /// For every entry `e` of every list `u`, the pair `f(u, e) = (target, entry)`, bucketed by
    /// target block in source order.
    fn emit(
        &self,
        nblocks: usize,
        block_len: usize,
        f: impl Fn(NodeId, Entry) -> (NodeId, Entry) + Sync,
    ) -> Vec<Buckets> {
        let f = &f;
        self.lists
            .par_chunks(SRC_CHUNK)
            .enumerate()
            .map(|(c, chunk)| {
                let out: Vec<(NodeId, Entry)> = chunk
                    .iter()
                    .enumerate()
                    .flat_map(|(i, list)| {
                        let u = (c * SRC_CHUNK + i) as NodeId;
                        list.iter().map(move |&e| f(u, e))
                    })
                    .collect();
                Buckets::new(&out, nblocks, block_len)
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use weft_core::GraphView;

    /// The two-sort version `sort_dedup` replaced.
    fn sort_dedup_reference(list: &mut Vec<Entry>) {
        list.sort_unstable_by(|a, b| a.id.cmp(&b.id).then(a.dist.total_cmp(&b.dist)));
        list.dedup_by(|later, kept| {
            if later.id == kept.id {
                kept.new |= later.new;
                true
            } else {
                false
            }
        });
        list.sort_unstable_by(|a, b| a.dist.total_cmp(&b.dist).then(a.id.cmp(&b.id)));
    }

    #[test]
    fn sort_dedup_matches_the_two_sort_version() {
        let dists = [-1.5, -0.0, 0.0, 0.25, 0.25, 1.0, 3.5, f32::INFINITY];
        let mut rng = SplitMix64::new(11);
        for round in 0..2000 {
            let len = rng.below(40) as usize;
            let ids = 1 + rng.below(30);
            let list: Vec<Entry> = (0..len)
                .map(|_| Entry {
                    id: rng.below(ids) as NodeId,
                    dist: dists[rng.below(dists.len() as u64) as usize],
                    new: rng.below(2) == 1,
                })
                .collect();
            let (mut a, mut b) = (list.clone(), list);
            sort_dedup(&mut a);
            sort_dedup_reference(&mut b);
            let key = |l: &[Entry]| -> Vec<(NodeId, u32, bool)> {
                l.iter().map(|e| (e.id, e.dist.to_bits(), e.new)).collect()
            };
            assert_eq!(key(&a), key(&b), "round {round}");
        }
    }

    #[test]
    fn dedup_ids_keeps_first_copies_in_order() {
        let mut rng = SplitMix64::new(5);
        for len in [0usize, 1, 2, 7, 100, 127, 128, 129, 300, 1000] {
            let list: Vec<Entry> = (0..len)
                .map(|_| Entry {
                    id: rng.below(1 + len as u64 / 2) as NodeId,
                    dist: 1.0,
                    new: rng.below(2) == 1,
                })
                .collect();
            for merge_new in [false, true] {
                let mut want: Vec<Entry> = Vec::new();
                for e in &list {
                    match want.iter_mut().find(|w| w.id == e.id) {
                        Some(w) => w.new |= merge_new && e.new,
                        None => want.push(*e),
                    }
                }
                let mut got = list.clone();
                dedup_ids(&mut got, merge_new);
                let key = |l: &[Entry]| -> Vec<(NodeId, bool)> {
                    l.iter().map(|e| (e.id, e.new)).collect()
                };
                assert_eq!(key(&got), key(&want), "len {len}, merge {merge_new}");
            }
        }
    }

    #[test]
    fn fill_row_keeps_the_kept_entries_and_adds_the_closest_missing_pruned_ones() {
        let e = |id: NodeId, dist: f32| Entry {
            id,
            dist,
            new: false,
        };
        let ids = |l: &[Entry]| -> Vec<NodeId> { l.iter().map(|e| e.id).collect() };
        // Kept: 5 (1.0), 9 (4.0); pruned, ascending: 7 (0.5), 9 (4.0, already kept), 2 (2.0),
        // 3 (3.0).
        let pruned = [e(7, 0.5), e(9, 4.0), e(2, 2.0), e(3, 3.0)];
        let mut row = vec![e(5, 1.0), e(9, 4.0)];
        fill_row(&mut row, &pruned, 4);
        assert_eq!(
            ids(&row),
            [7, 5, 2, 9],
            "sorted by distance, 9 not repeated"
        );
        // Never beyond `len`, never displacing a kept entry, nothing to do when already full.
        let mut row = vec![e(5, 1.0), e(9, 4.0), e(1, 5.0)];
        fill_row(&mut row, &pruned, 2);
        assert_eq!(ids(&row), [5, 9, 1]);
        let mut row = vec![e(5, 1.0)];
        fill_row(&mut row, &pruned, 0);
        assert_eq!(ids(&row), [5]);
        let mut row = Vec::new();
        fill_row(&mut row, &pruned, 10);
        assert_eq!(ids(&row), [7, 2, 3, 9]);
    }

    #[test]
    fn the_huge_page_copy_gives_the_same_graph() {
        let (n, dim) = (600, 12);
        let values: Vec<f32> = (0..n * dim)
            .map(|i| ((i * 7919 + i / dim * 31) % 997) as f32 * 0.01)
            .collect();
        let data = DatasetView::new(&values, n, dim).unwrap();
        let copy = data.copy_to_huge_pages_with_min(0);
        if cfg!(target_os = "linux") && copy.is_none() {
            // The kernel refused huge pages: nothing to compare.
            return;
        }
        let params = RnnDescentParams::default();
        let ctx = BuildCtx::new(3);
        let build = |view| {
            Builder::new(view, Metric::L2Squared, &params, &ctx)
                .run()
                .unwrap()
        };
        let (plain, plain_stats) = build(data);
        if let Some(copy) = copy {
            let view = copy.view();
            assert_eq!(view.row(n - 1), data.row(n - 1));
            let (staged, staged_stats) = build(view);
            assert_eq!(plain.ids(), staged.ids());
            assert_eq!(plain.entry_points(), staged.entry_points());
            assert_eq!(plain_stats, staged_stats);
        }
    }
}
