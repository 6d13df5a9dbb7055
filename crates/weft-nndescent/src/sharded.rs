//! The out-of-GPU-memory GNND build: shards built on the device one at a time and merged
//! pairwise with GGM ([`weft_gpu::Gnnd::merge_device_cross`]), two shards resident at a time.
//!
//! Schedule (see `docs/gnnd.md`): the rows are cut into `s` contiguous, balanced shards, as
//! large as the budget allows for two shards and one merge's buffers. Shard `i`'s vectors are
//! loaded into device matrix A, then every shard `j > i` in turn into matrix B, and `(i, j)` is
//! merged; a shard's own graph is built the first time it is loaded. Every pair is merged once
//! (`s (s - 1) / 2` merges, `2 s - 2 + (s - 1)(s - 2) / 2` shard loads). The merges always run on
//! the pristine shard graphs; their cross neighbours are folded into the accumulated global rows
//! on the host (an exact top-k union: a cross neighbour of shard `j` can only come from merge
//! `(i, j)`, so no duplicate can arise). The vectors are read per shard from the caller's view
//! (a memory-mapped file stays mapped: only the two shards being merged are copied, through the
//! pinned staging buffers).

use std::ops::Range;
use std::time::Instant;

use rayon::prelude::*;
use weft_core::{BuildCtx, DatasetView, Element, Error, INVALID, KnnGraph, Metric, NodeId, Result};
use weft_gpu::{DeviceMatrix, Gnnd, GnndConfig, GnndStats, GpuContext};

/// How an out-of-memory build cuts the rows.
#[derive(Clone, Debug, PartialEq)]
pub struct ShardPlan {
    /// The shards' row ranges: contiguous, in order, sizes differing by at most one.
    pub shards: Vec<Range<usize>>,
    /// Rows of the largest shard (the capacity of each of the two device matrices).
    pub shard_rows: usize,
    /// Device bytes the plan uses at most: two shard matrices and one merge's buffers.
    pub bytes: u64,
}

impl ShardPlan {
    /// The plan for `n` vectors of `dim` elements of `T`, degree `k`, within `budget` device
    /// bytes: as few shards as possible such that two of them and their merge fit. Fails with
    /// [`Error::InvalidParams`] (`gpu_mem_limit`, stating the minimum) when even two shards of
    /// `k + 1` rows do not fit.
    pub fn new<T: Element>(
        n: usize,
        dim: usize,
        k: usize,
        config: &GnndConfig,
        budget: u64,
    ) -> Result<ShardPlan> {
        // Every buffer is linear in the rows: one row of a merge (its vector, list, inbox,
        // samples) costs `per_row`.
        let per_row = Gnnd::merge_bytes_needed::<T>(1, 1, dim, k, config, true) / 2;
        let min_rows = k + 1;
        let cap = (budget / (2 * per_row)) as usize;
        let too_small = |rows: usize| {
            Error::invalid_param(
                "gpu_mem_limit",
                format!(
                    "a device budget of {budget} bytes is too small for an out-of-memory build of \
                     {n} x {dim} {} with k = {k}: two shards of at least {rows} rows need {} bytes",
                    T::DTYPE,
                    2 * rows as u64 * per_row
                ),
            )
        };
        if cap < min_rows {
            return Err(too_small(min_rows));
        }
        let s = n.div_ceil(cap).max(1);
        let base = n / s;
        if s > 1 && base < min_rows {
            return Err(too_small(min_rows));
        }
        let extra = n % s;
        let mut shards = Vec::with_capacity(s);
        let mut start = 0;
        for i in 0..s {
            let len = base + usize::from(i < extra);
            shards.push(start..start + len);
            start += len;
        }
        let shard_rows = base + usize::from(extra > 0);
        Ok(ShardPlan {
            shards,
            shard_rows,
            bytes: 2 * shard_rows as u64 * per_row,
        })
    }

    /// Pairwise merges the schedule runs: `s (s - 1) / 2`.
    pub fn merges(&self) -> usize {
        let s = self.shards.len();
        s * s.saturating_sub(1) / 2
    }

    /// Shard uploads the schedule makes: shard 0 and every other shard once for the first row
    /// of merges, then for each later `i`, shard `i` and the shards after it.
    pub fn loads(&self) -> usize {
        let s = self.shards.len();
        if s < 2 {
            return s;
        }
        2 * s - 2 + (s - 1) * (s - 2) / 2
    }
}

/// What an out-of-memory build did.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ShardedStats {
    /// Shards.
    pub shards: usize,
    /// Rows of the largest shard.
    pub shard_rows: usize,
    /// Shard uploads to the device.
    pub loads: usize,
    /// Pairwise merges run.
    pub merges: usize,
    /// The GNND statistics of each shard's build.
    pub builds: Vec<GnndStats>,
    /// The GGM statistics of each merge, in schedule order.
    pub merge_stats: Vec<GnndStats>,
    /// Device bytes planned (two shards and one merge).
    pub bytes: u64,
    /// Wall-clock seconds of the shard uploads, the shard builds (download included), the
    /// merges (download included) and the host-side folding of the merge results.
    pub seconds: StageSeconds,
}

/// Where the time of an out-of-memory build went, in wall-clock seconds.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct StageSeconds {
    /// Shard uploads.
    pub upload: f64,
    /// Shard builds.
    pub build: f64,
    /// Pairwise merges.
    pub merge: f64,
    /// Folding merge results into the accumulated rows (host).
    pub fold: f64,
}

impl ShardedStats {
    /// The statistics folded into one [`GnndStats`]: iterations, updates and drops of every
    /// build and merge in order, the planned bytes.
    pub fn total(&self) -> GnndStats {
        let mut t = GnndStats {
            bytes: self.bytes,
            ..Default::default()
        };
        for s in self.builds.iter().chain(&self.merge_stats) {
            t.iterations += s.iterations;
            t.updates.extend_from_slice(&s.updates);
            t.dropped.extend_from_slice(&s.dropped);
        }
        t
    }
}

/// Runs the out-of-memory build of `data` under `plan` (see the module documentation).
#[allow(clippy::too_many_arguments)]
pub(crate) fn build_sharded<T: Element>(
    ctx: &GpuContext,
    data: DatasetView<'_, T>,
    metric: Metric,
    k: usize,
    config: &GnndConfig,
    plan: &ShardPlan,
    build: &BuildCtx,
) -> Result<(KnnGraph, ShardedStats)> {
    let n = data.rows();
    let dim = data.dim();
    let s = plan.shards.len();
    if plan.shards.last().map(|r| r.end) != Some(n) {
        return Err(Error::InvalidInput(format!(
            "shard plan for {:?} rows, data of {n}",
            plan.shards.last().map(|r| r.end)
        )));
    }
    let matrices = 2 * DeviceMatrix::<T>::bytes_for(plan.shard_rows, dim);
    ctx.check_fits(plan.bytes, Some(plan.bytes))?;
    let gnnd = Gnnd::new(ctx).with_budget(plan.bytes - matrices);
    // The inner builds and merges report no progress of their own; they share the cancel flag.
    let inner = BuildCtx::new(build.seed()).with_cancel(build.cancel_token().clone());
    let mut stats = ShardedStats {
        shards: s,
        shard_rows: plan.shard_rows,
        bytes: plan.bytes,
        ..Default::default()
    };
    let mut acc_ids = vec![INVALID; n * k];
    let mut acc_d = vec![f32::INFINITY; n * k];
    let mut local: Vec<Option<KnnGraph>> = vec![None; s];
    build.progress().begin(
        "gnnd out-of-memory (shard builds + merges)",
        Some((s + plan.merges()) as u64),
    );
    let mut a = DeviceMatrix::<T>::with_capacity(ctx, plan.shard_rows, dim)?;
    let mut b = DeviceMatrix::<T>::with_capacity(ctx, plan.shard_rows, dim)?;
    // Uploads shard `i` into `m` and builds its graph the first time (into `local` and the
    // accumulated rows).
    let load = |m: &mut DeviceMatrix<T>,
                i: usize,
                local: &mut Vec<Option<KnnGraph>>,
                acc_ids: &mut [NodeId],
                acc_d: &mut [f32],
                stats: &mut ShardedStats|
     -> Result<()> {
        build.check_cancelled()?;
        let r = plan.shards[i].clone();
        let t = Instant::now();
        m.upload_rows(ctx, data.slice_rows(r.clone())?)?;
        stats.seconds.upload += t.elapsed().as_secs_f64();
        stats.loads += 1;
        if local[i].is_none() {
            let t = Instant::now();
            let cfg = GnndConfig {
                seed: weft_core::rng::hash3(config.seed, i as u64, i as u64),
                ..*config
            };
            let (g, st) = gnnd.build_device(m, metric, k, &cfg, &inner)?;
            let g = g.download(ctx)?;
            let off = r.start as NodeId;
            acc_ids[r.start * k..r.end * k]
                .par_iter_mut()
                .zip(g.ids().par_iter())
                .for_each(|(o, &v)| *o = if v == INVALID { INVALID } else { v + off });
            acc_d[r.start * k..r.end * k].copy_from_slice(g.dists());
            local[i] = Some(g);
            stats.builds.push(st);
            stats.seconds.build += t.elapsed().as_secs_f64();
            build.progress().advance(1);
        }
        Ok(())
    };
    if s == 1 {
        load(&mut a, 0, &mut local, &mut acc_ids, &mut acc_d, &mut stats)?;
    }
    for i in 0..s.saturating_sub(1) {
        load(&mut a, i, &mut local, &mut acc_ids, &mut acc_d, &mut stats)?;
        for j in i + 1..s {
            load(&mut b, j, &mut local, &mut acc_ids, &mut acc_d, &mut stats)?;
            let (gi, gj) = (
                local[i].as_ref().expect("built on load"),
                local[j].as_ref().expect("built on load"),
            );
            let cfg = GnndConfig {
                seed: weft_core::rng::hash3(config.seed, i as u64, j as u64),
                ..*config
            };
            let t = Instant::now();
            let (h, st) = gnnd.merge_device_cross(&a, gi, &b, gj, metric, &cfg, &inner)?;
            let h = h.download(ctx)?;
            stats.seconds.merge += t.elapsed().as_secs_f64();
            let t = Instant::now();
            let (ri, rj) = (plan.shards[i].clone(), plan.shards[j].clone());
            let ni = ri.len();
            // Rows of shard i take h's cross entries (ids >= ni, shard j); rows of j take the
            // entries < ni (shard i).
            fold_cross(
                &mut acc_ids,
                &mut acc_d,
                k,
                ri.clone(),
                &h,
                0,
                ni..ni + rj.len(),
                rj.start,
            );
            fold_cross(&mut acc_ids, &mut acc_d, k, rj, &h, ni, 0..ni, ri.start);
            stats.seconds.fold += t.elapsed().as_secs_f64();
            stats.merges += 1;
            stats.merge_stats.push(st);
            build.progress().advance(1);
        }
    }
    build.progress().end();
    let graph = KnnGraph::from_parts(n, k, acc_ids, acc_d)?;
    Ok((graph, stats))
}

/// Folds the cross entries of merge result `h` into the accumulated rows `rows`: row `v` of
/// `rows` is row `first + (v - rows.start)` of `h`; its entries with ids in `cross` (mapped to
/// `cross_start + id - cross.start`) are merged into the sorted accumulated row (top `k`).
#[allow(clippy::too_many_arguments)]
fn fold_cross(
    acc_ids: &mut [NodeId],
    acc_d: &mut [f32],
    k: usize,
    rows: Range<usize>,
    h: &KnnGraph,
    first: usize,
    cross: Range<usize>,
    cross_start: usize,
) {
    let ids = &mut acc_ids[rows.start * k..rows.end * k];
    let dists = &mut acc_d[rows.start * k..rows.end * k];
    ids.par_chunks_mut(k)
        .zip(dists.par_chunks_mut(k))
        .enumerate()
        .for_each_init(
            || (Vec::with_capacity(k), Vec::with_capacity(k)),
            |(mi, md), (r, (ri, rd))| {
                let (hi, hd) = (h.row_ids(first + r), h.row_dists(first + r));
                mi.clear();
                md.clear();
                let (mut x, mut y) = (0, 0);
                let next_cross = |y: &mut usize| {
                    while *y < k && hi[*y] != INVALID && !cross.contains(&(hi[*y] as usize)) {
                        *y += 1;
                    }
                };
                next_cross(&mut y);
                while mi.len() < k {
                    let a_ok = x < k && ri[x] != INVALID;
                    let b_ok = y < k && hi[y] != INVALID;
                    let take_b = match (a_ok, b_ok) {
                        (false, false) => break,
                        (true, false) => false,
                        (false, true) => true,
                        (true, true) => {
                            let bid = (cross_start + hi[y] as usize - cross.start) as NodeId;
                            hd[y] < rd[x] || (hd[y] == rd[x] && bid < ri[x])
                        }
                    };
                    if take_b {
                        mi.push((cross_start + hi[y] as usize - cross.start) as NodeId);
                        md.push(hd[y]);
                        y += 1;
                        next_cross(&mut y);
                    } else {
                        mi.push(ri[x]);
                        md.push(rd[x]);
                        x += 1;
                    }
                }
                let m = mi.len();
                ri[..m].copy_from_slice(mi);
                rd[..m].copy_from_slice(md);
                ri[m..].fill(INVALID);
                rd[m..].fill(f32::INFINITY);
            },
        );
}
