//! Shard partitions and merge schedules of the out-of-GPU-memory build (CPU only; the device
//! side is `sharded`, behind the `cuda` feature).
//!
//! - [`ShardSchedule`]: which shards the build cuts and which pairs it merges: the paper's
//!   contiguous shards with every pair merged, or locality-aware shards each merged with its `m`
//!   nearest shards.
//! - [`locality_partition`]: fine k-means clusters of a seeded sample grouped into shards under
//!   the capacity (clusters sharing the most boundary first), and the affinity of every shard
//!   pair (how many points lie close to the boundary between the two shards).
//! - [`nearest_pairs`]: each shard's `m` highest-affinity partners; [`all_pairs`]: every pair.
//! - [`schedule_steps`]: the order of uploads and merges over two device slots.
//!
//! See `docs/gnnd.md` ("Out-of-GPU-memory builds") for the rules and their cost.

use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use weft_core::distance::DistanceFn;
use weft_core::rng::{SplitMix64, below, hash3};
use weft_core::{DatasetView, Element, Error, Metric, NodeId, Result};

/// Probe points of [`ShardSchedule::Auto`] (evenly spaced rows).
pub const AUTO_PROBES: usize = 256;
/// True neighbours per probe point of [`ShardSchedule::Auto`] (at most; `k` when smaller).
pub const AUTO_PROBE_K: usize = 64;
/// The fraction of the probes' true neighbour pairs that [`ShardSchedule::Auto`] keeps inside
/// one shard or one merged shard pair (on 10M SIFT-like points, `m = 2` kept 0.986 of them and
/// reached recall@64 0.970, `m = 3` reached 0.976: `docs/gnnd.md`).
pub const AUTO_KEPT: f64 = 0.99;
/// When the merges of the `m` that [`ShardSchedule::Auto`] chose reach this share of the
/// contiguous all-pairs plan's merges, it takes that plan instead: about the same merge work,
/// and every list refined against every shard (2M DEEP-like points under 1 GiB: `m = 10`, 78
/// merges, recall@64 0.981 with locality-aware shards; all pairs, 78 merges, 0.9996).
pub const AUTO_ALL_PAIRS_SHARE: f64 = 0.75;
/// The largest accepted `m` of [`ShardSchedule::Nearest`].
pub const SHARD_NEIGHBOURS_LIMIT: usize = 4096;
/// Lloyd iterations of the sample k-means.
pub const LLOYD_ITERS: usize = 8;
/// The largest k-means sample.
pub const SAMPLE_MAX: usize = 100_000;
/// Sample points drawn per fine cluster (the sample is `clamp(SAMPLE_PER_CLUSTER * fine,
/// 10_000, SAMPLE_MAX)` points, or all of them).
pub const SAMPLE_PER_CLUSTER: usize = 200;
/// Fine clusters per shard of the contiguous plan: [`fine_clusters`].
pub const FINE_PER_SHARD: usize = 16;
/// The fewest and the most fine clusters.
pub const FINE_RANGE: (usize, usize) = (32, 256);

/// The fine clusters of a locality-aware partition of `n` rows into shards of at most `cap`:
/// `clamp(16 ceil(n / cap), 32, 256)`.
pub fn fine_clusters(n: usize, cap: usize) -> usize {
    (FINE_PER_SHARD * n.div_ceil(cap.max(1))).clamp(FINE_RANGE.0, FINE_RANGE.1)
}
/// The fraction of all points, those nearest to a boundary between their shard and another,
/// that make up the pair affinities.
pub const BOUNDARY_FRACTION: f64 = 0.25;

/// How an out-of-GPU-memory build cuts the rows into shards and which shard pairs it merges.
///
/// Serialized as `"auto"` (the default), `"all_pairs"` or `{"nearest": m}`. Anything else
/// fails to deserialize with a message that lists these forms ([`SHARD_SCHEDULE_FORMS`]), not
/// serde's words about variants.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", try_from = "ScheduleRepr")]
pub enum ShardSchedule {
    /// Locality-aware shards as [`ShardSchedule::Nearest`], with the smallest `m` whose merged
    /// pairs keep at least [`AUTO_KEPT`] of the true neighbour pairs of [`AUTO_PROBES`] probe
    /// points ([`choose_partners`]; exact neighbours by a CPU scan of the data). On weakly
    /// clustered data this grows `m`; once its merges reach [`AUTO_ALL_PAIRS_SHARE`] of the
    /// all-pairs plan's, the build takes [`ShardSchedule::AllPairs`].
    #[default]
    Auto,
    /// The paper's schedule: `s` contiguous shards of equal size, every pair merged
    /// (`s (s - 1) / 2` merges).
    AllPairs,
    /// Locality-aware shards (fine k-means clusters of a sample grouped under the capacity),
    /// each shard merged with its `m` partner shards of highest boundary affinity: between
    /// `s m / 2` and `s m` merges (at most `s (s - 1) / 2`). `m` in `1..=4096`.
    Nearest(usize),
}

/// The accepted forms of a [`ShardSchedule`], for error messages.
pub const SHARD_SCHEDULE_FORMS: &str = "`auto` (the default), `all_pairs` or {\"nearest\": M} \
    with M partner shards in 1..=4096, e.g. {\"nearest\": 4}";

/// What a [`ShardSchedule`] is read from: a name, or the one-key object `{"nearest": m}`.
#[derive(Deserialize)]
#[serde(
    untagged,
    expecting = "this is not a shard schedule: use `auto` (the default), `all_pairs` or {\"nearest\": M} with M \
                 partner shards in 1..=4096, e.g. {\"nearest\": 4}"
)]
enum ScheduleRepr {
    Name(String),
    #[serde(rename_all = "snake_case")]
    Nearest {
        nearest: usize,
    },
}

impl TryFrom<ScheduleRepr> for ShardSchedule {
    type Error = String;

    fn try_from(r: ScheduleRepr) -> std::result::Result<Self, String> {
        match r {
            ScheduleRepr::Name(n) if n == "auto" => Ok(ShardSchedule::Auto),
            ScheduleRepr::Name(n) if n == "all_pairs" => Ok(ShardSchedule::AllPairs),
            ScheduleRepr::Name(n) if n == "nearest" => Err(format!(
                "`nearest` needs its partner count M: use {SHARD_SCHEDULE_FORMS}"
            )),
            ScheduleRepr::Name(n) => Err(format!(
                "`{n}` is not a shard schedule: use {SHARD_SCHEDULE_FORMS}"
            )),
            ScheduleRepr::Nearest { nearest } => Ok(ShardSchedule::Nearest(nearest)),
        }
    }
}

impl ShardSchedule {
    /// Checks `m` (typed as the parameter `shard_schedule`).
    pub fn validate(&self) -> Result<()> {
        if let ShardSchedule::Nearest(m) = *self
            && !(1..=SHARD_NEIGHBOURS_LIMIT).contains(&m)
        {
            return Err(Error::invalid_param(
                "shard_schedule",
                format!("the partner shards m must be in 1..={SHARD_NEIGHBOURS_LIMIT}, got {m}"),
            ));
        }
        Ok(())
    }
}

/// `n` rows cut into `s` contiguous shards whose sizes differ by at most one.
pub fn contiguous_shards(n: usize, s: usize) -> Vec<Vec<NodeId>> {
    let s = s.max(1);
    let (base, extra) = (n / s, n % s);
    let mut start = 0;
    (0..s)
        .map(|i| {
            let len = base + usize::from(i < extra);
            let ids = (start as NodeId..(start + len) as NodeId).collect();
            start += len;
            ids
        })
        .collect()
}

/// Every shard pair `(i, j)`, `i < j`, in row order.
pub fn all_pairs(s: usize) -> Vec<(usize, usize)> {
    (0..s)
        .flat_map(|i| (i + 1..s).map(move |j| (i, j)))
        .collect()
}

/// A locality-aware partition (see [`locality_partition`]).
#[derive(Clone, Debug, PartialEq)]
pub struct LocalityPartition {
    /// Each shard's global row ids, ascending.
    pub shards: Vec<Vec<NodeId>>,
    /// The k-means centroids, `s x dim` (f32; unit-normalised rows for cosine).
    pub centroids: Vec<f32>,
    /// `s x s`, symmetric, zero diagonal: the boundary points between each pair of shards (a
    /// boundary point of shard `a` whose nearest other centroid is `b` counts for `(a, b)`).
    pub affinity: Vec<u64>,
}

impl LocalityPartition {
    /// Shards.
    pub fn len(&self) -> usize {
        self.shards.len()
    }

    /// Whether there are no shards.
    pub fn is_empty(&self) -> bool {
        self.shards.is_empty()
    }

    /// The squared distance between the centroids of shards `a` and `b`.
    pub fn centroid_distance(&self, a: usize, b: usize) -> f32 {
        let dim = self.centroids.len() / self.shards.len().max(1);
        l2(
            &self.centroids[a * dim..(a + 1) * dim],
            &self.centroids[b * dim..(b + 1) * dim],
        )
    }
}

fn l2(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| (x - y) * (x - y)).sum()
}

/// Row `i` of `data` as f32, unit-normalised for cosine (into `out`).
fn row_f32<T: Element>(data: DatasetView<'_, T>, i: usize, cosine: bool, out: &mut [f32]) {
    for (o, &v) in out.iter_mut().zip(data.row(i)) {
        *o = v.to_f32();
    }
    if cosine {
        let norm = out.iter().map(|x| x * x).sum::<f32>().sqrt();
        if norm > 0.0 {
            out.iter_mut().for_each(|x| *x /= norm);
        }
    }
}

/// The nearest centroid (ties: lower index) and its squared distance.
fn nearest(dist: &DistanceFn<f32>, x: &[f32], centroids: &[f32], dim: usize) -> (usize, f32) {
    centroids
        .chunks_exact(dim)
        .enumerate()
        .map(|(c, m)| (c, dist.eval(x, m)))
        .fold(
            (0, f32::INFINITY),
            |b, (c, d)| if d < b.1 { (c, d) } else { b },
        )
}

/// Nearest fine centroids kept per point (for the overflow and the shard affinities).
const TOP: usize = 4;

/// Cuts the `n` rows of `data` into locality-aware shards of at most `cap` and at least
/// `min_rows` rows each, deterministically for `seed`:
///
/// 1. **Fine clusters**: k-means with `fine` centroids (k-means++ seeding, [`LLOYD_ITERS`]
///    Lloyd iterations; an emptied cluster is re-seeded with the sample point farthest from its
///    centroid) on a stratified random sample of `clamp(200 fine, 10_000, 100_000)` rows (or
///    all). Distances are squared L2 on f32 values (rows unit-normalised for cosine;
///    inner-product data is partitioned by L2). Every point's 4 nearest fine centroids.
/// 2. **Fine affinities**: a point's gap to the boundary between its nearest fine centroid `a`
///    and its second `b` is its distance to their bisector, `(d(b) - d(a)) / 2 |c_a - c_b|`; the
///    [`BOUNDARY_FRACTION`] of points with the smallest gaps count for `(a, b)`.
/// 3. **Grouping** (agglomerative, heavy edge first): starting from one group per fine
///    cluster, the two groups with the highest affinity whose sizes sum to at most `cap` are
///    merged (ties: smaller combined size, then lower indices), until no two groups fit
///    together; the groups are the shards. Clusters that share much boundary end up in one
///    shard, so the cut between shards is small.
/// 4. **Assignment under the cap**: each point goes to the shard of its nearest fine centroid;
///    only a fine cluster larger than `cap` overflows: its points are taken in descending
///    margin (ties: lower id) and the rest go to the shard of their nearest fine centroid with
///    room. A shard below `min_rows` then takes the points nearest to its centroid from shards
///    above `min_rows`.
/// 5. **Shard affinity**: a point's gap (as in 2) between its own fine centroid and its
///    nearest fine centroid of another shard (among its 4 nearest); the [`BOUNDARY_FRACTION`] of
///    points with the smallest gaps count for their shard pair: shards that share many close
///    boundary points share many true neighbours.
///
/// Errors: [`Error::InvalidInput`] unless `fine >= 1`, `min_rows <= cap`, `min_rows <= n` and
/// `n` fits the id range.
pub fn locality_partition<T: Element>(
    data: DatasetView<'_, T>,
    metric: Metric,
    cap: usize,
    min_rows: usize,
    fine: usize,
    seed: u64,
) -> Result<LocalityPartition> {
    let n = data.rows();
    let dim = data.dim();
    if fine == 0 || min_rows > cap || min_rows > n || min_rows == 0 {
        return Err(Error::InvalidInput(format!(
            "cannot cut {n} rows into shards of {min_rows} to {cap} rows from {fine} clusters"
        )));
    }
    if n > NodeId::MAX as usize {
        return Err(Error::InvalidInput(format!("{n} rows exceed the id range")));
    }
    if dim == 0 {
        return Err(Error::InvalidInput("vector dimension 0".into()));
    }
    let cosine = metric == Metric::Cosine;
    let dist = DistanceFn::<f32>::new(Metric::L2Squared);
    let fine = fine.min(n);
    let fc = kmeans(data, cosine, fine, seed);
    let sep = |a: usize, b: usize| {
        dist.eval(&fc[a * dim..(a + 1) * dim], &fc[b * dim..(b + 1) * dim])
            .sqrt()
            .max(f32::MIN_POSITIVE)
    };
    // Step 1: every point's TOP nearest fine centroids (ids, squared distances), ascending.
    let t = TOP.min(fine);
    let top: Vec<([u32; TOP], [f32; TOP])> = (0..n)
        .into_par_iter()
        .map_init(
            || vec![0f32; dim],
            |row, i| {
                row_f32(data, i, cosine, row);
                let mut ids = [u32::MAX; TOP];
                let mut ds = [f32::INFINITY; TOP];
                for (c, m) in fc.chunks_exact(dim).enumerate() {
                    let d = dist.eval(row, m);
                    if d < ds[t - 1] {
                        let mut j = t - 1;
                        while j > 0 && ds[j - 1] > d {
                            ds[j] = ds[j - 1];
                            ids[j] = ids[j - 1];
                            j -= 1;
                        }
                        ds[j] = d;
                        ids[j] = c as u32;
                    }
                }
                (ids, ds)
            },
        )
        .collect();
    let gap = |x: &([u32; TOP], [f32; TOP]), o: usize| -> f32 {
        (x.1[o] - x.1[0]) / (2.0 * sep(x.0[0] as usize, x.0[o] as usize))
    };
    // Step 2: fine sizes and affinities.
    let mut size = vec![0usize; fine];
    for x in &top {
        size[x.0[0] as usize] += 1;
    }
    let mut faff = vec![0u64; fine * fine];
    if t >= 2 {
        let gaps: Vec<f32> = top.par_iter().map(|x| gap(x, 1)).collect();
        let tau = quantile(&gaps, BOUNDARY_FRACTION);
        for (x, &g) in top.iter().zip(&gaps) {
            if g <= tau {
                let (a, b) = (x.0[0] as usize, x.0[1] as usize);
                faff[a * fine + b] += 1;
                faff[b * fine + a] += 1;
            }
        }
    }
    // Step 3: agglomerative grouping under the cap.
    let mut group_of: Vec<usize> = (0..fine).collect();
    let mut alive: Vec<bool> = vec![true; fine];
    let mut gsize = size.clone();
    loop {
        let mut best: Option<(u64, usize, usize, usize)> = None;
        for a in 0..fine {
            if !alive[a] {
                continue;
            }
            for b in a + 1..fine {
                if !alive[b] || gsize[a] + gsize[b] > cap {
                    continue;
                }
                let key = (faff[a * fine + b], gsize[a] + gsize[b], a, b);
                let better = match best {
                    None => true,
                    Some((w, z, _, _)) => key.0 > w || (key.0 == w && key.1 < z),
                };
                if better {
                    best = Some(key);
                }
            }
        }
        let Some((_, _, a, b)) = best else { break };
        alive[b] = false;
        gsize[a] += gsize[b];
        gsize[b] = 0;
        for c in 0..fine {
            faff[a * fine + c] += faff[b * fine + c];
            faff[c * fine + a] += faff[c * fine + b];
            faff[b * fine + c] = 0;
            faff[c * fine + b] = 0;
        }
        faff[a * fine + a] = 0;
        for g in group_of.iter_mut() {
            if *g == b {
                *g = a;
            }
        }
    }
    // Shards numbered by their lowest fine cluster.
    let mut shard_no = vec![usize::MAX; fine];
    let mut s = 0;
    for a in 0..fine {
        if alive[a] {
            shard_no[a] = s;
            s += 1;
        }
    }
    let shard_of_fine: Vec<usize> = group_of.iter().map(|&g| shard_no[g]).collect();
    // Step 4: assignment; only fine clusters larger than the cap overflow.
    let mut shard_of = vec![0u32; n];
    let mut sizes = vec![0usize; s];
    let oversized: Vec<bool> = size.iter().map(|&z| z > cap).collect();
    let mut overflow: Vec<u32> = Vec::new();
    for (i, x) in top.iter().enumerate() {
        let f = x.0[0] as usize;
        if oversized[f] {
            overflow.push(i as u32);
        } else {
            let c = shard_of_fine[f];
            shard_of[i] = c as u32;
            sizes[c] += 1;
        }
    }
    overflow.sort_unstable_by(|&a, &b| {
        let (ma, mb) = (margin(&top[a as usize], t), margin(&top[b as usize], t));
        mb.total_cmp(&ma).then(a.cmp(&b))
    });
    let mut row = vec![0f32; dim];
    // Shards opened when no shard has room, each attached to the fine centroid it was opened
    // for.
    let mut extra: Vec<usize> = Vec::new();
    for &i in &overflow {
        let f1 = top[i as usize].0[0] as usize;
        let c1 = shard_of_fine[f1];
        let c = if sizes[c1] < cap {
            c1
        } else {
            row_f32(data, i as usize, cosine, &mut row);
            let by_fine = fc
                .chunks_exact(dim)
                .enumerate()
                .map(|(f, m)| (shard_of_fine[f], m));
            let by_extra = extra
                .iter()
                .enumerate()
                .map(|(e, &f)| (s + e, &fc[f * dim..(f + 1) * dim]));
            let (c, _) = by_fine
                .chain(by_extra)
                .filter(|&(c, _)| sizes[c] < cap)
                .map(|(c, m)| (c, dist.eval(&row, m)))
                .fold((usize::MAX, f32::INFINITY), |b, (c, d)| {
                    if d < b.1 || b.0 == usize::MAX {
                        (c, d)
                    } else {
                        b
                    }
                });
            if c == usize::MAX {
                extra.push(f1);
                sizes.push(0);
                s + extra.len() - 1
            } else {
                c
            }
        };
        shard_of[i as usize] = c as u32;
        sizes[c] += 1;
    }
    drop(overflow);
    // Shard centroids: the size-weighted means of their fine centroids (an opened shard: its
    // fine centroid).
    let fine_shards = s;
    s += extra.len();
    let mut centroids = vec![0f32; s * dim];
    for (e, &f) in extra.iter().enumerate() {
        centroids[(fine_shards + e) * dim..(fine_shards + e + 1) * dim]
            .copy_from_slice(&fc[f * dim..(f + 1) * dim]);
    }
    for f in 0..fine {
        let c = shard_of_fine[f];
        if gsize[group_of[f]] == 0 {
            continue;
        }
        let w = size[f] as f32 / gsize[group_of[f]] as f32;
        for (o, &x) in centroids[c * dim..(c + 1) * dim]
            .iter_mut()
            .zip(&fc[f * dim..(f + 1) * dim])
        {
            *o += w * x;
        }
    }
    // Shards below the minimum take the points nearest to their centroid.
    let total_min = s.saturating_mul(min_rows);
    if total_min > n {
        return Err(Error::InvalidInput(format!(
            "{s} shards of at least {min_rows} rows do not fit {n} rows"
        )));
    }
    for c in 0..s {
        if sizes[c] >= min_rows {
            continue;
        }
        let m = &centroids[c * dim..(c + 1) * dim];
        let mut cand: Vec<(f32, u32)> = (0..n)
            .into_par_iter()
            .filter(|&i| shard_of[i] as usize != c)
            .map_init(
                || vec![0f32; dim],
                |row, i| {
                    row_f32(data, i, cosine, row);
                    (dist.eval(row, m), i as u32)
                },
            )
            .collect();
        cand.par_sort_unstable_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
        for &(_, i) in &cand {
            if sizes[c] >= min_rows {
                break;
            }
            let from = shard_of[i as usize] as usize;
            if sizes[from] > min_rows {
                sizes[from] -= 1;
                sizes[c] += 1;
                shard_of[i as usize] = c as u32;
            }
        }
    }
    // Step 5: shard affinities from each point's nearest fine centroid of another shard.
    let gaps: Vec<(f32, u32)> = top
        .par_iter()
        .enumerate()
        .map(|(i, x)| {
            let own = shard_of[i] as usize;
            (0..t)
                .find(|&o| shard_of_fine[x.0[o] as usize] != own)
                .map_or((f32::INFINITY, u32::MAX), |o| {
                    let other = shard_of_fine[x.0[o] as usize] as u32;
                    if o == 0 {
                        // Placed away from its nearest fine centroid: on the boundary.
                        (f32::NEG_INFINITY, other)
                    } else {
                        (gap(x, o), other)
                    }
                })
        })
        .collect();
    drop(top);
    let g: Vec<f32> = gaps.iter().map(|x| x.0).collect();
    let tau = quantile(&g, BOUNDARY_FRACTION);
    drop(g);
    let mut affinity = vec![0u64; s * s];
    for (i, &(g, b)) in gaps.iter().enumerate() {
        if g <= tau && b != u32::MAX {
            let a = shard_of[i] as usize;
            affinity[a * s + b as usize] += 1;
            affinity[b as usize * s + a] += 1;
        }
    }
    let mut shards: Vec<Vec<NodeId>> = sizes.iter().map(|&z| Vec::with_capacity(z)).collect();
    for (i, &c) in shard_of.iter().enumerate() {
        shards[c as usize].push(i as NodeId);
    }
    Ok(LocalityPartition {
        shards,
        centroids,
        affinity,
    })
}

/// The margin `d(second) - d(first)` of a point's nearest fine centroids (infinite with one).
fn margin(x: &([u32; TOP], [f32; TOP]), t: usize) -> f32 {
    if t >= 2 {
        x.1[1] - x.1[0]
    } else {
        f32::INFINITY
    }
}

/// The `q`-quantile of `v` (the value at rank `ceil(q len) - 1`; infinity when empty).
fn quantile(v: &[f32], q: f64) -> f32 {
    if v.is_empty() {
        return f32::INFINITY;
    }
    let r = ((v.len() as f64 * q).ceil() as usize).clamp(1, v.len()) - 1;
    let mut w = v.to_vec();
    let (_, &mut x, _) = w.select_nth_unstable_by(r, |a, b| a.total_cmp(b));
    x
}

/// k-means++ seeding and [`LLOYD_ITERS`] Lloyd iterations on a stratified sample of `data`:
/// `s x dim` centroids.
fn kmeans<T: Element>(data: DatasetView<'_, T>, cosine: bool, s: usize, seed: u64) -> Vec<f32> {
    let dist = DistanceFn::<f32>::new(Metric::L2Squared);
    let (n, dim) = (data.rows(), data.dim());
    let m = n.min((SAMPLE_PER_CLUSTER * s).clamp(10_000, SAMPLE_MAX));
    // Stratum i of the rows holds sample point i (a random row of it): distinct, ascending.
    let sample: Vec<f32> = (0..m)
        .into_par_iter()
        .flat_map_iter(|i| {
            let (lo, hi) = (i * n / m, (i + 1) * n / m);
            let r = lo + below(hash3(seed, 0x6b6d_6561_6e73, i as u64), (hi - lo) as u64) as usize;
            let mut row = vec![0f32; dim];
            row_f32(data, r, cosine, &mut row);
            row
        })
        .collect();
    let point = |i: usize| &sample[i * dim..(i + 1) * dim];
    // k-means++: each next centroid drawn with probability proportional to the squared
    // distance to the nearest chosen one.
    let mut rng = SplitMix64::new(hash3(seed, 0x6b6d_2b2b, s as u64));
    let mut centroids = Vec::with_capacity(s * dim);
    centroids.extend_from_slice(point(rng.below(m as u64) as usize));
    let mut best: Vec<f32> = (0..m)
        .into_par_iter()
        .map(|i| dist.eval(point(i), &centroids))
        .collect();
    for _ in 1..s {
        let total: f64 = best.iter().map(|&d| f64::from(d)).sum();
        let pick = if total > 0.0 {
            let target = rng.next_f64() * total;
            let mut acc = 0.0;
            best.iter()
                .position(|&d| {
                    acc += f64::from(d);
                    acc > target
                })
                .unwrap_or(m - 1)
        } else {
            rng.below(m as u64) as usize
        };
        let c = point(pick).to_vec();
        best.par_iter_mut()
            .enumerate()
            .for_each(|(i, b)| *b = b.min(dist.eval(point(i), &c)));
        centroids.extend_from_slice(&c);
    }
    const BLOCK: usize = 1024;
    for _ in 0..LLOYD_ITERS {
        let assign: Vec<(usize, f32)> = (0..m)
            .into_par_iter()
            .map(|i| nearest(&dist, point(i), &centroids, dim))
            .collect();
        // Per-block sums in parallel, added in block order: the same result on any thread count.
        let partial: Vec<(Vec<f64>, Vec<u64>)> = (0..m.div_ceil(BLOCK))
            .into_par_iter()
            .map(|b| {
                let mut sum = vec![0f64; s * dim];
                let mut cnt = vec![0u64; s];
                let end = ((b + 1) * BLOCK).min(m);
                for (i, &(c, _)) in assign.iter().enumerate().take(end).skip(b * BLOCK) {
                    cnt[c] += 1;
                    for (o, &x) in sum[c * dim..(c + 1) * dim].iter_mut().zip(point(i)) {
                        *o += f64::from(x);
                    }
                }
                (sum, cnt)
            })
            .collect();
        let mut sum = vec![0f64; s * dim];
        let mut cnt = vec![0u64; s];
        for (ps, pc) in &partial {
            sum.iter_mut().zip(ps).for_each(|(o, x)| *o += x);
            cnt.iter_mut().zip(pc).for_each(|(o, x)| *o += x);
        }
        let mut taken = vec![false; m];
        for c in 0..s {
            let out = &mut centroids[c * dim..(c + 1) * dim];
            if cnt[c] > 0 {
                for (o, &x) in out.iter_mut().zip(&sum[c * dim..(c + 1) * dim]) {
                    *o = (x / cnt[c] as f64) as f32;
                }
            } else {
                // Re-seed with the farthest sample point not yet used (ties: lower index).
                let far = (0..m)
                    .filter(|&i| !taken[i])
                    .fold((usize::MAX, f32::NEG_INFINITY), |b, i| {
                        if assign[i].1 > b.1 {
                            (i, assign[i].1)
                        } else {
                            b
                        }
                    })
                    .0;
                if far != usize::MAX {
                    taken[far] = true;
                    out.copy_from_slice(point(far));
                }
            }
        }
    }
    centroids
}

/// The shard pairs of [`ShardSchedule::Nearest`]: each shard's `m` partners of highest
/// affinity (ties: nearer centroid, then lower index), as pairs `(i, j)`, `i < j`, without
/// duplicates, in row order. Every shard is in at least `min(m, s - 1)` pairs.
pub fn nearest_pairs(partition: &LocalityPartition, m: usize) -> Vec<(usize, usize)> {
    let s = partition.len();
    let mut pairs = Vec::new();
    for a in 0..s {
        let mut others: Vec<usize> = (0..s).filter(|&b| b != a).collect();
        others.sort_by(|&x, &y| {
            partition.affinity[a * s + y]
                .cmp(&partition.affinity[a * s + x])
                .then(
                    partition
                        .centroid_distance(a, x)
                        .total_cmp(&partition.centroid_distance(a, y)),
                )
                .then(x.cmp(&y))
        });
        for &b in others.iter().take(m) {
            pairs.push((a.min(b), a.max(b)));
        }
    }
    pairs.sort_unstable();
    pairs.dedup();
    pairs
}

/// The true neighbours of `probes` evenly spaced rows of `data`: each probe's `k` nearest
/// other rows (by `metric`, ties by id), by an exact scan in blocks of rows (rayon; each block
/// is read once for all probes). Returns `(probe row, neighbour rows)`.
pub fn probe_neighbours<T: Element>(
    data: DatasetView<'_, T>,
    metric: Metric,
    probes: usize,
    k: usize,
) -> Vec<(NodeId, Vec<NodeId>)> {
    const BLOCK: usize = 2048;
    let n = data.rows();
    let q = probes.min(n);
    if q == 0 || k == 0 {
        return Vec::new();
    }
    let k = k.min(n - 1);
    let probe_rows: Vec<usize> = (0..q).map(|i| i * n / q).collect();
    let dist = DistanceFn::<T>::new(metric);
    let blocks = n.div_ceil(BLOCK);
    // Per probe: the best k (distance, id) seen, kept sorted.
    type Best = Vec<Vec<(f32, NodeId)>>;
    let merge_into = |list: &mut Vec<(f32, NodeId)>, d: f32, id: NodeId| {
        if list.len() == k {
            let last = list[k - 1];
            if d.total_cmp(&last.0).then(id.cmp(&last.1)).is_ge() {
                return;
            }
            list.pop();
        }
        let pos = list.partition_point(|e| e.0.total_cmp(&d).then(e.1.cmp(&id)).is_lt());
        list.insert(pos, (d, id));
    };
    let best: Best = (0..blocks)
        .into_par_iter()
        .fold(
            || (vec![Vec::with_capacity(k); q], vec![0f32; BLOCK]),
            |(mut best, mut buf), b| {
                let start = b * BLOCK;
                let rows = data
                    .slice_rows(start..(start + BLOCK).min(n))
                    .expect("a block lies within the rows");
                for (p, &v) in probe_rows.iter().enumerate() {
                    dist.eval_rows(data.row(v), rows, &mut buf);
                    for (i, &d) in buf[..rows.rows()].iter().enumerate() {
                        let u = start + i;
                        if u != v {
                            merge_into(&mut best[p], d, u as NodeId);
                        }
                    }
                }
                (best, buf)
            },
        )
        .map(|(best, _)| best)
        .reduce(
            || vec![Vec::new(); q],
            |mut a, b| {
                for (la, lb) in a.iter_mut().zip(b) {
                    for (d, id) in lb {
                        merge_into(la, d, id);
                    }
                }
                a
            },
        );
    probe_rows
        .into_iter()
        .zip(best)
        .map(|(v, l)| (v as NodeId, l.into_iter().map(|e| e.1).collect()))
        .collect()
}

/// The fraction of the neighbour pairs `(v, u)` of `truth` whose shards are equal or merged
/// (`pairs`, `(i, j)` with `i < j`); 1 when `truth` holds no pair.
pub fn kept_fraction(
    partition: &LocalityPartition,
    pairs: &[(usize, usize)],
    truth: &[(NodeId, Vec<NodeId>)],
) -> f64 {
    let s = partition.len();
    let mut shard_of = std::collections::HashMap::new();
    let mut merged = vec![false; s * s];
    for &(i, j) in pairs {
        merged[i * s + j] = true;
        merged[j * s + i] = true;
    }
    let wanted: std::collections::HashSet<NodeId> = truth
        .iter()
        .flat_map(|(v, row)| std::iter::once(*v).chain(row.iter().copied()))
        .collect();
    for (c, ids) in partition.shards.iter().enumerate() {
        for &v in ids {
            if wanted.contains(&v) {
                shard_of.insert(v, c);
            }
        }
    }
    let (mut kept, mut all) = (0usize, 0usize);
    for (v, row) in truth {
        let Some(&a) = shard_of.get(v) else { continue };
        for u in row {
            let Some(&b) = shard_of.get(u) else { continue };
            all += 1;
            if a == b || merged[a * s + b] {
                kept += 1;
            }
        }
    }
    if all == 0 {
        1.0
    } else {
        kept as f64 / all as f64
    }
}

/// What [`ShardSchedule::Auto`] chose: the partners `m` and the kept fraction
/// ([`kept_fraction`]) of every `m` it tried, from 1 up to the chosen one.
#[derive(Clone, Debug, PartialEq)]
pub struct AutoChoice {
    /// The partner shards chosen.
    pub m: usize,
    /// `kept[i]`: the kept fraction with `m = i + 1`.
    pub kept: Vec<f64>,
    /// Probe points and neighbours per probe the fractions were measured on.
    pub probes: usize,
    /// Neighbours per probe.
    pub k: usize,
}

/// The smallest `m` in `1..s` whose [`nearest_pairs`] keep at least `target` of the neighbour
/// pairs of `truth` (`s - 1`, every pair, when none does; 0 for a single shard).
pub fn choose_partners(
    partition: &LocalityPartition,
    truth: &[(NodeId, Vec<NodeId>)],
    target: f64,
) -> AutoChoice {
    let s = partition.len();
    let mut kept = Vec::new();
    let mut m = 0;
    for cand in 1..s {
        let f = kept_fraction(partition, &nearest_pairs(partition, cand), truth);
        kept.push(f);
        m = cand;
        if f >= target {
            break;
        }
    }
    AutoChoice {
        m,
        kept,
        probes: truth.len(),
        k: truth.first().map_or(0, |t| t.1.len()),
    }
}

/// One step of an out-of-memory schedule over the two device slots.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    /// Upload `shard` into `slot` (0 or 1); its graph is built on its first upload.
    Load {
        /// The shard.
        shard: usize,
        /// The device slot.
        slot: usize,
    },
    /// Merge the shards resident in the slots: `first` in slot `first_slot`, `second` in the
    /// other.
    Merge {
        /// The lower shard of the pair.
        first: usize,
        /// The higher shard of the pair.
        second: usize,
        /// The slot holding `first`.
        first_slot: usize,
    },
}

/// The uploads and merges that run `pairs` (`i < j < s`) with two device slots: rows by first
/// shard ascending; within a row the partners ascending, except that a partner still resident
/// from the previous merge goes first. A shard is uploaded only when it is not resident (into
/// the slot not holding the other shard of the pair); shards in no pair are loaded once at the
/// end (to be built). The merges are exactly `pairs`, each once.
pub fn schedule_steps(s: usize, pairs: &[(usize, usize)]) -> Vec<Step> {
    let mut rows: Vec<Vec<usize>> = vec![Vec::new(); s];
    for &(i, j) in pairs {
        rows[i].push(j);
    }
    let mut steps = Vec::new();
    let mut slots: [Option<usize>; 2] = [None, None];
    let mut loaded = vec![false; s];
    for (i, row) in rows.iter_mut().enumerate() {
        row.sort_unstable();
        row.dedup();
        if let Some(p) = row.iter().position(|&j| slots.contains(&Some(j))) {
            let j = row.remove(p);
            row.insert(0, j);
        }
        for &j in row.iter() {
            let first_slot = ensure_resident(i, Some(j), &mut slots, &mut loaded, &mut steps);
            ensure_resident(j, Some(i), &mut slots, &mut loaded, &mut steps);
            steps.push(Step::Merge {
                first: i,
                second: j,
                first_slot,
            });
        }
    }
    for x in 0..s {
        if !loaded[x] {
            ensure_resident(x, None, &mut slots, &mut loaded, &mut steps);
        }
    }
    steps
}

/// Makes shard `x` resident (uploading it into the slot not holding `keep` when it is not) and
/// returns its slot.
fn ensure_resident(
    x: usize,
    keep: Option<usize>,
    slots: &mut [Option<usize>; 2],
    loaded: &mut [bool],
    steps: &mut Vec<Step>,
) -> usize {
    if let Some(t) = slots.iter().position(|&h| h == Some(x)) {
        return t;
    }
    let t = match keep {
        Some(y) if slots[0] == Some(y) => 1,
        Some(y) if slots[1] == Some(y) => 0,
        _ => usize::from(slots[0].is_some() && slots[1].is_none()),
    };
    slots[t] = Some(x);
    loaded[x] = true;
    steps.push(Step::Load { shard: x, slot: t });
    t
}

/// Uploads in `steps`.
pub fn count_loads(steps: &[Step]) -> usize {
    steps
        .iter()
        .filter(|s| matches!(s, Step::Load { .. }))
        .count()
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use super::*;
    use weft_testkit::knn::{exact_knn, gaussian_mixture};

    fn check_partition(p: &LocalityPartition, n: usize, cap: usize, min_rows: usize) {
        let mut seen = vec![false; n];
        for ids in &p.shards {
            assert!(ids.len() <= cap, "shard of {} > cap {cap}", ids.len());
            assert!(ids.len() >= min_rows, "shard of {} < {min_rows}", ids.len());
            assert!(ids.windows(2).all(|w| w[0] < w[1]), "ids ascending");
            for &v in ids {
                assert!(!seen[v as usize], "point {v} assigned twice");
                seen[v as usize] = true;
            }
        }
        assert!(seen.iter().all(|&x| x), "every point assigned");
        let s = p.len();
        for a in 0..s {
            assert_eq!(p.affinity[a * s + a], 0);
            for b in 0..s {
                assert_eq!(p.affinity[a * s + b], p.affinity[b * s + a]);
            }
        }
    }

    #[test]
    fn every_point_once_within_the_caps() {
        for (n, dim, clusters, s, slack, fine, seed) in [
            (3000, 8, 12, 4, 1.1, 64, 1),
            (2500, 16, 3, 6, 1.0, 96, 2),
            (1000, 4, 1, 5, 1.3, 32, 3),
            (777, 32, 40, 7, 1.05, 112, 4),
            (500, 2, 5, 2, 1.0, 32, 5),
            (400, 3, 2, 4, 1.0, 2, 6),
        ] {
            let data = gaussian_mixture(n, dim, clusters, seed);
            let view = DatasetView::new(&data, n, dim).unwrap();
            let cap = ((n as f64 * slack) / s as f64).ceil() as usize;
            for metric in [Metric::L2Squared, Metric::Cosine] {
                let p = locality_partition(view, metric, cap, 20, fine, seed).unwrap();
                assert!(p.len() >= n.div_ceil(cap), "{} shards", p.len());
                check_partition(&p, n, cap, 20);
            }
        }
    }

    #[test]
    fn outliers_and_oversized_clusters() {
        // Two groups of 300 points and 3 far outliers, shards of at most 300: the outliers'
        // shard is topped up to the minimum.
        let (n, dim) = (603, 4);
        let mut rng = SplitMix64::new(9);
        let mut data: Vec<f32> = (0..600 * dim)
            .map(|i| (i / dim % 2) as f32 * 100.0 + rng.next_gaussian() as f32)
            .collect();
        data.extend(std::iter::repeat_n(1000.0f32, 3 * dim));
        let view = DatasetView::new(&data, n, dim).unwrap();
        let p = locality_partition(view, Metric::L2Squared, 300, 50, 3, 1).unwrap();
        check_partition(&p, n, 300, 50);
        // Half the points identical: one fine cluster far above the cap overflows into new
        // shards.
        let (n, dim) = (2000, 4);
        let mut data = gaussian_mixture(n / 2, dim, 3, 4);
        data.extend(std::iter::repeat_n(7.0f32, n / 2 * dim));
        let view = DatasetView::new(&data, n, dim).unwrap();
        let p = locality_partition(view, Metric::L2Squared, 250, 30, 8, 2).unwrap();
        check_partition(&p, n, 250, 30);
    }

    #[test]
    fn same_seed_same_plan() {
        let (n, dim) = (4000, 12);
        let data = gaussian_mixture(n, dim, 20, 7);
        let view = DatasetView::new(&data, n, dim).unwrap();
        let a = locality_partition(view, Metric::L2Squared, 900, 10, 64, 42).unwrap();
        let b = locality_partition(view, Metric::L2Squared, 900, 10, 64, 42).unwrap();
        assert_eq!(a, b);
        // And on one thread.
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(1)
            .build()
            .unwrap();
        let c = pool
            .install(|| locality_partition(view, Metric::L2Squared, 900, 10, 64, 42))
            .unwrap();
        assert_eq!(a, c);
        assert_eq!(nearest_pairs(&a, 2), nearest_pairs(&c, 2));
        let d = locality_partition(view, Metric::L2Squared, 900, 10, 64, 43).unwrap();
        check_partition(&d, n, 900, 10);
    }

    #[test]
    fn shards_follow_the_clusters() {
        // Four well separated clusters of 500 points, shards of at most 550: each cluster lands
        // in one shard.
        let (n, dim) = (2000, 8);
        let mut data = Vec::with_capacity(n * dim);
        let mut rng = SplitMix64::new(3);
        for i in 0..n {
            let c = (i % 4) as f32 * 100.0;
            data.extend((0..dim).map(|_| c + rng.next_gaussian() as f32));
        }
        let view = DatasetView::new(&data, n, dim).unwrap();
        let p = locality_partition(view, Metric::L2Squared, 550, 10, 8, 5).unwrap();
        check_partition(&p, n, 550, 10);
        assert_eq!(p.len(), 4);
        for ids in &p.shards {
            let c = ids[0] % 4;
            assert!(ids.iter().all(|&v| v % 4 == c), "a shard mixes clusters");
            assert_eq!(ids.len(), 500);
        }
        assert_eq!(fine_clusters(10_000_000, 1_111_112), 144);
        assert_eq!(fine_clusters(100, 100), 32);
        assert_eq!(fine_clusters(10_000_000, 1000), 256);
    }

    /// The fraction of true k-NN pairs `(v, u)` whose shards are equal or merged by `pairs`.
    fn covered(
        p: &LocalityPartition,
        pairs: &[(usize, usize)],
        data: &[f32],
        n: usize,
        dim: usize,
    ) -> f64 {
        let view = DatasetView::new(data, n, dim).unwrap();
        let mut shard = vec![0usize; n];
        for (c, ids) in p.shards.iter().enumerate() {
            for &v in ids {
                shard[v as usize] = c;
            }
        }
        let set: HashSet<(usize, usize)> = pairs.iter().copied().collect();
        let exact = exact_knn(view, Metric::L2Squared, 10);
        let (mut ok, mut all) = (0usize, 0usize);
        for (v, row) in exact.iter().enumerate() {
            for &(_, u) in row {
                let (a, b) = (shard[v], shard[u as usize]);
                all += 1;
                ok += usize::from(a == b || set.contains(&(a.min(b), a.max(b))));
            }
        }
        ok as f64 / all as f64
    }

    #[test]
    fn neighbour_shards_are_sane() {
        let n = 3000;
        let dim = 8;
        let data = gaussian_mixture(n, dim, 6, 21);
        let view = DatasetView::new(&data, n, dim).unwrap();
        let p =
            locality_partition(view, Metric::L2Squared, 420, 11, fine_clusters(n, 420), 3).unwrap();
        check_partition(&p, n, 420, 11);
        let s = p.len();
        assert!(s >= 8, "{s} shards");
        for m in 1..s {
            let pairs = nearest_pairs(&p, m);
            // Between s m / 2 and s m pairs, each i < j, no duplicates, every shard in >= m.
            assert!(
                pairs.len() >= (s * m).div_ceil(2) && pairs.len() <= (s * m).min(s * (s - 1) / 2)
            );
            assert!(pairs.windows(2).all(|w| w[0] < w[1]));
            for a in 0..s {
                let deg = pairs.iter().filter(|&&(i, j)| i == a || j == a).count();
                assert!(deg >= m, "shard {a} in {deg} pairs < {m}");
            }
        }
        assert_eq!(nearest_pairs(&p, s - 1), all_pairs(s));
        assert_eq!(nearest_pairs(&p, 100), all_pairs(s));
        // The chosen partners hold more true neighbours than the same number of random pairs
        // would, and the highest-affinity partner of a shard is never a zero-affinity one when
        // a positive one exists.
        let c2 = covered(&p, &nearest_pairs(&p, 2), &data, n, dim);
        let cs = covered(&p, &[], &data, n, dim);
        let call = covered(&p, &all_pairs(s), &data, n, dim);
        assert_eq!(call, 1.0);
        assert!(c2 > cs, "m = 2 covers {c2}, own shards {cs}");
        assert!(c2 >= 0.95, "m = 2 covers only {c2} of the true 10-NN pairs");
        for a in 0..s {
            let best = (0..s)
                .filter(|&b| b != a)
                .map(|b| p.affinity[a * s + b])
                .max()
                .unwrap();
            let first = nearest_pairs(&p, 1)
                .iter()
                .filter(|&&(i, j)| i == a || j == a)
                .map(|&(i, j)| p.affinity[i * s + j])
                .max()
                .unwrap();
            assert_eq!(first, best, "shard {a}");
        }
    }

    #[test]
    fn schedule_runs_every_pair_once_with_resident_shards() {
        for (s, pairs) in [
            (1, vec![]),
            (2, all_pairs(2)),
            (5, all_pairs(5)),
            (9, all_pairs(9)),
            (6, vec![(0, 3), (1, 2), (2, 5), (3, 4), (1, 4)]),
            (4, vec![(0, 1)]),
        ] {
            let steps = schedule_steps(s, &pairs);
            let mut slots = [None, None];
            let mut merged = Vec::new();
            let mut loaded = HashSet::new();
            for st in &steps {
                match *st {
                    Step::Load { shard, slot } => {
                        assert!(slot < 2);
                        slots[slot] = Some(shard);
                        loaded.insert(shard);
                    }
                    Step::Merge {
                        first,
                        second,
                        first_slot,
                    } => {
                        assert_eq!(slots[first_slot], Some(first));
                        assert_eq!(slots[1 - first_slot], Some(second));
                        merged.push((first, second));
                    }
                }
            }
            merged.sort_unstable();
            let mut want = pairs.clone();
            want.sort_unstable();
            assert_eq!(merged, want, "s = {s}");
            assert_eq!(loaded.len(), s, "every shard loaded (built)");
            let loads = count_loads(&steps);
            if s >= 2 && pairs == all_pairs(s) {
                // No more than the old row-by-row schedule.
                assert!(loads <= 2 * s - 2 + (s - 1) * (s - 2) / 2, "{loads}");
            }
            assert!(loads <= s + pairs.len() + 1);
        }
    }

    #[test]
    fn bad_arguments_are_typed() {
        let data = gaussian_mixture(100, 4, 2, 1);
        let view = DatasetView::new(&data, 100, 4).unwrap();
        for (fine, cap, min) in [(0, 100, 1), (4, 40, 0), (5, 30, 31), (2, 200, 101)] {
            assert!(matches!(
                locality_partition(view, Metric::L2Squared, cap, min, fine, 0),
                Err(Error::InvalidInput(_))
            ));
        }
        assert!(matches!(
            ShardSchedule::Nearest(0).validate(),
            Err(Error::InvalidParams { .. })
        ));
        assert!(ShardSchedule::Nearest(5000).validate().is_err());
        ShardSchedule::AllPairs.validate().unwrap();
        ShardSchedule::default().validate().unwrap();
    }

    #[test]
    fn schedule_serde() {
        let all: ShardSchedule = serde_json::from_str(r#""all_pairs""#).unwrap();
        assert_eq!(all, ShardSchedule::AllPairs);
        let near: ShardSchedule = serde_json::from_str(r#"{"nearest": 2}"#).unwrap();
        assert_eq!(near, ShardSchedule::Nearest(2));
        assert_eq!(
            serde_json::to_string(&ShardSchedule::Nearest(3)).unwrap(),
            r#"{"nearest":3}"#
        );
        assert!(serde_json::from_str::<ShardSchedule>(r#""sometimes""#).is_err());
    }

    #[test]
    fn contiguous_shards_are_balanced() {
        let sh = contiguous_shards(10, 3);
        assert_eq!(sh, vec![vec![0, 1, 2, 3], vec![4, 5, 6], vec![7, 8, 9]]);
        assert_eq!(all_pairs(3), vec![(0, 1), (0, 2), (1, 2)]);
    }

    #[test]
    fn probe_neighbours_are_the_exact_neighbours() {
        let (n, dim) = (3000, 8);
        let data = gaussian_mixture(n, dim, 6, 11);
        let view = DatasetView::new(&data, n, dim).unwrap();
        let truth = exact_knn(view, Metric::L2Squared, 10);
        let probes = probe_neighbours(view, Metric::L2Squared, 50, 10);
        assert_eq!(probes.len(), 50);
        for (i, (v, row)) in probes.iter().enumerate() {
            assert_eq!(*v as usize, i * n / 50);
            let want: Vec<NodeId> = truth[*v as usize].iter().map(|e| e.1).collect();
            assert_eq!(row, &want, "probe {v}");
        }
        // k beyond the other rows, and nothing to probe.
        let tiny = DatasetView::new(&data[..4 * dim], 4, dim).unwrap();
        let p = probe_neighbours(tiny, Metric::L2Squared, 10, 10);
        assert_eq!(p.len(), 4);
        assert!(p.iter().all(|(v, row)| row.len() == 3 && !row.contains(v)));
        assert!(probe_neighbours(tiny, Metric::L2Squared, 0, 10).is_empty());
    }

    #[test]
    fn auto_picks_the_smallest_m_that_keeps_the_target() {
        let (n, dim) = (4000, 8);
        for (clusters, seed) in [(16, 21), (1, 22)] {
            let data = gaussian_mixture(n, dim, clusters, seed);
            let view = DatasetView::new(&data, n, dim).unwrap();
            let cap = n.div_ceil(8);
            let p = locality_partition(view, Metric::L2Squared, cap, 11, fine_clusters(n, cap), 7)
                .unwrap();
            let s = p.len();
            let truth = probe_neighbours(view, Metric::L2Squared, 100, 10);
            // Every pair keeps everything; the fractions grow with m.
            assert_eq!(kept_fraction(&p, &all_pairs(s), &truth), 1.0);
            let fractions: Vec<f64> = (0..s)
                .map(|m| {
                    let pairs = if m == 0 {
                        Vec::new()
                    } else {
                        nearest_pairs(&p, m)
                    };
                    kept_fraction(&p, &pairs, &truth)
                })
                .collect();
            assert!(fractions.windows(2).all(|w| w[0] <= w[1]), "{fractions:?}");
            for target in [0.0, 0.9, 0.99, 1.0] {
                let c = choose_partners(&p, &truth, target);
                assert_eq!(c.kept.len(), c.m);
                assert_eq!(c.kept, fractions[1..=c.m].to_vec());
                assert!((1..s).contains(&c.m));
                // The smallest m reaching the target, or every pair when none does.
                let first = (1..s).find(|&m| fractions[m] >= target).unwrap_or(s - 1);
                assert_eq!(c.m, first, "target {target}: {fractions:?}");
                assert_eq!((c.probes, c.k), (100, 10));
                assert_eq!(c, choose_partners(&p, &truth, target), "deterministic");
            }
        }
        // One shard: nothing to merge.
        let data = gaussian_mixture(100, 4, 2, 3);
        let view = DatasetView::new(&data, 100, 4).unwrap();
        let one = LocalityPartition {
            shards: vec![(0..100).collect()],
            centroids: vec![0.0; 4],
            affinity: vec![0],
        };
        let truth = probe_neighbours(view, Metric::L2Squared, 10, 5);
        assert_eq!(choose_partners(&one, &truth, 0.99).m, 0);
        assert_eq!(kept_fraction(&one, &[], &truth), 1.0);
        assert_eq!(kept_fraction(&one, &[], &[]), 1.0);
    }
}
