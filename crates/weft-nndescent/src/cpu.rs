//! NN-Descent on the CPU (rayon): [`NnDescentCpu`].
//!
//! # Algorithm
//! Dong, Charikar & Li (WWW 2011), "NNDescent-full", with pynndescent's engineering:
//! 1. **Initialisation**: `n_trees` random-projection trees; the points of each leaf are joined
//!    pairwise. Rows still short of `k` entries are filled with random points. Every entry
//!    starts NEW. (`n_trees = 0` gives Dong's random initialisation.)
//! 2. **Sampling** (per iteration): every vertex `v` gets up to `s = min(ceil(rho k),
//!    max_candidates)` NEW and `s` OLD candidates, drawn from its forward list *and* its reverse
//!    neighbours (`u` with `v` in `B[u]`) by random priorities; sampled forward NEW entries
//!    become OLD.
//! 3. **Local join**: for every vertex, all NEW-NEW pairs and NEW-OLD pairs are compared and
//!    each pair is offered to both lists (UpdateNN: rejected when not closer than the list's
//!    worst entry or already present).
//! 4. Stop when an iteration changes fewer than `delta * n * k` entries, or after `max_iters`.
//!
//! # Determinism (identical graphs for a seed, whatever the thread count)
//! - Sampling priorities are counter-based: the edge `{v, u}` has priority
//!   `hash3(seed, iteration, (min, max))`; each vertex keeps the `s` lowest `(priority, id)`
//!   keys, a set that does not depend on the order of insertion (forward candidates are pushed
//!   row by row, reverse ones bucketed by block of target rows and pushed block by block).
//! - RP trees draw from one seeded stream per tree; random fills from one stream per vertex.
//! - The joins (and the leaf joins) run over fixed chunks of vertices (leaves). Within a chunk
//!   the graph is read-only. A chunk is cut into [`JOIN_PARTS`] contiguous slices (a constant,
//!   not the thread count); the slices are emitted in parallel, each into its own buckets (one
//!   per block of ~1024 target rows), pre-filtered by the target's worst distance as of the
//!   chunk start and skipping pairs that both lists already hold. Distances from one vertex to
//!   its partners are computed four at a time ([`DistanceFn::eval_many`]).
//! - The blocks are then applied in parallel (disjoint rows); within a block the candidates are
//!   applied slice after slice, in emission order, by UpdateNN with ties broken by id. That
//!   order is the same for any number of threads, hence so is every list.
//! - The update count of an iteration (for `delta`) counts insertions minus evictions of entries
//!   inserted in the same iteration: the number of its insertions still present at its end.
//! - Results are bit-identical on one machine; the distance kernels are chosen at run time per
//!   instruction set (AVX-512 / AVX2 / scalar), so another CPU may round differently.
//!
//! # Memory
//! Besides the data and the `n x k` result (ids, distances, a flag byte per entry), the build
//! holds the sampled candidates (`2 n s` u64 keys), reverse-sample buffers bounded at
//! `SAMPLE_ROUND_EDGES` 12-byte edges (48 MiB), one chunk of join candidates bounded at
//! [`CHUNK_PAIRS`] pairs (two 12-byte candidates each, 48 MiB) and the RP trees (`n_trees * n`
//! ids). Measured: 1M x 128 f32, k = 32, defaults: peak RSS 1.25 GiB, 1.75x data plus graph.
//!
//! Builders assume finite data (check with [`DatasetView::check_finite`] upstream); NaN
//! distances would break the ordering of the lists but not memory safety.

use std::time::Instant;

use rayon::prelude::*;
use weft_core::distance::DistanceFn;
use weft_core::error::check_graph_k;
use weft_core::prefetch::prefetch_slice;
use weft_core::rng::{below, hash3};
use weft_core::{
    BuildCtx, DatasetView, Element, Error, INVALID, KnnGraph, KnnGraphBuilder, MAX_NODES, Metric,
    NodeId, Params, Result,
};

use crate::NnDescentParams;
use crate::rptree::{RpTree, build_forest};

/// Pairs compared per chunk at most (bounds the candidate buffer: 2 candidates of 12 bytes per
/// pair).
pub const CHUNK_PAIRS: usize = 1 << 21;

/// Contiguous slices of items per chunk, emitted in parallel and applied in slice order.
pub const JOIN_PARTS: usize = 64;

/// Flag of an entry that has not yet been sampled as NEW.
const NEW: u8 = 1;
/// Flag of an entry that has been sampled (or was never NEW).
const OLD: u8 = 0;
/// Flag of an entry inserted in the chunk being applied (becomes NEW afterwards).
const FRESH: u8 = 2;

/// CPU NN-Descent (see the [module docs](self)). Name: `nndescent`.
#[derive(Clone, Copy, Debug, Default)]
pub struct NnDescentCpu;

impl KnnGraphBuilder for NnDescentCpu {
    type Params = NnDescentParams;

    fn name(&self) -> &'static str {
        "nndescent"
    }

    fn build<T: Element>(
        &self,
        data: DatasetView<'_, T>,
        metric: Metric,
        k: usize,
        params: &NnDescentParams,
        ctx: &BuildCtx,
    ) -> Result<KnnGraph> {
        params.validate(data.rows(), data.dim())?;
        check_graph_k(k, data.rows())?;
        if data.rows() > MAX_NODES {
            return Err(Error::InvalidInput(format!(
                "{} points exceed the id range ({MAX_NODES})",
                data.rows()
            )));
        }
        ctx.check_cancelled()?;
        ctx.install(|| build_impl(data, metric, k, params, ctx))?
            .map(|(g, _)| g)
    }
}

/// What a build did, for benchmarks and tuning.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct BuildStats {
    /// List entries changed by each iteration (insertions still present at its end).
    pub updates: Vec<i64>,
    /// NN-Descent iterations run (after the initialisation).
    pub iterations: usize,
    /// Distances computed (initialisation included).
    pub distance_computations: u64,
    /// Candidates that passed the pre-filter and were offered to a list.
    pub candidates: u64,
    /// Seconds spent in the initialisation (trees, leaf joins, random fill).
    pub init_secs: f64,
    /// Seconds spent sampling candidates.
    pub sample_secs: f64,
    /// Seconds spent in local joins (distances and candidate emission).
    pub join_secs: f64,
    /// Seconds spent applying candidates to the lists.
    pub apply_secs: f64,
}

impl NnDescentCpu {
    /// Like [`KnnGraphBuilder::build`], also returning [`BuildStats`].
    pub fn build_with_stats<T: Element>(
        &self,
        data: DatasetView<'_, T>,
        metric: Metric,
        k: usize,
        params: &NnDescentParams,
        ctx: &BuildCtx,
    ) -> Result<(KnnGraph, BuildStats)> {
        params.validate(data.rows(), data.dim())?;
        check_graph_k(k, data.rows())?;
        ctx.check_cancelled()?;
        ctx.install(|| build_impl(data, metric, k, params, ctx))?
    }
}

/// A candidate entry `id` at `dist` for `target`'s list.
#[derive(Clone, Copy, Debug)]
struct Cand {
    target: NodeId,
    id: NodeId,
    dist: f32,
}

/// The graph under construction: rows sorted by `(dist, id)`, padded with `(inf, INVALID)`.
struct State {
    k: usize,
    ids: Vec<NodeId>,
    dists: Vec<f32>,
    flags: Vec<u8>,
    /// `worst[v] = dists[v * k + k - 1]`, compact for the pre-filter.
    worst: Vec<f32>,
}

impl State {
    fn new(n: usize, k: usize) -> Self {
        State {
            k,
            ids: vec![INVALID; n * k],
            dists: vec![f32::INFINITY; n * k],
            flags: vec![NEW; n * k],
            worst: vec![f32::INFINITY; n],
        }
    }
}

/// UpdateNN for one row: inserts `(id, dist)` unless it is not closer than the worst entry (ties
/// by id) or already present. Returns +1 for an insertion, 0 for a rejection, and 0 for an
/// insertion that evicted an entry inserted earlier in this iteration ([`FRESH`]), so that the
/// sum over an iteration is the number of its insertions still present at its end.
#[inline]
fn apply_one(
    ids: &mut [NodeId],
    dists: &mut [f32],
    flags: &mut [u8],
    id: NodeId,
    dist: f32,
) -> i64 {
    let k = ids.len();
    let (wd, wi) = (dists[k - 1], ids[k - 1]);
    if dist > wd || (dist == wd && id >= wi) {
        return 0;
    }
    if holds(ids, id) {
        return 0;
    }
    let evicted_fresh = wi != INVALID && flags[k - 1] == FRESH;
    let mut j = k - 1;
    while j > 0 && (dists[j - 1] > dist || (dists[j - 1] == dist && ids[j - 1] > id)) {
        ids[j] = ids[j - 1];
        dists[j] = dists[j - 1];
        flags[j] = flags[j - 1];
        j -= 1;
    }
    ids[j] = id;
    dists[j] = dist;
    flags[j] = FRESH;
    if evicted_fresh { 0 } else { 1 }
}

/// Where a work item sends its candidates: one bucket per block of target rows, pre-filtered
/// by the targets' worst distances as of the chunk start.
struct Sink<'a> {
    buckets: &'a mut [Vec<Cand>],
    /// log2 of the rows per bucket.
    block_shift: u32,
    worst: &'a [f32],
    /// The lists' ids as of the chunk start (read-only while the chunk emits).
    ids: &'a [NodeId],
    /// The degree.
    k: usize,
}

impl Sink<'_> {
    /// Writes to `out` the partners `b` of `a` worth a distance: those that `a`'s and `b`'s
    /// lists do not both hold already (`b`'s list is read only when `a`'s holds `b`). Returns
    /// their number.
    #[inline(always)]
    fn select<'b>(
        &self,
        a: NodeId,
        partners: impl Iterator<Item = &'b NodeId>,
        out: &mut [NodeId],
    ) -> usize {
        let k = self.k;
        let row_a = &self.ids[a as usize * k..(a as usize + 1) * k];
        let mut m = 0;
        for &b in partners {
            if holds(row_a, b) && holds(&self.ids[b as usize * k..(b as usize + 1) * k], a) {
                continue;
            }
            out[m] = b;
            m += 1;
        }
        m
    }

    /// Computes the distances from `a` to `bs` (four at a time) and offers every pair to both
    /// lists. Returns the number of distances.
    #[inline(always)]
    fn join_many<T: Element>(
        &mut self,
        a: NodeId,
        bs: &[NodeId],
        dist: &DistanceFn<T>,
        data: &DatasetView<'_, T>,
    ) -> u64 {
        let mut out = [0.0f32; 64];
        for chunk in bs.chunks(64) {
            dist.eval_many(data.row(a as usize), *data, chunk, &mut out);
            for (&b, &d) in chunk.iter().zip(&out) {
                self.offer_masked(a, b, d, true, true);
            }
        }
        bs.len() as u64
    }

    /// Offers `b` to `a`'s list (if `to_a`) and `a` to `b`'s list (if `to_b`).
    #[inline(always)]
    fn offer_masked(&mut self, a: NodeId, b: NodeId, d: f32, to_a: bool, to_b: bool) {
        if to_a && d <= self.worst[a as usize] {
            self.buckets[a as usize >> self.block_shift].push(Cand {
                target: a,
                id: b,
                dist: d,
            });
        }
        if to_b && d <= self.worst[b as usize] {
            self.buckets[b as usize >> self.block_shift].push(Cand {
                target: b,
                id: a,
                dist: d,
            });
        }
    }
}

/// Candidate buffers reused across chunks: `parts x blocks` vectors.
#[derive(Default)]
struct Pool {
    parts: Vec<Vec<Vec<Cand>>>,
}

/// Runs `emit` over `0..items` in chunks of `chunk`, applying each chunk's candidates before the
/// next chunk. Returns (net insertions, distance computations).
///
/// The outcome does not depend on how items are split among threads: the graph is read-only
/// while a chunk emits, the chunk is cut into a constant number of slices, and each block
/// applies its candidates slice after slice in emission order.
fn run_chunks<F>(
    state: &mut State,
    items: usize,
    chunk: usize,
    pool: &mut Pool,
    ctx: &BuildCtx,
    stats: &mut BuildStats,
    emit: F,
) -> Result<i64>
where
    F: Fn(usize, &mut Sink<'_>) -> u64 + Sync,
{
    let k = state.k;
    let n = state.worst.len();
    let threads = rayon::current_num_threads();
    // A fixed number of parts, independent of the thread count: candidates reach each block in
    // the same order whatever the threads.
    let nparts = JOIN_PARTS;
    // Blocks of about 1024 rows (a few hundred KB of lists: applied in cache).
    // (A power of two: the bucket of a row is a shift away.)
    let rows_per_block = 1024.min(n.div_ceil(threads * 4)).next_power_of_two();
    let block_shift = rows_per_block.trailing_zeros();
    let nblocks = n.div_ceil(rows_per_block);
    pool.parts.resize_with(nparts, Vec::new);
    for p in &mut pool.parts {
        p.resize_with(nblocks, Vec::new);
    }
    let mut updates = 0;
    let mut start = 0;
    while start < items {
        ctx.check_cancelled()?;
        let end = (start + chunk).min(items);
        let sub = (end - start).div_ceil(nparts);
        let worst = &state.worst[..];
        let ids_ro = &state.ids[..];
        let t0 = Instant::now();
        stats.distance_computations += pool
            .parts
            .par_iter_mut()
            .enumerate()
            .map(|(p, buckets)| {
                for b in buckets.iter_mut() {
                    b.clear();
                }
                let lo = (start + p * sub).min(end);
                let hi = (lo + sub).min(end);
                let mut sink = Sink {
                    buckets,
                    block_shift,
                    worst,
                    ids: ids_ro,
                    k,
                };
                (lo..hi).map(|i| emit(i, &mut sink)).sum::<u64>()
            })
            .sum::<u64>();
        let t1 = Instant::now();
        stats.join_secs += (t1 - t0).as_secs_f64();
        let parts = &pool.parts;
        stats.candidates += parts.iter().flatten().map(|b| b.len() as u64).sum::<u64>();
        updates += state
            .ids
            .par_chunks_mut(rows_per_block * k)
            .zip(state.dists.par_chunks_mut(rows_per_block * k))
            .zip(state.flags.par_chunks_mut(rows_per_block * k))
            .zip(state.worst.par_chunks_mut(rows_per_block))
            .enumerate()
            .map(|(b, (((ids, dists), flags), worst))| {
                let first = b * rows_per_block;
                let mut count = 0i64;
                for part in parts {
                    for c in &part[b] {
                        let r = c.target as usize - first;
                        let row = r * k..(r + 1) * k;
                        count += apply_one(
                            &mut ids[row.clone()],
                            &mut dists[row.clone()],
                            &mut flags[row],
                            c.id,
                            c.dist,
                        );
                        worst[r] = dists[r * k + k - 1];
                    }
                }
                count
            })
            .sum::<i64>();
        stats.apply_secs += t1.elapsed().as_secs_f64();
        start = end;
    }
    Ok(updates)
}

/// Whether `row` holds `id`: a branch-free scan that vectorises (rows are short).
#[inline(always)]
fn holds(row: &[NodeId], id: NodeId) -> bool {
    row.iter().fold(false, |acc, &x| acc | (x == id))
}

/// The distance of the pair `{a, b}`, always evaluated with the smaller id first.
#[inline(always)]
fn pair_dist<T: Element>(
    dist: &DistanceFn<T>,
    data: &DatasetView<'_, T>,
    a: NodeId,
    b: NodeId,
) -> f32 {
    let (x, y) = if a < b { (a, b) } else { (b, a) };
    dist.eval(data.row(x as usize), data.row(y as usize))
}

/// Inserts `key` into the ascending, `u64::MAX`-padded array `heap` if it is among its smallest
/// (a bounded priority queue whose content does not depend on the order of insertion).
#[inline]
fn push_key(heap: &mut [u64], key: u64) {
    let c = heap.len();
    if key >= heap[c - 1] {
        return;
    }
    let pos = heap.partition_point(|&x| x < key);
    if heap[pos] == key {
        return;
    }
    heap.copy_within(pos..c - 1, pos + 1);
    heap[pos] = key;
}

/// The sampling priority of the edge `{a, b}` in iteration `iter`.
#[inline(always)]
fn priority(seed: u64, iter: u64, a: NodeId, b: NodeId) -> u64 {
    let (lo, hi) = if a < b { (a, b) } else { (b, a) };
    hash3(seed, iter, (u64::from(lo) << 32) | u64::from(hi)) >> 32
}

/// A reverse edge `src -> target` waiting to be pushed into `target`'s sample.
#[derive(Clone, Copy)]
struct RevEdge {
    target: NodeId,
    priority: u32,
    src: NodeId,
}

/// Source rows whose reverse edges are buffered at once (bounds the buffers at
/// `SAMPLE_ROUND_EDGES` edges of 12 bytes).
const SAMPLE_ROUND_EDGES: usize = 1 << 22;

/// Reverse-edge buffers reused across iterations: `parts x blocks x {new, old}`.
#[derive(Default)]
struct SamplePool {
    parts: Vec<Vec<[Vec<RevEdge>; 2]>>,
}

/// Builds the NEW and OLD candidate samples of every vertex (`s` keys per vertex, ascending
/// `(priority << 32) | id`, padded with `u64::MAX`) and marks sampled forward NEW entries OLD.
/// Returns whether any NEW candidate exists.
///
/// Forward candidates are pushed row by row; reverse ones are first scattered into buckets by
/// block of target rows, then pushed block by block (cache-friendly). A sample is the set of
/// the `s` smallest keys, whatever the order of the pushes.
fn sample(
    state: &mut State,
    s: usize,
    seed: u64,
    iter: u64,
    new_keys: &mut [u64],
    old_keys: &mut [u64],
    pool: &mut SamplePool,
) -> bool {
    let k = state.k;
    let n = state.worst.len();
    let threads = rayon::current_num_threads();
    let rows_per_block = (32_768 / s).clamp(64, n.max(64)).next_power_of_two();
    let block_shift = rows_per_block.trailing_zeros();
    let nblocks = n.div_ceil(rows_per_block);
    let round_rows = (SAMPLE_ROUND_EDGES / k).max(1);
    let (ids, flags) = (&state.ids[..], &state.flags[..]);
    new_keys.fill(u64::MAX);
    old_keys.fill(u64::MAX);
    let mut round_start = 0;
    while round_start < n {
        let round_end = (round_start + round_rows).min(n);
        let nparts = (threads * 4).min(round_end - round_start);
        let rows_per_part = (round_end - round_start).div_ceil(nparts);
        pool.parts.resize_with(nparts, Vec::new);
        for p in &mut pool.parts {
            p.resize_with(nblocks, Default::default);
            for b in p.iter_mut() {
                b[0].clear();
                b[1].clear();
            }
        }
        // Forward pushes and reverse scatter, by part of the round's rows.
        new_keys[round_start * s..round_end * s]
            .par_chunks_mut(rows_per_part * s)
            .zip(old_keys[round_start * s..round_end * s].par_chunks_mut(rows_per_part * s))
            .zip(pool.parts.par_iter_mut())
            .enumerate()
            .for_each(|(p, ((nk, ok), buckets))| {
                let lo = round_start + p * rows_per_part;
                let hi = (lo + rows_per_part).min(round_end);
                for i in lo..hi {
                    let r = i - lo;
                    let row = &ids[i * k..(i + 1) * k];
                    let frow = &flags[i * k..(i + 1) * k];
                    for (&u, &f) in row.iter().zip(frow) {
                        if u == INVALID {
                            break;
                        }
                        let pr = priority(seed, iter, i as NodeId, u);
                        let which = usize::from(f == OLD);
                        let heap = if which == 0 { &mut *nk } else { &mut *ok };
                        push_key(&mut heap[r * s..(r + 1) * s], (pr << 32) | u64::from(u));
                        buckets[u as usize >> block_shift][which].push(RevEdge {
                            target: u,
                            priority: pr as u32,
                            src: i as NodeId,
                        });
                    }
                }
            });
        // Reverse pushes, by block of target rows.
        let parts = &pool.parts;
        new_keys
            .par_chunks_mut(rows_per_block * s)
            .zip(old_keys.par_chunks_mut(rows_per_block * s))
            .enumerate()
            .for_each(|(b, (nk, ok))| {
                let first = b * rows_per_block;
                for part in parts {
                    for (which, heap) in [(0, &mut *nk), (1, &mut *ok)] {
                        for e in &part[b][which] {
                            let r = e.target as usize - first;
                            let key = (u64::from(e.priority) << 32) | u64::from(e.src);
                            push_key(&mut heap[r * s..(r + 1) * s], key);
                        }
                    }
                }
            });
        round_start = round_end;
    }
    // Sampled forward NEW entries become OLD.
    let new_keys = &*new_keys;
    state
        .ids
        .par_chunks(k)
        .zip(state.flags.par_chunks_mut(k))
        .enumerate()
        .map(|(i, (row, frow))| {
            let heap = &new_keys[i * s..(i + 1) * s];
            for (&u, f) in row.iter().zip(frow.iter_mut()) {
                if *f != OLD {
                    let key = (priority(seed, iter, i as NodeId, u) << 32) | u64::from(u);
                    *f = if heap.binary_search(&key).is_ok() {
                        OLD
                    } else {
                        NEW
                    };
                }
            }
            heap[0] != u64::MAX
        })
        .reduce(|| false, |a, b| a | b)
}

/// Fills every row still short of `k` entries with random distinct points (one stream per
/// vertex). Returns the distances computed.
fn random_fill<T: Element>(
    state: &mut State,
    data: DatasetView<'_, T>,
    metric: Metric,
    seed: u64,
) -> u64 {
    let k = state.k;
    let n = data.rows();
    let dist = metric.distance_fn::<T>();
    state
        .ids
        .par_chunks_mut(k)
        .zip(state.dists.par_chunks_mut(k))
        .zip(state.flags.par_chunks_mut(k))
        .zip(state.worst.par_iter_mut())
        .enumerate()
        .map(|(v, (((ids, dists), flags), worst))| {
            let mut missing = ids.iter().filter(|&&x| x == INVALID).count();
            let mut computed = 0u64;
            let mut attempt = 0u64;
            while missing > 0 {
                let u = below(hash3(seed, 0x6669_6c6c ^ v as u64, attempt), n as u64) as NodeId;
                attempt += 1;
                if u as usize == v || ids.contains(&u) {
                    continue;
                }
                let d = pair_dist(&dist, &data, v as NodeId, u);
                computed += 1;
                // The row has padding left, so the insertion always succeeds.
                apply_one(ids, dists, flags, u, d);
                missing -= 1;
            }
            *worst = dists[k - 1];
            computed
        })
        .sum()
}

/// The whole build, on the context's thread pool.
fn build_impl<T: Element>(
    data: DatasetView<'_, T>,
    metric: Metric,
    k: usize,
    params: &NnDescentParams,
    ctx: &BuildCtx,
) -> Result<(KnnGraph, BuildStats)> {
    let n = data.rows();
    let seed = ctx.seed();
    let dist = metric.distance_fn::<T>();
    let mut state = State::new(n, k);
    let mut pool = Pool::default();
    let mut stats = BuildStats::default();
    let progress = ctx.progress();
    let t_init = Instant::now();
    progress.begin("nndescent", Some(params.max_iters as u64 + 1));

    // The order in which the joins visit vertices: the first tree's leaf order when there are
    // trees (neighbours are then processed close together in time), else `0..n`.
    let mut order: Vec<NodeId> = Vec::new();
    // 1. Initialisation: RP-tree leaves, then random fill.
    if params.n_trees > 0 {
        let leaf = params.leaf_size_for(k).min(n);
        let forest: Vec<RpTree> = build_forest(data, metric, leaf, params.n_trees, seed);
        ctx.check_cancelled()?;
        order = forest[0].perm.clone();
        let pair_per_leaf = (leaf * (leaf - 1) / 2).max(1);
        let chunk = (CHUNK_PAIRS / pair_per_leaf).max(1);
        for tree in &forest {
            run_chunks(
                &mut state,
                tree.leaves(),
                chunk,
                &mut pool,
                ctx,
                &mut stats,
                |l, sink| {
                    if l + 1 < tree.leaves() {
                        for &u in tree.leaf(l + 1) {
                            prefetch_slice(data.row(u as usize));
                        }
                    }
                    let leaf = tree.leaf(l);
                    let mut bs = vec![0 as NodeId; leaf.len()];
                    let mut c = 0;
                    for (a_i, &a) in leaf.iter().enumerate() {
                        let m = sink.select(a, leaf[a_i + 1..].iter(), &mut bs);
                        c += sink.join_many(a, &bs[..m], &dist, &data);
                    }
                    c
                },
            )?;
        }
    }
    stats.distance_computations += random_fill(&mut state, data, metric, seed);
    // Every entry starts NEW (the leaf joins marked inserted ones NEW already).
    state.flags.fill(NEW);
    stats.init_secs = t_init.elapsed().as_secs_f64();
    progress.advance(1);

    // 2.-4. Iterations.
    let s = params.sample_size(k);
    let mut sample_pool = SamplePool::default();
    let mut new_keys = vec![u64::MAX; n * s];
    let mut old_keys = vec![u64::MAX; n * s];
    let chunk = (CHUNK_PAIRS / (s * s * 3 / 2).max(1)).max(1);
    let threshold = (f64::from(params.delta) * n as f64 * k as f64) as i64;
    for iter in 0..params.max_iters {
        ctx.check_cancelled()?;
        stats.iterations += 1;
        let t0 = Instant::now();
        let any_new = sample(
            &mut state,
            s,
            seed,
            iter as u64,
            &mut new_keys,
            &mut old_keys,
            &mut sample_pool,
        );
        stats.sample_secs += t0.elapsed().as_secs_f64();
        if !any_new {
            progress.advance(1);
            break;
        }
        let (nk, ok) = (&new_keys[..], &old_keys[..]);
        let updates = run_chunks(
            &mut state,
            n,
            chunk,
            &mut pool,
            ctx,
            &mut stats,
            |i, sink| {
                // Vertices in a spatially coherent order: consecutive vertices share many
                // candidates, which then come from the cache.
                let v = order.get(i).map_or(i, |&v| v as usize);
                // Start loading the next vertex's candidates while this one is joined.
                if i + 1 < n {
                    let w = order.get(i + 1).map_or(i + 1, |&w| w as usize);
                    let next = w * s..(w + 1) * s;
                    for &key in nk[next.clone()].iter().chain(&ok[next]) {
                        if key != u64::MAX {
                            prefetch_slice(data.row(key as NodeId as usize));
                        }
                    }
                }
                let mut newl = [0 as NodeId; crate::params::MAX_CANDIDATES_LIMIT];
                let mut oldl = [0 as NodeId; crate::params::MAX_CANDIDATES_LIMIT];
                let mut nn = 0;
                for &key in &nk[v * s..(v + 1) * s] {
                    if key == u64::MAX {
                        break;
                    }
                    newl[nn] = key as NodeId;
                    nn += 1;
                }
                if nn == 0 {
                    return 0;
                }
                let mut no = 0;
                for &key in &ok[v * s..(v + 1) * s] {
                    if key == u64::MAX {
                        break;
                    }
                    let u = key as NodeId;
                    if !newl[..nn].contains(&u) {
                        oldl[no] = u;
                        no += 1;
                    }
                }
                let (newl, oldl) = (&newl[..nn], &oldl[..no]);
                let mut computed = 0u64;
                let mut bs = [0 as NodeId; 2 * crate::params::MAX_CANDIDATES_LIMIT];
                for (i, &a) in newl.iter().enumerate() {
                    let m = sink.select(a, newl[i + 1..].iter().chain(oldl), &mut bs);
                    computed += sink.join_many(a, &bs[..m], &dist, &data);
                }
                computed
            },
        )?;
        stats.updates.push(updates);
        progress.advance(1);
        if updates <= threshold {
            break;
        }
    }
    progress.end();
    drop(pool);
    drop(sample_pool);
    drop(new_keys);
    drop(old_keys);
    let graph = KnnGraph::from_parts(n, k, state.ids, state.dists)?;
    Ok((graph, stats))
}
