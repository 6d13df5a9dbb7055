//! Exact k-nearest-neighbour search and exact k-NN graphs on the CPU (brute force).
//!
//! Results are ascending by `(distance, id)`: ties are broken by the smaller id, so the output is
//! deterministic and independent of the thread count. The returned distances are those of the
//! metric's [`DistanceFn`], bit for bit.
//!
//! # Algorithm
//!
//! Distances are filtered in tiles, GEMM style: for a panel of queries and a panel of base
//! vectors (both converted to `f32` and packed), a register-blocked matrix product (a 14 x 32
//! AVX-512 tile, 6 x 16 AVX2 + FMA, or portable, chosen at run time) gives approximate distances
//! `|q|^2 + |x|^2 - 2 q.x` (L2, on vectors centred on the base mean), `-q.x` (inner product) or
//! `1 - q.x` (cosine, on normalised vectors), compared in registers against the query's bound.
//! The few candidates that pass are appended to the query's list, which is compacted with
//! `select_nth_unstable` when full: the bound becomes the k-th approximate value plus twice a
//! bound on the rounding error of the expanded form and of [`DistanceFn`]. Whatever survives is
//! evaluated with the exact [`DistanceFn`] at the end and sorted by `(distance, id)`, so the
//! approximate products never decide the result: the output equals a naive scan's. (Vectors
//! whose norms could over- or underflow bypass the filter and are evaluated exactly.)
//!
//! The base is packed in superblocks of about 64 MiB shared by all threads. The parallel work
//! items are blocks of 24 query panels; each base panel (16 KiB at dimension 128) is loaded into
//! L1 once and meets all of them, while the packed queries stay in L2. When there are too few
//! queries to occupy every thread, ranges of base blocks are shared out too and their candidate
//! lists merged; below 32 queries the base is scanned directly with [`DistanceFn`]. Cancellation
//! is checked between blocks of base panels.

mod cands;
mod kernel;
mod topk;

#[cfg(test)]
mod tests;

use rayon::prelude::*;
use weft_core::distance::DistanceFn;
use weft_core::error::{check_graph_k, check_k};
use weft_core::{
    BuildCtx, DatasetView, Element, Error, INVALID, KnnGraph, KnnGraphBuilder, Metric, Neighbors,
    NoParams, NodeId, Result,
};

use cands::{Cands, RowParams, U};
use kernel::{BasePanels, Kernel};
use topk::sort_pairs;

/// Bytes of packed base vectors per block: the unit of cancellation checks and of the base
/// ranges that share out the work when there are few queries.
const BLOCK_BYTES: usize = 384 << 10;
/// Bytes of packed base vectors per superblock (packed once, shared by all threads).
const SUPERBLOCK_BYTES: usize = 64 << 20;
/// Below this many queries, packing the base costs more than it saves: scan directly.
const DIRECT_QUERIES: usize = 32;
/// Base rows per work item of the direct scan.
const DIRECT_CHUNK: usize = 4096;
/// Query panels per task: every base panel, once in L1, meets all of them (their packed
/// vectors, about 170 KiB at dimension 128, stay in L2).
const TASK_PANELS: usize = 24;

/// The k nearest rows of `base` for every row of `queries`, ascending by `(distance, id)`.
///
/// Fails with [`Error::InvalidInput`] on empty sets, [`Error::InvalidParams`] when `k == 0` or
/// `k > base.rows()`, [`Error::DimensionMismatch`] when the dimensions differ,
/// [`Error::NonFinite`] on NaN or infinite values, and [`Error::Cancelled`] when `ctx` is
/// cancelled.
pub fn exact_search<T: Element>(
    base: DatasetView<'_, T>,
    queries: DatasetView<'_, T>,
    metric: Metric,
    k: usize,
    ctx: &BuildCtx,
) -> Result<Neighbors> {
    if base.is_empty() {
        return Err(Error::InvalidInput("the base set is empty".into()));
    }
    if queries.is_empty() {
        return Err(Error::InvalidInput("the query set is empty".into()));
    }
    base.check_same_dim(&queries, "base vs queries")?;
    check_rows(base.rows())?;
    check_k(k, base.rows())?;
    run(base, Queries::Rows(queries), queries.rows(), metric, k, ctx)
}

/// The exact k-NN graph of `data`: row `v` holds the `k` nearest other points of `v`, ascending
/// by `(distance, id)`. Requires `1 <= k < data.rows()`; errors as [`exact_search`].
pub fn exact_knn_graph<T: Element>(
    data: DatasetView<'_, T>,
    metric: Metric,
    k: usize,
    ctx: &BuildCtx,
) -> Result<KnnGraph> {
    check_rows(data.rows())?;
    check_graph_k(k, data.rows())?;
    let nb = run(data, Queries::AllOf, data.rows(), metric, k, ctx)?;
    KnnGraph::from_parts(data.rows(), k, nb.ids, nb.dists)
}

/// The `k` nearest other points of each listed row of `data` (`rows.len() x k`, each row
/// excluding its own point), ascending by `(distance, id)`. Requires `1 <= k < data.rows()`, a
/// non-empty `rows` and every row in range; errors as [`exact_search`].
pub fn exact_neighbors_of<T: Element>(
    data: DatasetView<'_, T>,
    metric: Metric,
    rows: &[NodeId],
    k: usize,
    ctx: &BuildCtx,
) -> Result<Neighbors> {
    check_rows(data.rows())?;
    check_graph_k(k, data.rows())?;
    if rows.is_empty() {
        return Err(Error::InvalidInput("no rows were requested".into()));
    }
    if let Some(&r) = rows.iter().find(|&&r| r as usize >= data.rows()) {
        return Err(Error::InvalidInput(format!(
            "row {r} is out of range (n = {})",
            data.rows()
        )));
    }
    run(data, Queries::RowsOf(rows), rows.len(), metric, k, ctx)
}

/// Exact brute-force k-NN graph construction, as a [`KnnGraphBuilder`] named `exact`.
#[derive(Clone, Copy, Debug, Default)]
pub struct ExactKnn;

impl KnnGraphBuilder for ExactKnn {
    type Params = NoParams;

    fn name(&self) -> &'static str {
        "exact"
    }

    fn build<T: Element>(
        &self,
        data: DatasetView<'_, T>,
        metric: Metric,
        k: usize,
        _params: &NoParams,
        ctx: &BuildCtx,
    ) -> Result<KnnGraph> {
        exact_knn_graph(data, metric, k, ctx)
    }
}

fn check_rows(n: usize) -> Result<()> {
    if n > weft_core::MAX_NODES {
        return Err(Error::InvalidInput(format!(
            "{n} vectors exceed the largest indexable count {}",
            weft_core::MAX_NODES
        )));
    }
    Ok(())
}

/// Where the queries come from.
#[derive(Clone, Copy)]
enum Queries<'a, T> {
    /// A separate query set; nothing is excluded.
    Rows(DatasetView<'a, T>),
    /// Every base row, each excluding itself.
    AllOf,
    /// The listed base rows, each excluding itself.
    RowsOf(&'a [NodeId]),
}

/// Query `q`'s vector and the base id it must skip.
#[inline]
fn query<'a, T: Element>(
    base: DatasetView<'a, T>,
    queries: Queries<'a, T>,
    q: usize,
) -> (&'a [T], NodeId) {
    match queries {
        Queries::Rows(v) => (v.row(q), INVALID),
        Queries::AllOf => (base.row(q), q as NodeId),
        Queries::RowsOf(rows) => (base.row(rows[q] as usize), rows[q]),
    }
}

/// How vectors are turned into packed `f32` operands.
struct Prep {
    metric: Metric,
    dim: usize,
    /// The base mean (L2 only; empty otherwise): L2 is translation invariant, and centring
    /// keeps the norms, hence the rounding error of the expanded form, small.
    mean: Vec<f32>,
}

/// Squared norms outside this range make the cosine kernels under- or overflow; such vectors
/// are always evaluated exactly.
const COS_NORM_RANGE: (f32, f32) = (1e-18, 1e18);
/// Squared norms above this make L2 / inner products overflow; always evaluated exactly.
const NORM_MAX: f32 = 1e30;

impl Prep {
    /// Converts `v` to `f32` in `out` (centred, or normalised, as the metric wants), scaled by
    /// `scale`; returns the squared norm (after centring, before normalisation) and whether the
    /// vector must bypass the filter.
    #[inline]
    fn convert<T: Element>(&self, v: &[T], out: &mut [f32], scale: f32) -> (f32, bool) {
        for (o, x) in out.iter_mut().zip(v) {
            *o = x.to_f32();
        }
        if !self.mean.is_empty() {
            for (o, m) in out.iter_mut().zip(&self.mean) {
                *o -= m;
            }
        }
        let norm: f32 = out.iter().map(|x| x * x).sum();
        let (mul, forced) = match self.metric {
            Metric::Cosine => {
                let forced = !(COS_NORM_RANGE.0..=COS_NORM_RANGE.1).contains(&norm);
                let inv = if norm > 0.0 { 1.0 / norm.sqrt() } else { 0.0 };
                (scale * inv, forced)
            }
            _ => (scale, norm.is_nan() || norm > NORM_MAX),
        };
        for o in out.iter_mut() {
            *o *= mul;
        }
        (norm, forced)
    }

    /// Packs up to `width` vectors (`rows`) as a `dim x width` panel in `out`, zero-padding the
    /// missing columns; writes each vector's squared norm and bypass flag to `info`.
    fn pack<'v, T: Element>(
        &self,
        rows: impl Iterator<Item = &'v [T]>,
        width: usize,
        scale: f32,
        out: &mut [f32],
        info: &mut [(f32, bool)],
        tmp: &mut [f32],
    ) {
        out.fill(0.0);
        info.fill((0.0, false));
        for (j, row) in rows.enumerate().take(width) {
            info[j] = self.convert(row, tmp, scale);
            for (k, &x) in tmp.iter().enumerate() {
                out[k * width + j] = x;
            }
        }
    }

    /// The factor queries are scaled by: the product then carries the `-2 q.x` or `-q.x` term.
    fn query_scale(&self) -> f32 {
        match self.metric {
            Metric::L2Squared => -2.0,
            _ => -1.0,
        }
    }

    /// The additive term of query row with squared norm `qn`.
    fn row_add(&self, qn: f32) -> f32 {
        match self.metric {
            Metric::L2Squared => qn,
            Metric::InnerProduct => 0.0,
            Metric::Cosine => 1.0,
        }
    }

    /// The additive term of a base column with squared norm `xn`.
    fn col_add(&self, xn: f32, forced: bool) -> f32 {
        if forced {
            return f32::NEG_INFINITY;
        }
        match self.metric {
            Metric::L2Squared => xn,
            _ => 0.0,
        }
    }

    /// A bound on `|approximate - exact|` for a query of squared norm `qn` against base vectors
    /// of squared norm at most `max_xn` (twice the first-order worst case of both computations).
    fn error_bound(&self, qn: f32, max_xn: f32) -> f32 {
        let d = self.dim as f32;
        let abs = 8.0 * (d + 1.0) * f32::MIN_POSITIVE;
        abs + match self.metric {
            Metric::L2Squared => 8.0 * (d + 4.0) * U * (qn + max_xn),
            Metric::InnerProduct => 8.0 * (d + 2.0) * U * (qn * max_xn).sqrt(),
            Metric::Cosine => 8.0 * (2.0 * d + 8.0) * U,
        }
    }
}

/// The kernel and the blocking of one run.
#[derive(Clone, Copy, Debug)]
struct Plan {
    kern: Kernel,
    /// See [`BLOCK_BYTES`].
    block_bytes: usize,
    /// See [`SUPERBLOCK_BYTES`].
    superblock_bytes: usize,
}

impl Plan {
    /// The best kernel for this CPU with the default blocking.
    fn detect() -> Plan {
        Plan {
            kern: Kernel::detect(),
            block_bytes: BLOCK_BYTES,
            superblock_bytes: SUPERBLOCK_BYTES,
        }
    }
}

/// The parallel work item: a block of queries against one range of every superblock's blocks.
struct Task {
    /// First query.
    q0: usize,
    /// One past the last query.
    q1: usize,
    /// Which range of blocks (of `splits`).
    split: usize,
    /// The candidates of each query.
    cands: Vec<Cands>,
    /// Each query's row parameters as of the last superblock.
    rows: Vec<RowParams>,
}

impl Superblock {
    /// The packed vectors.
    fn data(&self) -> &[f32] {
        &self.buf[self.off..]
    }
}

/// The packed base vectors of one superblock.
struct Superblock {
    /// First base row.
    row0: usize,
    /// `panels x dim x nr` packed vectors, from `buf[off]` (64-byte aligned, so that vector loads
    /// never straddle cache lines).
    buf: Vec<f32>,
    /// Where the aligned data starts in `buf`.
    off: usize,
    /// `panels x nr` column terms (`+inf` for padding).
    col_add: Vec<f32>,
    /// The largest squared norm among vectors that do not bypass the filter.
    max_norm: f32,
}

/// The core: the `k` nearest base rows of each of `nq` queries.
fn run<'a, T: Element>(
    base: DatasetView<'a, T>,
    queries: Queries<'a, T>,
    nq: usize,
    metric: Metric,
    k: usize,
    ctx: &BuildCtx,
) -> Result<Neighbors> {
    ctx.install(|| run_in_pool(base, queries, nq, metric, k, ctx))?
}

fn run_in_pool<'a, T: Element>(
    base: DatasetView<'a, T>,
    queries: Queries<'a, T>,
    nq: usize,
    metric: Metric,
    k: usize,
    ctx: &BuildCtx,
) -> Result<Neighbors> {
    if nq < DIRECT_QUERIES {
        direct(base, queries, nq, metric, k, ctx)
    } else {
        run_with_kernel(base, queries, nq, metric, k, ctx, Plan::detect())
    }
}

/// The direct scan for a few queries: exact distances to every base row, in parallel over
/// (query, base chunk) pairs whose top-k lists are merged.
fn direct<'a, T: Element>(
    base: DatasetView<'a, T>,
    queries: Queries<'a, T>,
    nq: usize,
    metric: Metric,
    k: usize,
    ctx: &BuildCtx,
) -> Result<Neighbors> {
    ctx.check_cancelled()?;
    base.check_finite()?;
    if let Queries::Rows(v) = queries {
        v.check_finite()?;
    }
    let n = base.rows();
    let dist = DistanceFn::<T>::new(metric);
    let chunks = n.div_ceil(DIRECT_CHUNK);
    ctx.progress()
        .begin("exact k-NN (direct)", Some((nq * chunks) as u64));
    let parts: Vec<Vec<(f32, NodeId)>> = (0..nq * chunks)
        .into_par_iter()
        .map(|t| -> Result<Vec<(f32, NodeId)>> {
            ctx.check_cancelled()?;
            let (q, c) = (t / chunks, t % chunks);
            let (qv, skip) = query(base, queries, q);
            let mut top = topk::TopK::new(k);
            for id in c * DIRECT_CHUNK..((c + 1) * DIRECT_CHUNK).min(n) {
                if id as NodeId != skip {
                    // `+ 0.0` turns -0 into +0, so that ordering by value and by bits agree.
                    top.push(dist.eval(qv, base.row(id)) + 0.0, id as NodeId);
                }
            }
            ctx.progress().advance(1);
            Ok(top.items().to_vec())
        })
        .collect::<Result<_>>()?;
    ctx.progress().end();
    let mut out = Neighbors::new(nq, k);
    let mut pairs = Vec::new();
    for (q, (ids, dists)) in out
        .ids
        .chunks_mut(k)
        .zip(out.dists.chunks_mut(k))
        .enumerate()
    {
        pairs.clear();
        for part in &parts[q * chunks..(q + 1) * chunks] {
            pairs.extend_from_slice(part);
        }
        sort_pairs(&mut pairs);
        for (j, &(d, id)) in pairs.iter().take(k).enumerate() {
            ids[j] = id;
            dists[j] = d;
        }
    }
    Ok(out)
}

fn run_with_kernel<'a, T: Element>(
    base: DatasetView<'a, T>,
    queries: Queries<'a, T>,
    nq: usize,
    metric: Metric,
    k: usize,
    ctx: &BuildCtx,
    plan: Plan,
) -> Result<Neighbors> {
    let kern = plan.kern;
    ctx.check_cancelled()?;
    base.check_finite()?;
    if let Queries::Rows(v) = queries {
        v.check_finite()?;
    }
    let n = base.rows();
    let dim = base.dim();
    let (mr, nr) = (kern.mr, kern.nr);
    let dist = DistanceFn::<T>::new(metric);

    let prep = Prep {
        metric,
        dim,
        mean: if metric == Metric::L2Squared {
            mean_of(base)
        } else {
            Vec::new()
        },
    };

    // Geometry.
    let panel_floats = dim * nr;
    let block_panels = (plan.block_bytes / (panel_floats * 4)).max(1);
    let total_panels = n.div_ceil(nr);
    let sb_panels =
        ((plan.superblock_bytes / (panel_floats * 4)) / block_panels).max(1) * block_panels;
    let num_sb = total_panels.div_ceil(sb_panels);
    let task_queries = mr * TASK_PANELS;
    let query_tasks = nq.div_ceil(task_queries);
    let threads = rayon::current_num_threads().max(1);
    let blocks_first_sb = sb_panels.min(total_panels).div_ceil(block_panels);
    let splits = if query_tasks >= 2 * threads {
        1
    } else {
        (4 * threads)
            .div_ceil(query_tasks)
            .clamp(1, blocks_first_sb)
    };

    let mut tasks: Vec<Task> = (0..splits)
        .flat_map(|split| {
            (0..query_tasks).map(move |t| {
                let q0 = t * task_queries;
                let q1 = (q0 + task_queries).min(nq);
                Task {
                    q0,
                    q1,
                    split,
                    cands: vec![Cands::new(); q1 - q0],
                    rows: Vec::new(),
                }
            })
        })
        .collect();

    ctx.progress()
        .begin("exact k-NN", Some((num_sb * tasks.len()) as u64));
    let mut max_norm = 0f32;
    let shared = TaskInputs {
        base,
        queries,
        prep: &prep,
        k,
        dist: &dist,
        kern,
        ctx,
    };
    for sb in 0..num_sb {
        ctx.check_cancelled()?;
        let p0 = sb * sb_panels;
        let panels = sb_panels.min(total_panels - p0);
        let sblock = pack_superblock(base, &prep, p0 * nr, panels, nr);
        // The error bounds cover every base vector met so far.
        max_norm = max_norm.max(sblock.max_norm);
        let blocks = panels.div_ceil(block_panels);
        tasks.par_iter_mut().try_for_each(|task| -> Result<()> {
            let lo = task.split * blocks / splits;
            let hi = (task.split + 1) * blocks / splits;
            let blocks = (lo * block_panels)..(hi * block_panels).min(panels);
            process(task, &shared, &sblock, max_norm, blocks, block_panels)?;
            ctx.progress().advance(1);
            Ok(())
        })?;
    }
    ctx.progress().end();

    // Evaluate the survivors exactly, merge the splits of every query and write the results.
    let finals: Vec<Vec<Vec<(f32, NodeId)>>> = tasks
        .par_iter_mut()
        .map(|task| {
            (0..task.q1 - task.q0)
                .map(|r| {
                    let mut out = Vec::new();
                    if let Some(row) = task.rows.get(r) {
                        let (qv, _) = query(base, queries, task.q0 + r);
                        // `+ 0.0` turns -0 into +0, so that ordering by value and by bits agree.
                        let exact = |id: NodeId| dist.eval(qv, base.row(id as usize)) + 0.0;
                        task.cands[r].finish(k, row, &exact, &mut out);
                    }
                    out
                })
                .collect()
        })
        .collect();
    drop(tasks);
    let mut out = Neighbors::new(nq, k);
    out.ids
        .par_chunks_mut(k)
        .zip(out.dists.par_chunks_mut(k))
        .enumerate()
        .for_each_init(Vec::new, |pairs, (q, (ids, dists))| {
            pairs.clear();
            let t = q / task_queries;
            for s in 0..splits {
                pairs.extend_from_slice(&finals[s * query_tasks + t][q - t * task_queries]);
            }
            sort_pairs(pairs);
            for (j, &(d, id)) in pairs.iter().take(k).enumerate() {
                ids[j] = id;
                dists[j] = d;
            }
        });
    Ok(out)
}

/// The mean of the rows of `base`, summed in `f64` over fixed chunks (deterministic).
fn mean_of<T: Element>(base: DatasetView<'_, T>) -> Vec<f32> {
    const CHUNK: usize = 4096;
    let dim = base.dim();
    let n = base.rows();
    let partial: Vec<Vec<f64>> = (0..n.div_ceil(CHUNK))
        .into_par_iter()
        .map(|c| {
            let mut s = vec![0f64; dim];
            for r in c * CHUNK..((c + 1) * CHUNK).min(n) {
                for (a, x) in s.iter_mut().zip(base.row(r)) {
                    *a += x.to_f32() as f64;
                }
            }
            s
        })
        .collect();
    let mut sum = vec![0f64; dim];
    for p in &partial {
        for (a, b) in sum.iter_mut().zip(p) {
            *a += b;
        }
    }
    sum.iter().map(|s| (s / n as f64) as f32).collect()
}

/// Packs `panels` panels of base rows starting at `row0`, in parallel.
fn pack_superblock<T: Element>(
    base: DatasetView<'_, T>,
    prep: &Prep,
    row0: usize,
    panels: usize,
    nr: usize,
) -> Superblock {
    let dim = prep.dim;
    let n = base.rows();
    let len = panels * dim * nr;
    let mut buf = vec![0f32; len + 16];
    let off = buf.as_ptr().align_offset(64).min(16);
    let data = &mut buf[off..off + len];
    let mut col_add = vec![0f32; panels * nr];
    let max_norm = data
        .par_chunks_mut(dim * nr)
        .zip(col_add.par_chunks_mut(nr))
        .enumerate()
        .map_init(
            || (vec![0f32; dim], vec![(0f32, false); nr]),
            |(tmp, info), (p, (panel, ca))| {
                let r0 = row0 + p * nr;
                let r1 = (r0 + nr).min(n);
                prep.pack((r0..r1).map(|r| base.row(r)), nr, 1.0, panel, info, tmp);
                let mut max_norm = 0f32;
                for (j, c) in ca.iter_mut().enumerate() {
                    if r0 + j < r1 {
                        let (xn, forced) = info[j];
                        *c = prep.col_add(xn, forced);
                        if !forced {
                            max_norm = max_norm.max(xn);
                        }
                    } else {
                        *c = f32::INFINITY;
                    }
                }
                max_norm
            },
        )
        .reduce(|| 0f32, f32::max);
    Superblock {
        row0,
        buf,
        off,
        col_add,
        max_norm,
    }
}

/// What every task of one exact search reads, whichever superblock it runs over.
struct TaskInputs<'a, 'p, T: Element> {
    base: DatasetView<'a, T>,
    queries: Queries<'a, T>,
    prep: &'p Prep,
    k: usize,
    dist: &'p DistanceFn<T>,
    kern: Kernel,
    ctx: &'p BuildCtx,
}

/// Runs one task over the panels `panels` (a range of whole blocks, `block_panels` each) of
/// superblock `sb`, whose bounds cover base vectors of norm up to `max_norm`.
fn process<T: Element>(
    task: &mut Task,
    inputs: &TaskInputs<'_, '_, T>,
    sb: &Superblock,
    max_norm: f32,
    panels: std::ops::Range<usize>,
    block_panels: usize,
) -> Result<()> {
    let &TaskInputs {
        base,
        queries,
        prep,
        k,
        dist,
        kern,
        ctx,
    } = inputs;
    let (mr, nr, dim) = (kern.mr, kern.nr, prep.dim);
    let n = base.rows();
    let nq = task.q1 - task.q0;
    let qpanels = nq.div_ceil(mr);
    let cap = 2 * k + 64;

    // Pack the task's queries; per row: the bound's parts.
    let mut apack = vec![0f32; qpanels * dim * mr];
    let mut rows_info = vec![(0f32, false); qpanels * mr];
    let mut tmp = vec![0f32; dim];
    for (qp, (panel, info)) in apack
        .chunks_mut(dim * mr)
        .zip(rows_info.chunks_mut(mr))
        .enumerate()
    {
        let r0 = task.q0 + qp * mr;
        let r1 = (r0 + mr).min(task.q1);
        prep.pack(
            (r0..r1).map(|q| query(base, queries, q).0),
            mr,
            prep.query_scale(),
            panel,
            info,
            &mut tmp,
        );
    }
    task.rows = rows_info[..nq]
        .iter()
        .map(|&(qn, forced)| RowParams {
            row_add: prep.row_add(qn),
            err: prep.error_bound(qn, max_norm),
            forced,
        })
        .collect();
    if panels.is_empty() {
        return Ok(());
    }
    let q0 = task.q0;
    let rows = &task.rows;
    let cands = &mut task.cands;

    // Each row's current bound (`-inf` for the padding rows of the last panel).
    let mut bounds: Vec<f32> = (0..qpanels * mr)
        .map(|r| {
            if r < nq {
                cands[r].bound(&rows[r])
            } else {
                f32::NEG_INFINITY
            }
        })
        .collect();
    let data = sb.data();
    let mut start = panels.start;
    while start < panels.end {
        ctx.check_cancelled()?;
        let end = (start + block_panels).min(panels.end);
        // Each base panel is loaded into L1 once and meets every query panel of the task.
        for p in start..end {
            let bpanel = &data[p * dim * nr..(p + 1) * dim * nr];
            let bcol = &sb.col_add[p * nr..(p + 1) * nr];
            let id0 = sb.row0 + p * nr;
            for (qp, (apanel, bounds)) in apack
                .chunks_exact(dim * mr)
                .zip(bounds.chunks_exact_mut(mr))
                .enumerate()
            {
                let r0 = qp * mr;
                let mut hit = |i: usize, _: usize, mut mask: u32, vals: &[f32]| -> f32 {
                    let r = r0 + i;
                    if r >= nq {
                        return f32::NEG_INFINITY;
                    }
                    let (qv, skip) = query(base, queries, q0 + r);
                    // `+ 0.0` turns -0 into +0, so that ordering by value and by bits agree.
                    let exact = |id: NodeId| dist.eval(qv, base.row(id as usize)) + 0.0;
                    let (c, row) = (&mut cands[r], &rows[r]);
                    while mask != 0 {
                        let j = mask.trailing_zeros() as usize;
                        mask &= mask - 1;
                        let id = id0 + j;
                        if id >= n || id as NodeId == skip {
                            continue;
                        }
                        let v = vals[j];
                        // Bypassing rows and columns (-inf) and overflows (NaN) are evaluated now.
                        if row.forced || !v.is_finite() {
                            c.push_exact(exact(id as NodeId), id as NodeId, k);
                        } else {
                            c.push_approx(v, id as NodeId, k, cap, row, &exact);
                        }
                    }
                    c.bound(row)
                };
                let one_panel = BasePanels {
                    b: bpanel,
                    col_add: bcol,
                    panels: 1,
                };
                kern.run(apanel, dim, one_panel, bounds, &mut hit);
            }
        }
        start = end;
    }
    // Between superblocks only the survivors are kept: the lists of all queries stay near k long,
    // and only the running tasks' lists grow to `cap`.
    for (r, (c, row)) in cands.iter_mut().zip(rows).enumerate() {
        let (qv, _) = query(base, queries, q0 + r);
        let exact = |id: NodeId| dist.eval(qv, base.row(id as usize)) + 0.0;
        c.settle(k, row, &exact);
    }
    Ok(())
}
