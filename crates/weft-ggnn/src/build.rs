//! The CPU reference of the GGNN hierarchical construction (`shared/algorithms/ggnn.md` §2).
//!
//! Written so that a GPU port can reproduce it: every structure is bounded (rows of exactly
//! `k_build` slots, the bounded [`Cache`] of the authors' kernels), the phases run in a fixed
//! order, and the only randomness is `weft_core::rng::hash3(seed, layer, local id)`.
//!
//! Parallelism never changes the result: brute force, merge and the symmetric-link searches are
//! Jacobi updates (every point reads the graph as it was before the phase and writes only its
//! own output row), and the one order-dependent step, handing inverse links to nodes with free
//! slots, runs sequentially in id order.

use std::sync::Mutex;

use rayon::prelude::*;
use weft_core::distance::DistanceFn;
use weft_core::rng::hash3;
use weft_core::{
    BuildCtx, DatasetView, Element, Error, FixedDegreeGraph, INVALID, MAX_NODES, Metric, NodeId,
    Params, Result,
};
use weft_graph::connect::RepairReport;
use weft_graph::hier::{HierGraph, HierLayer};

use crate::GgnnParams;
use crate::cache::Cache;
use crate::connect::{hierarchy_entry_points, nearest_entries, repair_layers, total};
use crate::sizing::Sizing;

/// Pops per layer of a merge query (the authors' `MAX_ITERATIONS`).
pub const MERGE_MAX_POPS: usize = 200;
/// Pops per symmetric-link search (the authors' `MAX_PER_PATH_ITERATIONS`).
pub const SYM_MAX_POPS: usize = 20;
/// Ids in the cache of a merge query (best + queue + visited).
pub const MERGE_CACHE: usize = 256;
/// Ids in the cache of a symmetric-link search.
pub const SYM_CACHE: usize = 128;
/// Position of the constraint ball's centre between `z` and `x_i` (paper §5.2.1).
pub const MIDPOINT: f32 = 0.4;

/// Size of the sorted region (best list + queue) of a cache whose best list holds `best` ids
/// (the GPU build's caches too).
pub(crate) fn sorted_size(best: usize) -> usize {
    64usize.max((best + 16).div_ceil(32) * 32)
}

/// One layer during the build.
struct Layer {
    n: usize,
    /// `n * k` layer-local neighbour ids, [`INVALID`] for empty slots.
    ids: Vec<NodeId>,
    /// Global id of each local id (empty on layer 0, where it is the identity).
    global: Vec<NodeId>,
    /// Local id in the layer below of each local id (empty on layer 0).
    selection: Vec<NodeId>,
    /// Real (not squared) 1-NN distance found by the last brute force or merge.
    nn1: Vec<f32>,
}

/// The state of one build.
struct Build<'a, T: Element> {
    data: DatasetView<'a, T>,
    metric: Metric,
    dist: DistanceFn<T>,
    dist32: DistanceFn<f32>,
    k: usize,
    kl: usize,
    kf: usize,
    z: Sizing,
    tau: f32,
    seed: u64,
    layers: Vec<Layer>,
    /// Mean real 1-NN distance over layer 0 (`d̄nn1`), from the last brute force or merge.
    mean_nn1: f32,
    slots: Vec<Mutex<Option<Cache>>>,
    /// Per layer-0 point, the entry point its merges also start from (empty: none; see
    /// [`GgnnParams::entry_seeded_merges`]).
    seeds: Vec<NodeId>,
    ctx: &'a BuildCtx,
}

/// What a build found besides the graph.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct GgnnStats {
    /// Mean real 1-NN distance over layer 0 after the last merge (`d̄nn1`).
    pub mean_nn1: f32,
    /// Largest real 1-NN distance over layer 0 after the last merge (`d+nn1`, the query
    /// slack's guard).
    pub max_nn1: f32,
    /// Inverse links dropped because every candidate's slots were full.
    pub dropped_links: u64,
    /// What the connectivity repair did, summed over the layers (`passes`: the most any layer
    /// ran; all zero with [`GgnnParams::repair`] off). `unreachable_before` counts the vertices
    /// of every layer that its entry points (`crate::layer_entry_points`) did not reach.
    pub repair: RepairReport,
}

impl<'a, T: Element> Build<'a, T> {
    fn global(&self, l: usize, v: NodeId) -> usize {
        if l == 0 {
            v as usize
        } else {
            self.layers[l].global[v as usize] as usize
        }
    }

    /// The slack added to a distance bound: `(tau_b * d̄nn1)^2` for squared L2 (the authors'
    /// squared form), `tau_b * d̄nn1` for the other metrics.
    fn slack(&self) -> f32 {
        let xi = self.tau * self.mean_nn1;
        if self.metric == Metric::L2Squared {
            xi * xi
        } else {
            xi
        }
    }

    /// A metric distance as a real distance (square root for squared L2, magnitude otherwise).
    fn real(&self, d: f32) -> f32 {
        if self.metric == Metric::L2Squared {
            d.max(0.0).sqrt()
        } else {
            d.abs()
        }
    }

    /// Runs `f` with this thread's cache, emptied afterwards.
    fn with_cache<R>(&self, f: impl FnOnce(&mut Cache) -> R) -> R {
        let t = rayon::current_thread_index().unwrap_or(0) % self.slots.len();
        let mut guard = self.slots[t].lock().unwrap_or_else(|e| e.into_inner());
        let cache = guard.get_or_insert_with(|| Cache::new(self.z.n, 1, 1, 0));
        let r = f(cache);
        cache.reset();
        r
    }

    /// The entry-seeded merge's extra start (layer 0): the point's seed, scored and pushed as a
    /// fresh candidate (unless it is the point, already held, or fails the bound).
    fn push_seed(&self, cache: &mut Cache, v: NodeId, q: &[T], slack: f32) {
        let Some(&e) = self.seeds.get(v as usize) else {
            return;
        };
        if e == v || e == INVALID || cache.contains(e) {
            return;
        }
        let d = self.dist.eval(q, self.data.row(e as usize));
        if d < cache.best_last() + slack {
            cache.push(e, d);
        }
    }

    /// Mean (and max) of the layer-0 1-NN distances, summed in id order.
    fn update_stats(&mut self) -> f32 {
        let nn1 = &self.layers[0].nn1;
        let sum: f64 = nn1.iter().map(|&d| d as f64).sum();
        self.mean_nn1 = (sum / nn1.len().max(1) as f64) as f32;
        nn1.iter().copied().fold(0.0, f32::max)
    }

    /// Brute force inside each segment of layer `l` (the "top" kernel): the `k` nearest
    /// segment members, ties by id, and the real distance to the first non-identical one.
    fn top(&mut self, l: usize) -> Result<()> {
        let k = self.k;
        let n = self.layers[l].n;
        let mut ids = vec![INVALID; n * k];
        let mut nn1 = vec![0f32; n];
        ids.par_chunks_mut(k)
            .zip(nn1.par_iter_mut())
            .enumerate()
            .try_for_each_init(Vec::new, |list, (v, (row, nn))| {
                self.ctx.check_cancelled()?;
                let range = self.z.segment_range(l, self.z.segment_of(l, v));
                let q = self.data.row(self.global(l, v as NodeId));
                list.clear();
                for u in range {
                    if u != v {
                        let d = self
                            .dist
                            .eval(q, self.data.row(self.global(l, u as NodeId)));
                        list.push((d, u as NodeId));
                    }
                }
                list.sort_unstable_by(|a: &(f32, NodeId), b| {
                    a.0.total_cmp(&b.0).then(a.1.cmp(&b.1))
                });
                for (slot, &(_, u)) in row.iter_mut().zip(list.iter()) {
                    *slot = u;
                }
                *nn = list
                    .iter()
                    .map(|&(d, _)| self.real(d))
                    .find(|&d| d > 0.0)
                    .unwrap_or(0.0);
                Ok::<(), Error>(())
            })?;
        self.layers[l].ids = ids;
        self.layers[l].nn1 = nn1;
        if l == 0 {
            self.update_stats();
        }
        Ok(())
    }

    /// Weighted sampling of layer `t + 1` from layer `t`: in each segment, key
    /// `-ln(u) / (d_nn1 + eps)` with `u` from `hash3(seed, t, local id)`, largest keys first
    /// (ties by id), which favours points in dense regions as the authors' code does.
    fn select(&mut self, t: usize) {
        let z = self.z;
        let n_up = z.layer_len(t + 1);
        let mut selection = vec![INVALID; n_up];
        let nn1 = &self.layers[t].nn1;
        let mut keys: Vec<(f64, NodeId)> = Vec::new();
        for b in 0..z.segments(t) {
            keys.clear();
            for v in z.segment_range(t, b) {
                let bits = hash3(self.seed, t as u64, v as u64);
                let u = ((bits >> 11) as f64 + 0.5) * (1.0 / (1u64 << 53) as f64);
                let key = -u.ln() / (nn1[v] as f64 + f32::EPSILON as f64);
                keys.push((key, v as NodeId));
            }
            keys.sort_unstable_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
            let (dest, m) = z.upward_slots(b);
            for j in 0..m {
                selection[dest + j] = keys[j].1;
            }
        }
        let global = selection
            .iter()
            .map(|&s| self.global(t, s) as NodeId)
            .collect();
        self.layers.push(Layer {
            n: n_up,
            ids: vec![INVALID; n_up * self.k],
            global,
            selection,
            nn1: vec![0.0; n_up],
        });
    }

    /// Merge `ltop -> lm` (Algorithm 4): every point of layer `lm` searches for itself from
    /// the `S` points of its ancestor segment in layer `ltop`, descending to layer `lm`; its row
    /// becomes the `k` best found (Jacobi: the whole pass reads the old graph).
    fn merge(&mut self, ltop: usize, lm: usize) -> Result<()> {
        let k = self.k;
        let n = self.layers[lm].n;
        let slack = self.slack();
        let sorted = sorted_size(k + 1);
        let prioq = sorted - (k + 1);
        let visited = MERGE_CACHE.max(sorted + 32) - sorted;
        let levels = self.z.g.pow((ltop - lm) as u32);
        let mut ids = vec![INVALID; n * k];
        let mut nn1 = vec![0f32; n];
        ids.par_chunks_mut(k)
            .zip(nn1.par_iter_mut())
            .enumerate()
            .try_for_each(|(v, (row, nn))| {
                self.ctx.check_cancelled()?;
                self.with_cache(|cache| {
                    cache.configure(self.z.n, k + 1, prioq, visited);
                    let v = v as NodeId;
                    let q = self.data.row(self.global(lm, v));
                    let top_seg = self.z.segment_of(lm, v as usize) / levels;
                    for e in self.z.segment_range(ltop, top_seg) {
                        let e = e as NodeId;
                        let d = self.dist.eval(q, self.data.row(self.global(ltop, e)));
                        if d < cache.best_last() + slack {
                            cache.push(e, d);
                        }
                    }
                    for li in (lm..ltop).rev() {
                        let sel = &self.layers[li + 1].selection;
                        cache.transform(|id| sel[id as usize]);
                        if li == lm && !cache.contains(v) {
                            cache.push(v, 0.0);
                        }
                        if li == 0 {
                            self.push_seed(cache, v, q, slack);
                        }
                        let graph = &self.layers[li].ids;
                        let mut pops = 0;
                        while pops < MERGE_MAX_POPS {
                            let Some(a) = cache.pop(cache.best_last() + slack) else {
                                break;
                            };
                            pops += 1;
                            let a_row = &graph[a as usize * k..(a as usize + 1) * k];
                            for &c in a_row {
                                if c == INVALID || c == a || cache.contains(c) {
                                    continue;
                                }
                                let d = self.dist.eval(q, self.data.row(self.global(li, c)));
                                if d < cache.best_last() + slack {
                                    cache.push(c, d);
                                }
                            }
                        }
                    }
                    let mut j = 0;
                    *nn = 0.0;
                    for &(d, id) in cache.best() {
                        if id == v || j >= k {
                            continue;
                        }
                        row[j] = id;
                        j += 1;
                        if *nn == 0.0 {
                            *nn = self.real(d);
                        }
                    }
                });
                Ok::<(), Error>(())
            })?;
        self.layers[lm].ids = ids;
        self.layers[lm].nn1 = nn1;
        if lm == 0 {
            self.update_stats();
        }
        Ok(())
    }

    /// Symmetric linking of layer `l` (Algorithm 5 with the midpoint constraint). For each
    /// point `z` and each `x_i` of its first half, a short search for `z` from `x_i` checks
    /// whether `z` is reachable; if not, the inverse link goes to the best candidate with a free
    /// slot. The searches read the layer as it was before the phase (Jacobi, a deviation from
    /// the authors' kernel, which also reads links added concurrently); the links are handed
    /// out sequentially in the order (z, i); each row's second half is then rebuilt: inverse
    /// links, the previous second-half entries, padding. Returns the dropped-link count.
    fn sym(&mut self, l: usize) -> Result<u64> {
        let (k, kl, kf) = (self.k, self.kl, self.kf);
        if kf == 0 {
            return Ok(0);
        }
        let n = self.layers[l].n;
        let slack = self.slack();
        let sorted = sorted_size(kf);
        let prioq = sorted - kf;
        let visited = SYM_CACHE.max(sorted + 32) - sorted;
        let dim = self.data.dim();
        let graph = &self.layers[l].ids;
        let mut cand = vec![INVALID; n * kl * kf];
        cand.par_chunks_mut(kl * kf).enumerate().try_for_each_init(
            || (vec![0f32; dim], vec![0f32; dim], vec![0f32; dim]),
            |(zf, qm, cf), (v, out)| {
                self.ctx.check_cancelled()?;
                let v = v as NodeId;
                let zq = self.data.row(self.global(l, v));
                for (a, &b) in zf.iter_mut().zip(zq) {
                    *a = b.to_f32();
                }
                self.with_cache(|cache| {
                    cache.configure(self.z.n, kf, prioq, visited);
                    for i in 0..kl {
                        let x = graph[v as usize * k + i];
                        if x == INVALID {
                            continue;
                        }
                        cache.reset();
                        let xr = self.data.row(self.global(l, x));
                        cache.push(x, self.dist.eval(zq, xr));
                        for ((m, &zv), &xv) in qm.iter_mut().zip(zf.iter()).zip(xr) {
                            *m = zv + MIDPOINT * (xv.to_f32() - zv);
                        }
                        for (a, &b) in cf.iter_mut().zip(xr) {
                            *a = b.to_f32();
                        }
                        let r_m = self.dist32.eval(qm, cf);
                        let mut connected = false;
                        for _ in 0..SYM_MAX_POPS {
                            let Some(a) = cache.pop(cache.best_last() + slack) else {
                                break;
                            };
                            let nn = &graph[a as usize * k..a as usize * k + kl];
                            if nn.contains(&v) {
                                connected = true;
                                break;
                            }
                            for &c in nn {
                                if c == INVALID || c == a || cache.contains(c) {
                                    continue;
                                }
                                let cr = self.data.row(self.global(l, c));
                                let dz = self.dist.eval(zq, cr);
                                if dz >= cache.best_first() + slack {
                                    continue;
                                }
                                for (a, &b) in cf.iter_mut().zip(cr) {
                                    *a = b.to_f32();
                                }
                                if self.dist32.eval(qm, cf) < r_m + slack {
                                    cache.push(c, dz);
                                }
                            }
                        }
                        if !connected {
                            for (slot, &(_, p)) in
                                out[i * kf..(i + 1) * kf].iter_mut().zip(cache.best())
                            {
                                *slot = p;
                            }
                        }
                    }
                });
                Ok::<(), Error>(())
            },
        )?;
        self.ctx.check_cancelled()?;
        // Hand out the links in (z, i) order: the first candidate with a free slot takes it.
        let mut count = vec![0u32; n];
        let mut symbuf = vec![INVALID; n * kf];
        let mut dropped = 0u64;
        for (v, lists) in cand.chunks(kf).enumerate().map(|(j, c)| (j / kl, c)) {
            if lists[0] == INVALID {
                continue;
            }
            let mut placed = false;
            for &p in lists {
                if p == INVALID {
                    break;
                }
                let c = &mut count[p as usize];
                if (*c as usize) < kf {
                    symbuf[p as usize * kf + *c as usize] = v as NodeId;
                    *c += 1;
                    placed = true;
                    break;
                }
            }
            dropped += u64::from(!placed);
        }
        // Rebuild the second halves.
        let mut ids = self.layers[l].ids.clone();
        ids.par_chunks_mut(k).enumerate().for_each(|(v, row)| {
            let links = &symbuf[v * kf..v * kf + count[v] as usize];
            let old: Vec<NodeId> = row[kl..].to_vec();
            let mut j = kl;
            for &c in links.iter().chain(&old) {
                if j >= k {
                    break;
                }
                if c == INVALID || c as usize == v || row[..j].contains(&c) {
                    continue;
                }
                row[j] = c;
                j += 1;
            }
            for slot in &mut row[j..] {
                *slot = INVALID;
            }
        });
        self.layers[l].ids = ids;
        Ok(dropped)
    }
}

/// Moves the valid ids of each row to its front (the graph format pads at the end).
fn compact(ids: &mut [NodeId], k: usize) {
    // Rows in parallel, a few thousand at a time.
    ids.par_chunks_mut(k.max(1) * 4096).for_each(|rows| {
        for row in rows.chunks_mut(k.max(1)) {
            let mut j = 0;
            for i in 0..row.len() {
                if row[i] != INVALID {
                    row.swap(i, j);
                    j += 1;
                }
            }
        }
    });
}

/// Builds the hierarchy and returns it with the build statistics.
pub(crate) fn build<T: Element>(
    data: DatasetView<'_, T>,
    metric: Metric,
    params: &GgnnParams,
    ctx: &BuildCtx,
) -> Result<(HierGraph, GgnnStats)> {
    let z = check_inputs(data, params, ctx)?;
    ctx.install(|| {
        // The merges read rows in no useful order: a copy in huge pages where one is made (same
        // values, same graph; see `DatasetView::copy_to_huge_pages`).
        let staged = data.copy_to_huge_pages();
        run(
            staged.as_ref().map_or(data, |copy| copy.view()),
            metric,
            params,
            ctx,
            z,
        )
    })?
}

/// The input checks of every GGNN build (CPU and GPU): a non-empty dataset within the id range,
/// valid parameters, finite values; returns the hierarchy's sizes.
pub(crate) fn check_inputs<T: Element>(
    data: DatasetView<'_, T>,
    params: &GgnnParams,
    ctx: &BuildCtx,
) -> Result<Sizing> {
    let n = data.rows();
    if n == 0 {
        return Err(Error::InvalidInput(
            "cannot build a graph on no vectors".into(),
        ));
    }
    if n > MAX_NODES {
        return Err(Error::InvalidInput(format!(
            "{n} vectors exceed the id range ({MAX_NODES})"
        )));
    }
    params.validate(n, data.dim())?;
    data.check_finite()?;
    ctx.check_cancelled()?;
    Sizing::new(n, params.k_build, params.segment_size, params.layers)
}

fn run<T: Element>(
    data: DatasetView<'_, T>,
    metric: Metric,
    params: &GgnnParams,
    ctx: &BuildCtx,
    z: Sizing,
) -> Result<(HierGraph, GgnnStats)> {
    let k = params.k_build;
    let kf = k / 2;
    // The spread entry points, picked first: the entry-seeded merges start from them.
    let entries = if params.entry_points > 0 {
        Some(hierarchy_entry_points(data, metric, params, ctx, None)?)
    } else {
        None
    };
    let seeds = match &entries {
        Some(e) if params.entry_seeded_merges => nearest_entries(data, metric, e, ctx)?,
        _ => Vec::new(),
    };
    let mut b = Build {
        data,
        metric,
        dist: metric.distance_fn::<T>(),
        dist32: metric.distance_fn::<f32>(),
        k,
        kl: k - kf,
        kf,
        z,
        tau: params.tau_build,
        seed: ctx.seed(),
        layers: vec![Layer {
            n: z.n,
            ids: Vec::new(),
            global: Vec::new(),
            selection: Vec::new(),
            nn1: Vec::new(),
        }],
        mean_nn1: 0.0,
        slots: (0..rayon::current_num_threads().max(1))
            .map(|_| Mutex::new(None))
            .collect(),
        seeds,
        ctx,
    };
    let layers = z.layers;
    let phases = (0..layers)
        .map(|t| 2 + usize::from(t + 1 < layers) + 2 * t)
        .sum::<usize>()
        + params.refinement_iterations * 2 * (layers - 1);
    let progress = ctx.progress();
    progress.begin("ggnn build", Some(phases as u64));
    let mut dropped = 0;
    for t in 0..layers {
        b.top(t)?;
        progress.advance(1);
        if t + 1 < layers {
            b.select(t);
            progress.advance(1);
        }
        dropped += b.sym(t)?;
        progress.advance(1);
        for lm in (0..t).rev() {
            b.merge(t, lm)?;
            progress.advance(1);
            dropped += b.sym(lm)?;
            progress.advance(1);
        }
    }
    for _ in 0..params.refinement_iterations {
        for lm in (0..layers - 1).rev() {
            b.merge(layers - 1, lm)?;
            progress.advance(1);
            dropped += b.sym(lm)?;
            progress.advance(1);
        }
    }
    progress.end();
    let max_nn1 = b.update_stats();
    let mean_nn1 = b.mean_nn1;
    let layers = std::mem::take(&mut b.layers)
        .into_iter()
        .map(|l| (l.ids, l.global))
        .collect();
    let finished = FinishedLayers { z, k, layers };
    let (graph, repair, _) = finished.assemble(entries, data, metric, params, ctx)?;
    let stats = GgnnStats {
        mean_nn1,
        max_nn1,
        dropped_links: dropped,
        repair,
    };
    Ok((graph, stats))
}

/// The layers of a finished build (CPU or GPU), before they become a `HierGraph`.
pub(crate) struct FinishedLayers {
    /// The layers' sizes.
    pub z: Sizing,
    /// Slots per row (`k_build`).
    pub k: usize,
    /// Each layer as `(ids, global ids)`, bottom first: rows of `k` layer-local slots, not yet
    /// compacted, and the global id of each local id.
    pub layers: Vec<(Vec<NodeId>, Vec<NodeId>)>,
}

impl FinishedLayers {
    /// The `HierGraph` of these layers over `data`: rows compacted, the entry points of
    /// [`GgnnParams::entry_points`] (`entry_points` when the caller picked them already), and,
    /// with [`GgnnParams::repair`], every layer repaired to be reachable from its
    /// `crate::layer_entry_points` (see `crate::connect`). Returns the repair's report summed
    /// over the layers and the seconds spent choosing the entry points and repairing.
    pub(crate) fn assemble<T: Element>(
        self,
        entry_points: Option<Vec<NodeId>>,
        data: DatasetView<'_, T>,
        metric: Metric,
        params: &GgnnParams,
        ctx: &BuildCtx,
    ) -> Result<(HierGraph, RepairReport, f64)> {
        let FinishedLayers { z, k, mut layers } = self;
        layers
            .par_iter_mut()
            .with_max_len(1)
            .for_each(|(ids, _)| compact(ids, k));
        let connect_start = std::time::Instant::now();
        let entry_points = match entry_points {
            Some(e) => e,
            None => {
                let top_global = (layers.len() > 1).then(|| layers[layers.len() - 1].1.as_slice());
                hierarchy_entry_points(data, metric, params, ctx, top_global)?
            }
        };
        let reports = if params.repair {
            repair_layers(&mut layers, k, &entry_points, data, metric, ctx)?
        } else {
            Vec::new()
        };
        let connect_s = connect_start.elapsed().as_secs_f64();
        let mut layer_vec = layers.into_iter();
        let base_ids = layer_vec.next().map(|l| l.0).unwrap_or_default();
        let base = FixedDegreeGraph::new(z.n, k, base_ids)?;
        let mut upper = Vec::new();
        for (ids, global) in layer_vec {
            let g = FixedDegreeGraph::new(global.len(), k, ids)?;
            upper.push(HierLayer::new(g, global)?);
        }
        let graph = HierGraph::new(base, upper, entry_points)?;
        Ok((graph, total(&reports), connect_s))
    }
}
