//! The out-of-GPU-memory GNND build: shards built on the device one at a time and merged
//! pairwise with GGM ([`Gnnd::merge_device_cross`]), two shards resident at a time.
//!
//! Plan (see `docs/gnnd.md`): the shard capacity is the largest row count such that two shards
//! and one merge's buffers fit the budget. [`ShardSchedule::AllPairs`] cuts the rows into `s`
//! contiguous, balanced shards and merges every pair (`s (s - 1) / 2` merges, the paper's
//! schedule); [`ShardSchedule::Nearest`] cuts them into locality-aware shards
//! ([`crate::partition::locality_partition`]: fine k-means clusters of a sample grouped under
//! the capacity)
//! and merges each shard with its `m` partners of highest boundary affinity (between `s m / 2`
//! and `s m` merges); [`ShardSchedule::Auto`] (the default) picks the smallest such `m` that
//! keeps 99% of the true neighbour pairs of 256 probe points (measured by an exact CPU scan),
//! or all pairs of contiguous shards when that `m` would merge nearly as many pairs. The uploads and merges follow [`crate::partition::schedule_steps`]: a
//! shard is uploaded only when it is not resident, and its graph is built on its first upload.
//!
//! The merges always run on the pristine shard graphs; their cross neighbours are folded into
//! the accumulated global rows on the host (an exact top-k union: a cross neighbour of shard
//! `j` can only come from merge `(i, j)`, so no duplicate can arise). The accumulated rows are
//! kept shard by shard (each shard's rows contiguous) and put back in row order at the end. The
//! vectors are read per shard from the caller's view (a memory-mapped file stays mapped: only
//! the shards being uploaded are read; a contiguous shard is uploaded straight from the view, the
//! rows of a locality-aware shard are gathered into a host buffer first).

use std::ops::Range;
use std::time::Instant;

use rayon::prelude::*;
use weft_core::{BuildCtx, DatasetView, Element, Error, INVALID, KnnGraph, Metric, NodeId, Result};
use weft_gpu::{DeviceMatrix, GpuContext};

use crate::NnDescentParams;
use crate::gpu::gnnd::{Gnnd, GnndStats, GnndTuning, MergeSide};

use crate::partition::{
    self, ShardSchedule, Step, all_pairs, contiguous_shards, fine_clusters, locality_partition,
    nearest_pairs, schedule_steps,
};

/// How an out-of-memory build cuts the rows and merges the shards.
#[derive(Clone, Debug, PartialEq)]
pub struct ShardPlan {
    /// The schedule the plan follows.
    pub schedule: ShardSchedule,
    /// Each shard's global row ids, ascending (contiguous ranges for
    /// [`ShardSchedule::AllPairs`]).
    pub shards: Vec<Vec<NodeId>>,
    /// The shard pairs merged, `(i, j)` with `i < j`, ascending.
    pub pairs: Vec<(usize, usize)>,
    /// The uploads and merges, in the order they run.
    pub steps: Vec<Step>,
    /// Rows of the largest shard (the capacity of each of the two device matrices).
    pub shard_rows: usize,
    /// Device bytes the plan uses at most: two shard matrices and one merge's buffers.
    pub bytes: u64,
    /// Host seconds spent partitioning (k-means, assignment and, for
    /// [`ShardSchedule::Auto`], the probe scan; 0 for contiguous shards).
    pub seconds: f64,
    /// What [`ShardSchedule::Auto`] measured and chose (`None` for the other schedules);
    /// `schedule` is then the `Nearest(m)` it chose, or `AllPairs` when that `m` would run at
    /// least [`partition::AUTO_ALL_PAIRS_SHARE`] of the contiguous plan's merges.
    pub auto: Option<partition::AutoChoice>,
}

/// The shard capacity of a budget: device bytes per row of a merge and the most rows a shard
/// may have.
struct Capacity {
    per_row: u64,
    cap: usize,
}

impl Capacity {
    fn new<T: Element>(dim: usize, k: usize, params: &NnDescentParams, budget: u64) -> Self {
        // Every buffer is linear in the rows: one row of a merge (its vector, list, inbox,
        // samples) costs `per_row`. The builds and merges use the default tuning.
        let per_row = GnndTuning::default().merge_bytes_needed::<T>(1, 1, dim, k, params, true) / 2;
        Capacity {
            per_row,
            cap: usize::try_from(budget / (2 * per_row)).unwrap_or(usize::MAX),
        }
    }

    fn too_small<T: Element>(&self, n: usize, dim: usize, k: usize, budget: u64) -> Error {
        let rows = k + 1;
        Error::invalid_param(
            "gpu_mem_limit",
            format!(
                "a device budget of {budget} bytes is too small for an out-of-memory build of \
                 {n} x {dim} {} with k = {k}: two shards of at least {rows} rows need {} bytes",
                T::DTYPE,
                2 * rows as u64 * self.per_row
            ),
        )
    }
}

impl ShardPlan {
    /// The [`ShardSchedule::AllPairs`] plan for `n` vectors of `dim` elements of `T`, degree
    /// `k`, within `budget` device bytes: as few contiguous shards as possible such that two of
    /// them and their merge fit, every pair merged. Fails with [`Error::InvalidParams`]
    /// (`gpu_mem_limit`, stating the minimum) when even two shards of `k + 1` rows do not fit.
    pub fn new<T: Element>(
        n: usize,
        dim: usize,
        k: usize,
        params: &NnDescentParams,
        budget: u64,
    ) -> Result<ShardPlan> {
        let c = Capacity::new::<T>(dim, k, params, budget);
        let min_rows = k + 1;
        if c.cap < min_rows {
            return Err(c.too_small::<T>(n, dim, k, budget));
        }
        let s = n.div_ceil(c.cap).max(1);
        if s > 1 && n / s < min_rows {
            return Err(c.too_small::<T>(n, dim, k, budget));
        }
        Ok(Self::from_shards(
            ShardSchedule::AllPairs,
            contiguous_shards(n, s),
            all_pairs(s),
            c.per_row,
            0.0,
            None,
        ))
    }

    /// The plan of `schedule` for `data` (see [`ShardSchedule`]): [`ShardPlan::new`] for
    /// [`ShardSchedule::AllPairs`]; for [`ShardSchedule::Nearest`]`(m)`, locality-aware shards
    /// of at most `cap` rows (the capacity [`ShardPlan::new`] uses) from
    /// [`fine_clusters`]`(n, cap)` fine clusters, partitioned with `seed`
    /// ([`locality_partition`]), each merged with its `m` partners ([`nearest_pairs`]); for
    /// [`ShardSchedule::Auto`], the same shards with the smallest `m` that keeps
    /// [`partition::AUTO_KEPT`] of the probe points' true neighbour pairs
    /// ([`partition::choose_partners`]; the plan's `schedule` is then that `Nearest(m)`, or
    /// the contiguous all-pairs plan when `m` would run at least
    /// [`partition::AUTO_ALL_PAIRS_SHARE`] of its merges; `auto` says what was measured). The same data, parameters and seed give the same plan
    /// (on the same CPU: the distances use its SIMD kernels).
    pub fn for_schedule<T: Element>(
        data: DatasetView<'_, T>,
        metric: Metric,
        k: usize,
        params: &NnDescentParams,
        budget: u64,
        schedule: ShardSchedule,
        seed: u64,
    ) -> Result<ShardPlan> {
        schedule.validate()?;
        let (n, dim) = (data.rows(), data.dim());
        let m = match schedule {
            ShardSchedule::AllPairs => return Self::new::<T>(n, dim, k, params, budget),
            ShardSchedule::Nearest(m) => Some(m),
            ShardSchedule::Auto => None,
        };
        let c = Capacity::new::<T>(dim, k, params, budget);
        let min_rows = k + 1;
        if c.cap < min_rows {
            return Err(c.too_small::<T>(n, dim, k, budget));
        }
        if n <= c.cap {
            return Ok(Self::from_shards(
                schedule,
                contiguous_shards(n, 1),
                Vec::new(),
                c.per_row,
                0.0,
                None,
            ));
        }
        let t = Instant::now();
        let part = locality_partition(
            data,
            metric,
            c.cap,
            min_rows,
            fine_clusters(n, c.cap),
            weft_core::rng::hash3(seed, 0x7368_6172_6473, 0),
        )?;
        let (m, auto) = match m {
            Some(m) => (m, None),
            None => {
                let truth = partition::probe_neighbours(
                    data,
                    metric,
                    partition::AUTO_PROBES,
                    k.min(partition::AUTO_PROBE_K),
                );
                let choice = partition::choose_partners(&part, &truth, partition::AUTO_KEPT);
                (choice.m.max(1), Some(choice))
            }
        };
        let schedule = ShardSchedule::Nearest(m);
        let pairs = nearest_pairs(&part, m);
        // When the data needs nearly every pair anyway, the contiguous all-pairs plan costs
        // about the same and refines every list against every shard (higher recall).
        if auto.is_some() {
            let s = n.div_ceil(c.cap).max(1);
            let all = s * (s - 1) / 2;
            if pairs.len() as f64 >= partition::AUTO_ALL_PAIRS_SHARE * all as f64
                && let Ok(mut plan) = Self::new::<T>(n, dim, k, params, budget)
            {
                plan.auto = auto;
                plan.seconds = t.elapsed().as_secs_f64();
                return Ok(plan);
            }
        }
        let seconds = t.elapsed().as_secs_f64();
        Ok(Self::from_shards(
            schedule,
            part.shards,
            pairs,
            c.per_row,
            seconds,
            auto,
        ))
    }

    fn from_shards(
        schedule: ShardSchedule,
        shards: Vec<Vec<NodeId>>,
        pairs: Vec<(usize, usize)>,
        per_row: u64,
        seconds: f64,
        auto: Option<partition::AutoChoice>,
    ) -> ShardPlan {
        let shard_rows = shards.iter().map(Vec::len).max().unwrap_or(0);
        let steps = schedule_steps(shards.len(), &pairs);
        ShardPlan {
            schedule,
            shards,
            pairs,
            steps,
            shard_rows,
            bytes: 2 * shard_rows as u64 * per_row,
            seconds,
            auto,
        }
    }

    /// Pairwise merges the schedule runs.
    pub fn merges(&self) -> usize {
        self.pairs.len()
    }

    /// Shard uploads the schedule makes.
    pub fn loads(&self) -> usize {
        partition::count_loads(&self.steps)
    }

    /// Checks that the shards partition `0..n` (every row exactly once, ids ascending, no
    /// shard empty) and that the pairs and steps name existing shards.
    pub fn check(&self, n: usize) -> Result<()> {
        let bad = |what: String| Err(Error::InvalidInput(format!("shard plan: {what}")));
        let mut seen = vec![false; n];
        for (c, ids) in self.shards.iter().enumerate() {
            if ids.is_empty() || ids.len() > self.shard_rows {
                return bad(format!("shard {c} has {} rows", ids.len()));
            }
            if !ids.windows(2).all(|w| w[0] < w[1]) {
                return bad(format!("shard {c} is not ascending"));
            }
            for &v in ids {
                match seen.get_mut(v as usize) {
                    Some(x) if !*x => *x = true,
                    _ => return bad(format!("row {v} out of range or repeated, data of {n}")),
                }
            }
        }
        if !seen.iter().all(|&x| x) {
            return bad(format!("the shards do not cover the {n} rows"));
        }
        let s = self.shards.len();
        if self.pairs.iter().any(|&(i, j)| i >= j || j >= s)
            || self.steps != schedule_steps(s, &self.pairs)
        {
            return bad("pairs or steps do not match the shards".into());
        }
        Ok(())
    }
}

/// What an out-of-memory build did.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ShardedStats {
    /// The schedule followed.
    pub schedule: Option<ShardSchedule>,
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
    /// Wall-clock seconds of the partitioning (from the plan), the shard uploads (host gather
    /// included), the shard builds (download included), the merges (download included) and the
    /// host-side folding of the merge results (and the final reordering of the rows).
    pub seconds: StageSeconds,
}

/// Where the time of an out-of-memory build went, in wall-clock seconds.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct StageSeconds {
    /// Partitioning (k-means and assignment; host, when the plan was made).
    pub partition: f64,
    /// Shard uploads.
    pub upload: f64,
    /// Shard builds.
    pub build: f64,
    /// Pairwise merges.
    pub merge: f64,
    /// Folding merge results into the accumulated rows, and putting them in row order (host).
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
pub(crate) fn build_sharded<T: Element>(
    ctx: &GpuContext,
    data: DatasetView<'_, T>,
    metric: Metric,
    k: usize,
    params: &NnDescentParams,
    plan: &ShardPlan,
    build: &BuildCtx,
) -> Result<(KnnGraph, ShardedStats)> {
    let n = data.rows();
    let dim = data.dim();
    let s = plan.shards.len();
    plan.check(n)?;
    let matrices = 2 * DeviceMatrix::<T>::bytes_for(plan.shard_rows, dim);
    ctx.check_fits(plan.bytes, Some(plan.bytes))?;
    let gnnd = Gnnd::new(ctx).with_budget(plan.bytes - matrices);
    // The inner builds and merges report no progress of their own; they share the cancel flag
    // and each has its own seed, derived from the build's.
    let inner = |a: usize, b: usize| {
        BuildCtx::new(weft_core::rng::hash3(build.seed(), a as u64, b as u64))
            .with_cancel(build.cancel_token().clone())
    };
    let mut stats = ShardedStats {
        schedule: Some(plan.schedule),
        shards: s,
        shard_rows: plan.shard_rows,
        bytes: plan.bytes,
        ..Default::default()
    };
    stats.seconds.partition = plan.seconds;
    // The accumulated rows, shard by shard: shard `c`'s rows at `offsets[c]..offsets[c + 1]`.
    let mut offsets = Vec::with_capacity(s + 1);
    offsets.push(0usize);
    for ids in &plan.shards {
        offsets.push(offsets.last().expect("non-empty") + ids.len());
    }
    let mut acc = AccumulatedRows {
        ids: vec![INVALID; n * k],
        dists: vec![f32::INFINITY; n * k],
        k,
    };
    let mut local: Vec<Option<KnnGraph>> = vec![None; s];
    build.progress().begin(
        "gnnd out-of-memory (shard builds + merges)",
        Some((s + plan.merges()) as u64),
    );
    let mut slots = [
        DeviceMatrix::<T>::with_capacity(ctx, plan.shard_rows, dim)?,
        DeviceMatrix::<T>::with_capacity(ctx, plan.shard_rows, dim)?,
    ];
    let contiguous = |ids: &[NodeId]| {
        ids.last()
            .is_some_and(|&l| (l - ids[0]) as usize + 1 == ids.len())
    };
    let mut gather: Vec<T> = if plan.shards.iter().all(|ids| contiguous(ids)) {
        Vec::new()
    } else {
        vec![T::from_f32(0.0); plan.shard_rows * dim]
    };
    for step in &plan.steps {
        build.check_cancelled()?;
        match *step {
            Step::Load { shard: c, slot } => {
                let ids = &plan.shards[c];
                let t = Instant::now();
                if contiguous(ids) {
                    let r = ids[0] as usize..ids[0] as usize + ids.len();
                    slots[slot].upload_rows(ctx, data.slice_rows(r)?)?;
                } else {
                    let buf = &mut gather[..ids.len() * dim];
                    buf.par_chunks_mut(dim)
                        .zip(ids.par_iter())
                        .for_each(|(o, &v)| o.copy_from_slice(data.row(v as usize)));
                    slots[slot].upload_rows(ctx, DatasetView::new(buf, ids.len(), dim)?)?;
                }
                stats.seconds.upload += t.elapsed().as_secs_f64();
                stats.loads += 1;
                if local[c].is_none() {
                    let t = Instant::now();
                    let (g, st) =
                        gnnd.build_device(&slots[slot], metric, k, params, &inner(c, c))?;
                    let g = g.download(ctx)?;
                    let rows = offsets[c] * k..offsets[c + 1] * k;
                    acc.ids[rows.clone()]
                        .par_iter_mut()
                        .zip(g.ids().par_iter())
                        .for_each(|(o, &v)| {
                            *o = if v == INVALID {
                                INVALID
                            } else {
                                ids[v as usize]
                            }
                        });
                    acc.dists[rows].copy_from_slice(g.dists());
                    local[c] = Some(g);
                    stats.builds.push(st);
                    stats.seconds.build += t.elapsed().as_secs_f64();
                    build.progress().advance(1);
                }
            }
            Step::Merge {
                first: i,
                second: j,
                first_slot,
            } => {
                let (gi, gj) = (
                    local[i].as_ref().expect("built on load"),
                    local[j].as_ref().expect("built on load"),
                );
                let t = Instant::now();
                let (a, b) = (&slots[first_slot], &slots[1 - first_slot]);
                let (h, st) = gnnd.merge_device_cross(
                    MergeSide::new(a, gi),
                    MergeSide::new(b, gj),
                    metric,
                    params,
                    &inner(i, j),
                )?;
                let h = h.download(ctx)?;
                stats.seconds.merge += t.elapsed().as_secs_f64();
                let t = Instant::now();
                let (ni, nj) = (plan.shards[i].len(), plan.shards[j].len());
                // Rows of shard i take h's cross entries (ids >= ni, shard j); rows of j take
                // the entries < ni (shard i).
                acc.fold_cross(
                    offsets[i]..offsets[i + 1],
                    &h,
                    0,
                    ni..ni + nj,
                    &plan.shards[j],
                );
                acc.fold_cross(offsets[j]..offsets[j + 1], &h, ni, 0..ni, &plan.shards[i]);
                stats.seconds.fold += t.elapsed().as_secs_f64();
                stats.merges += 1;
                stats.merge_stats.push(st);
                build.progress().advance(1);
            }
        }
    }
    build.progress().end();
    drop(slots);
    drop(local);
    let t = Instant::now();
    let in_order = plan
        .shards
        .iter()
        .zip(&offsets)
        .all(|(ids, &o)| ids[0] as usize == o && contiguous(ids));
    let graph = if in_order {
        KnnGraph::from_parts(n, k, acc.ids, acc.dists)?
    } else {
        // Back to row order: global row `v` is accumulated row `pos[v]`.
        let mut pos = vec![0u32; n];
        for (ids, &o) in plan.shards.iter().zip(&offsets) {
            for (l, &v) in ids.iter().enumerate() {
                pos[v as usize] = (o + l) as u32;
            }
        }
        let mut out_ids = vec![INVALID; n * k];
        let mut out_d = vec![f32::INFINITY; n * k];
        out_ids
            .par_chunks_mut(k)
            .zip(out_d.par_chunks_mut(k))
            .zip(pos.par_iter())
            .for_each(|((oi, od), &p)| {
                let p = p as usize;
                oi.copy_from_slice(&acc.ids[p * k..(p + 1) * k]);
                od.copy_from_slice(&acc.dists[p * k..(p + 1) * k]);
            });
        drop(acc);
        KnnGraph::from_parts(n, k, out_ids, out_d)?
    };
    stats.seconds.fold += t.elapsed().as_secs_f64();
    Ok((graph, stats))
}

/// The accumulated global rows of an out-of-memory build (sorted, `k` entries each, padding
/// last), kept shard by shard: the shards' builds write them, the merges' cross neighbours are
/// folded into them ([`AccumulatedRows::fold_cross`]).
struct AccumulatedRows {
    /// Neighbour ids (global), `k` per row.
    ids: Vec<NodeId>,
    /// Their distances.
    dists: Vec<f32>,
    /// Entries per row.
    k: usize,
}

impl AccumulatedRows {
    /// Folds the cross entries of merge result `h` into the accumulated rows `rows`: accumulated
    /// row `v` of `rows` is row `first + (v - rows.start)` of `h`; its entries with ids in
    /// `cross` (the other shard, whose global ids are `cross_ids[id - cross.start]`) are merged
    /// into the sorted accumulated row (top `k`, ties by global id).
    fn fold_cross(
        &mut self,
        rows: Range<usize>,
        h: &KnnGraph,
        first: usize,
        cross: Range<usize>,
        cross_ids: &[NodeId],
    ) {
        let k = self.k;
        let ids = &mut self.ids[rows.start * k..rows.end * k];
        let dists = &mut self.dists[rows.start * k..rows.end * k];
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
                                let bid = cross_ids[hi[y] as usize - cross.start];
                                hd[y] < rd[x] || (hd[y] == rd[x] && bid < ri[x])
                            }
                        };
                        if take_b {
                            mi.push(cross_ids[hi[y] as usize - cross.start]);
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
}
