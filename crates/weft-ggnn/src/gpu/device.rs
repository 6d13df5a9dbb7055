//! GGNN hierarchical construction on the GPU: [`GgnnBuild`], the device side of
//! [`GgnnGpu`](crate::GgnnGpu) (kernels in `kernels/ggnn/`; `docs/ggnn.md`).
//!
//! It runs the phases of the CPU reference [`GgnnCpu`](crate::GgnnCpu) in the same order:
//! per-segment brute force (one block per segment), weighted upward sampling (the same `hash3`
//! keys, one thread per point ranking itself in its segment), the top-down merge (Jacobi into a
//! scratch graph) and symmetric linking. The layer sizes and the sampled points equal the CPU
//! reference's for the same seed (up to keys that tie within an ulp of the distances).
//!
//! Merge and symmetric linking run one warp per point with the CPU's sorted best list and
//! bounded queue in shared memory. Where they differ from the CPU (`docs/ggnn.md`, "The GPU
//! build"):
//!
//! - membership: a per-warp "seen" hash set of every id scored since it was last rebuilt
//!   replaces the CPU's test (in the best list, the queue or the ring of recent pops). It is
//!   rebuilt from those three when more than half full, so it always holds every id the CPU
//!   would skip, and more: a candidate scored and rejected (or dropped from the full queue) is
//!   not scored again until the next rebuild. An id the bounded-probe table cannot hold is
//!   forgotten (scored again if met again), and until the next rebuild passing candidates are
//!   checked against the lists directly, so that they never hold an id twice;
//! - batches: all fresh candidates of a popped row are scored at once (teams of lanes) and
//!   merged into the lists together; merge tests them against the bound before the row, which
//!   ends with the same lists up to equal distances; sym runs its push tests in row order, as
//!   the CPU;
//! - inverse links are handed out with atomics (the CPU hands them out sequentially in `(z, i)`
//!   order), so which links a full node takes can differ from run to run.
//! - (not a difference in results) the merges into layer 0 and the symmetric linking of layer 0
//!   process the points grouped by the layer-1 point their previous merge found nearest, the
//!   groups ordered by the layer-2 point nearest to that layer-1 point
//!   ([`GgnnTuning::locality_order`]), for L2 reuse;
//! - merge steps expand two queue heads at a time by default ([`GgnnTuning::merge_heads`]):
//!   the second head is popped against the same bound before the first head's candidates are
//!   inserted (the CPU pops it after), and both rows' fresh candidates are scored and inserted
//!   as one batch; each head counts against the pop limit.
//!
//! [`GgnnBuild::with_timing`] synchronises the device around every phase and reports their
//! wall times ([`GgnnOut::phases`]).
//!
//! The layers are stacked in one "row space": layer `l`'s local id `v` is row
//! `row_off[l] + v` of the id, global-id, selection and 1-NN buffers. Nothing in the layout ties
//! it to one device: a sharded build would run the same phases per shard.

use std::time::Instant;

use weft_core::{BuildCtx, Element, Error, INVALID, Metric, NodeId, Result};
use weft_gpu::launch::{need, u32_of};
use weft_gpu::{DeviceBuffer, DeviceMatrix, GpuContext, Launch};

use super::kernels::ggnn;
use crate::build::{MERGE_CACHE, MERGE_MAX_POPS, SYM_CACHE, SYM_MAX_POPS, sorted_size};
use crate::{GgnnParams, MAX_K_BUILD, Sizing};

/// Warps per block of the top kernel (the kernels' `ggnn::WARPS`).
const WARPS: u32 = 4;
/// The most warps per block of the merge and sym kernels (the kernels' `ggnn::SEARCH_WARPS`;
/// their register budgets assume blocks of at most this many warps).
pub const SEARCH_WARPS: u32 = 4;
/// Tag bits of a seen set's 16-bit slots (the kernels' `TAG_BITS`): a tag set of `2^b` slots is
/// exact for layers of at most `2^(b + TAG_BITS)` points.
const TAG_BITS: u32 = 12;
/// The most queue heads one merge step expands (the kernels' `ggnn::MAX_HEADS`).
pub const MAX_HEADS: u32 = 2;
/// Words of per-warp scratch of a search (the kernels' `ggnn::SCRATCH`).
const SEARCH_SCRATCH: u32 = 4 * 32;
/// Dynamic shared memory one block may use without raising the limit.
const SMEM_LIMIT: u32 = 48 * 1024;
/// Threads per block of the one-thread-per-point kernels.
const THREADS: u32 = 256;
/// Blocks of the grid-stride copy and fill kernels.
const FILL_BLOCKS: u32 = 1024;

/// `(s0, s0_off)` of layer `l`'s segments as the kernels take them.
fn seg(z: &Sizing, l: usize) -> (u32, u32) {
    if l == 0 {
        (z.s0 as u32, z.s0_off as u32)
    } else {
        (z.s as u32, 0)
    }
}

/// First row of each layer in the stacked row space, and the total.
fn row_offsets(z: &Sizing) -> Vec<usize> {
    let mut off = vec![0];
    for l in 0..z.layers {
        off.push(off[l] + z.layer_len(l));
    }
    off
}

/// One layer of a finished build, on the host, rows not compacted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GgnnLayerOut {
    /// `len * k` layer-local ids, [`INVALID`] for empty slots.
    pub ids: Vec<NodeId>,
    /// Global id of each local id.
    pub global: Vec<NodeId>,
    /// Local id in the layer below of each local id (empty on layer 0).
    pub selection: Vec<NodeId>,
}

/// The wall time of one phase of a build (only with [`GgnnBuild::with_timing`]).
#[derive(Clone, Debug, PartialEq)]
pub struct GgnnPhaseTime {
    /// `setup`, `top`, `select`, `merge`, `order` (layer 0's processing order from the
    /// locality keys), `sym` (the searches), `sym_rebuild` (the rows' second halves) or
    /// `download` (callers add their own host phases, such as `check` and
    /// `assemble` in [`GgnnGpu`](crate::GgnnGpu)).
    pub phase: &'static str,
    /// The layer the phase writes.
    pub layer: usize,
    /// The layer a merge starts from (`layer` for the other phases).
    pub from: usize,
    /// Seconds, the device synchronised before and after.
    pub seconds: f64,
    /// Queue pops of the phase's searches, summed over its points (merge and sym; 0 otherwise).
    pub pops: u64,
    /// Candidates the phase's searches scored (merge and sym; 0 otherwise).
    pub scored: u64,
    /// `(layer, pops, scored)` of the phase's searches in each layer they ran in, top layer
    /// first (a merge searches the layers below its top one; a merge's first layer also counts
    /// the top segment's points it scored).
    pub by_layer: Vec<(usize, u64, u64)>,
}

/// The result of a GPU build.
#[derive(Clone, Debug, PartialEq)]
pub struct GgnnOut {
    /// The layers, bottom first.
    pub layers: Vec<GgnnLayerOut>,
    /// Mean real 1-NN distance over layer 0 after the last merge.
    pub mean_nn1: f32,
    /// Largest real 1-NN distance over layer 0 after the last merge.
    pub max_nn1: f32,
    /// Inverse links dropped because every candidate was full.
    pub dropped_links: u64,
    /// Per-phase wall times, in order (empty unless [`GgnnBuild::with_timing`]).
    pub phases: Vec<GgnnPhaseTime>,
}

/// Launch settings of the merge and sym searches. They change the speed, not the rules, except
/// that a smaller seen set forgets more ids (which may then be scored again) and that
/// `merge_heads` above 1 changes the order in which a merge expands its queue.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GgnnTuning {
    /// Shared memory of a merge query's seen set, in bytes: a power of two in `256..=32768`
    /// (a slot takes 4 bytes as a u32 id, 2 as a 16-bit tag).
    pub merge_seen_bytes: u32,
    /// Shared memory of a symmetric-link search's seen set, in bytes: a power of two in
    /// `256..=32768`.
    pub sym_seen_bytes: u32,
    /// Whether the seen sets hold 16-bit tags (`weft/hashset.cuh` tag sets: exact, twice the
    /// slots of u32 ids in the same memory, each insert a little dearer) where the layer is
    /// small enough (at most `2^(log2(slots) + 12)` points; larger layers get u32 ids).
    /// `None`: tags when a padded row of the data takes at least [`TAGS_MIN_ROW_BYTES`] (where
    /// each scored candidate costs most; measured on an H200: 1M x 960 f32 builds 12 % faster
    /// with tags, 1M x 128 f32 6 % slower).
    pub seen_tags: Option<bool>,
    /// 16-byte vectors each lane of a distance team reads, `1..=64` (the team size, a power of
    /// two up to 32 lanes, follows from it and the row length).
    pub vecs_per_lane: u32,
    /// Most warps per block of the searches, `1..=SEARCH_WARPS` (fewer when the search state
    /// needs more than 48 KiB per block).
    pub max_warps: u32,
    /// Queue heads a merge step pops and expands together, `1..=MAX_HEADS`: their rows'
    /// fresh candidates are scored as one batch (up to 32 at a time) and merged into the
    /// lists together. Above 1 this changes the search order (a head is popped before the
    /// previous heads' candidates are in the queue), not the bounds or the pop limit.
    pub merge_heads: u32,
    /// Whether the merges into layer 0 (after the first) and the symmetric linking of layer 0
    /// process the points grouped by the layer-1 point their last merge found nearest, the
    /// groups ordered by the layer-2 point the last merge into layer 1 found nearest to that
    /// layer-1 point, so that the searches running together read nearby rows and share the L2
    /// cache. A merge reads the graph as it was before it (Jacobi), so the order does not
    /// change its result; in the symmetric linking it changes only which searches hand out
    /// their links first, a race in any order.
    pub locality_order: bool,
}

impl Default for GgnnTuning {
    fn default() -> Self {
        GgnnTuning {
            merge_seen_bytes: 4096,
            sym_seen_bytes: 2048,
            seen_tags: None,
            vecs_per_lane: 4,
            max_warps: 4,
            merge_heads: 2,
            locality_order: true,
        }
    }
}

impl GgnnTuning {
    /// Checks every field's range.
    pub fn validate(&self) -> Result<()> {
        for (name, v) in [
            ("merge_seen_bytes", self.merge_seen_bytes),
            ("sym_seen_bytes", self.sym_seen_bytes),
        ] {
            if !v.is_power_of_two() || !(256..=32768).contains(&v) {
                return Err(Error::invalid_param(
                    name,
                    format!("{v} must be a power of two in 256..=32768"),
                ));
            }
        }
        if !(1..=64).contains(&self.vecs_per_lane) {
            return Err(Error::invalid_param(
                "vecs_per_lane",
                format!("{} must be in 1..=64", self.vecs_per_lane),
            ));
        }
        if !(1..=SEARCH_WARPS).contains(&self.max_warps) {
            return Err(Error::invalid_param(
                "max_warps",
                format!("{} must be in 1..={SEARCH_WARPS}", self.max_warps),
            ));
        }
        if !(1..=MAX_HEADS).contains(&self.merge_heads) {
            return Err(Error::invalid_param(
                "merge_heads",
                format!("{} must be in 1..={MAX_HEADS}", self.merge_heads),
            ));
        }
        Ok(())
    }
}

/// `(best, prioq, ring)` capacities of a search whose best list holds `best` ids in a cache of
/// `total` ids (the CPU's: sorted region = best list plus queue, then the visited ring).
fn caps(best: usize, total: usize) -> (u32, u32, u32) {
    let sorted = sorted_size(best);
    let ring = total.max(sorted + 32) - sorted;
    (best as u32, (sorted - best) as u32, ring as u32)
}

/// Words of shared memory of one warp's search state (the kernels' `Search::words`): the seen
/// set's `seen` slots take a word each when `wide`, half a word otherwise.
fn search_words((best, prioq, ring): (u32, u32, u32), seen: u32, wide: bool) -> u32 {
    let seen_words = if wide { seen } else { seen / 2 };
    2 * best + 2 * prioq + ring + seen_words + SEARCH_SCRATCH
}

/// Padded rows of at least this many bytes get tag seen sets when [`GgnnTuning::seen_tags`] is
/// `None`.
pub const TAGS_MIN_ROW_BYTES: usize = 1024;

/// The seen set of `bytes` bytes searching a layer of `len` points: `(slots, wide)`, 16-bit tag
/// slots when `tags` and the layer fits what they name exactly, u32 ids otherwise (`wide`).
fn seen_slots(tags: bool, bytes: u32, len: usize) -> (u32, bool) {
    let tag_slots = bytes / 2;
    if tags && len as u64 <= 1u64 << (tag_slots.trailing_zeros() + TAG_BITS) {
        (tag_slots, false)
    } else {
        (bytes / 4, true)
    }
}

/// Warps per block (at most `max_warps`) and dynamic shared-memory bytes of a merge or sym
/// launch.
fn search_launch(words: u32, max_warps: u32) -> (u32, u32) {
    let warps = (SMEM_LIMIT / (words * 4)).clamp(1, max_warps);
    (warps, warps * words * 4)
}

/// Lanes per distance team for rows of `nvec` 16-byte vectors: a power of two, 1..=32, so that
/// each lane reads about `per_lane` vectors.
fn team_size(nvec: usize, per_lane: u32) -> u32 {
    nvec.div_ceil(per_lane.max(1) as usize)
        .next_power_of_two()
        .clamp(1, 32) as u32
}

/// The GGNN construction on one GPU (see the module documentation).
#[derive(Clone, Copy, Debug)]
pub struct GgnnBuild<'c> {
    ctx: &'c GpuContext,
    budget: Option<u64>,
    timing: bool,
    tuning: GgnnTuning,
}

/// Device state of one build.
struct State {
    n_rows: usize,
    ids: DeviceBuffer<u32>,
    glob: DeviceBuffer<u32>,
    sel: DeviceBuffer<u32>,
    nn1: DeviceBuffer<f32>,
    scratch: DeviceBuffer<u32>,
    links: DeviceBuffer<u32>,
    link_cnt: DeviceBuffer<u32>,
    dropped: DeviceBuffer<u64>,
    /// Sum and maximum of layer 0's 1-NN distances (`ggnn_nn1_stats`).
    stats: DeviceBuffer<f64>,
    /// Pops and scored candidates of the searches so far, per layer (`2 l`, `2 l + 1`;
    /// cumulative).
    counts: DeviceBuffer<u64>,
    row_off_dev: DeviceBuffer<u32>,
    row_off: Vec<usize>,
    /// Per layer-0 point: the layer-1 point its last merge found nearest.
    key1: DeviceBuffer<u32>,
    /// Per layer-1 point: the layer-2 point its last merge from layer 2 or above found nearest.
    key2: DeviceBuffer<u32>,
    /// Per layer-1 point: its rank in the order by (`key2`, id) (the identity until `key2` is
    /// filled).
    rank1: DeviceBuffer<u32>,
    /// Per layer-1 point: scratch counts of the device's counting sort.
    order_count: DeviceBuffer<u32>,
    /// The processing order of layer 0's next merge and symmetric linking (a permutation).
    order: DeviceBuffer<u32>,
    /// Whether `order` holds an order from the keys (the natural order otherwise).
    have_order: bool,
    /// Per layer-0 point: its nearest entry point, the extra start of its merges (entry-seeded
    /// merges; `None` until the first merge into layer 0 computes it, or without entries).
    seeds: Option<DeviceBuffer<u32>>,
}

impl<'c> GgnnBuild<'c> {
    /// The builder on `ctx`, within the default memory budget.
    pub fn new(ctx: &'c GpuContext) -> Self {
        GgnnBuild {
            ctx,
            budget: None,
            timing: false,
            tuning: GgnnTuning::default(),
        }
    }

    /// Uses `tuning` for the searches' launches (checked when a build starts).
    pub fn with_tuning(mut self, tuning: GgnnTuning) -> Self {
        self.tuning = tuning;
        self
    }

    /// Times every phase (the device is synchronised around each, which costs a little):
    /// [`GgnnOut::phases`].
    pub fn with_timing(mut self, on: bool) -> Self {
        self.timing = on;
        self
    }

    /// Limits device memory to `bytes` (still capped by free memory).
    pub fn with_budget(mut self, bytes: u64) -> Self {
        self.budget = Some(bytes);
        self
    }

    /// Device bytes a build of `shape` with degree `k` allocates, besides the vectors.
    pub fn bytes_for(shape: &Sizing, k: usize) -> u64 {
        let rows = row_offsets(shape)[shape.layers] as u64;
        let (n, k) = (shape.n as u64, k as u64);
        // ids, glob, sel, nn1 over all rows; scratch n*k; links n*(k/2); link counts, key1,
        // order, seeds n; key2, rank1, order counts at most n each; small (and the entry
        // points, at most n).
        rows * k * 4 + 3 * rows * 4 + n * k * 4 + n * (k / 2).max(1) * 4 + 8 * n * 4 + 64
    }

    fn check(shape: &Sizing, k: usize, dim: usize) -> Result<()> {
        if shape.n == 0 || dim == 0 {
            return Err(Error::InvalidInput(
                "cannot build a graph on no vectors".into(),
            ));
        }
        if !(2..=MAX_K_BUILD).contains(&k) || k >= shape.n {
            return Err(Error::invalid_param(
                "k_build",
                format!(
                    "{k} must be in 2..={MAX_K_BUILD} and below the number of vectors ({})",
                    shape.n
                ),
            ));
        }
        if shape.layers == 0 || shape.g == 0 || shape.s == 0 {
            return Err(Error::invalid_param("layers", "empty hierarchy shape"));
        }
        let rows = row_offsets(shape)[shape.layers];
        if (rows as u64) * (k as u64) >= u32::MAX as u64 / 2 || rows >= INVALID as usize {
            return Err(Error::InvalidInput(format!(
                "{rows} rows x degree {k} exceed the GPU build's 32-bit offsets"
            )));
        }
        Ok(())
    }

    /// Builds the hierarchy of the vectors in `data` with the sizes of `shape`, the degree
    /// [`GgnnParams::k_build`], the slack [`GgnnParams::tau_build`] and
    /// [`GgnnParams::refinement_iterations`] passes of `params` (its other fields are the
    /// host's: [`GgnnGpu`](crate::GgnnGpu) checks them, sizes `shape` from them and picks the
    /// entry points), the upward sampling seeded by `ctx`'s seed.
    ///
    /// With `entries`, the merges into layer 0 are entry-seeded
    /// ([`GgnnParams::entry_seeded_merges`]): `entries` is called once, before the
    /// first of them, for the entry points (global ids; the caller may still be picking them
    /// while the first phases run), and every point's nearest one is found on the device.
    ///
    /// Progress: one unit per phase, as the CPU reference; cancellation is checked before each
    /// phase.
    pub fn build<T: Element>(
        &self,
        data: &DeviceMatrix<T>,
        metric: Metric,
        shape: &Sizing,
        params: &GgnnParams,
        mut entries: Option<&mut dyn FnMut() -> Result<Vec<NodeId>>>,
        ctx: &BuildCtx,
    ) -> Result<GgnnOut> {
        let k = params.k_build;
        Self::check(shape, k, data.dim())?;
        self.tuning.validate()?;
        if data.rows() != shape.n {
            return Err(Error::InvalidInput(format!(
                "{} device rows for a hierarchy of {} points",
                data.rows(),
                shape.n
            )));
        }
        self.ctx
            .check_fits(Self::bytes_for(shape, k), self.budget)?;
        self.ctx.prepare_kernels(&build_kernels::<T>()?)?;
        let setup_start = Instant::now();
        let row_off = row_offsets(shape);
        let n_rows = row_off[shape.layers];
        let mut glob = self.ctx.alloc_zeros::<u32>(n_rows)?;
        iota_u32(self.ctx, &mut glob, shape.n)?;
        let row_off32: Vec<u32> = row_off.iter().map(|&o| o as u32).collect();
        // Layer 1's size (1 for a one-layer hierarchy: the order buffers are then unused).
        let l1 = if shape.layers > 1 {
            shape.layer_len(1)
        } else {
            1
        };
        let mut st = State {
            n_rows,
            ids: self.ctx.alloc_zeros::<u32>(n_rows * k)?,
            glob,
            sel: self.ctx.alloc_zeros::<u32>(n_rows)?,
            nn1: self.ctx.alloc_zeros::<f32>(n_rows)?,
            scratch: self.ctx.alloc_zeros::<u32>(shape.n * k)?,
            links: self.ctx.alloc_zeros::<u32>(shape.n * (k / 2).max(1))?,
            link_cnt: self.ctx.alloc_zeros::<u32>(shape.n)?,
            dropped: self.ctx.alloc_zeros::<u64>(1)?,
            stats: self.ctx.alloc_zeros::<f64>(2)?,
            counts: self.ctx.alloc_zeros::<u64>(2 * shape.layers)?,
            row_off_dev: self.ctx.upload(&row_off32)?,
            row_off,
            key1: self.ctx.alloc_zeros::<u32>(shape.n)?,
            key2: self.ctx.alloc_zeros::<u32>(l1)?,
            rank1: self.ctx.alloc_zeros::<u32>(l1)?,
            order_count: self.ctx.alloc_zeros::<u32>(l1)?,
            order: self.ctx.alloc_zeros::<u32>(shape.n)?,
            have_order: false,
            seeds: None,
        };
        fill_u32(self.ctx, &mut st.ids, 0, n_rows * k, INVALID)?;
        iota_u32(self.ctx, &mut st.rank1, l1)?;
        let mut run = Run {
            g: self,
            data,
            metric,
            shape: *shape,
            k,
            tau: params.tau_build,
            mean_nn1: 0.0,
            st,
            phases: Vec::new(),
            counted: vec![0; 2 * shape.layers],
        };
        if self.timing {
            self.ctx.synchronize()?;
            run.phases.push(GgnnPhaseTime {
                phase: "setup",
                layer: 0,
                from: 0,
                seconds: setup_start.elapsed().as_secs_f64(),
                pops: 0,
                scored: 0,
                by_layer: Vec::new(),
            });
        }
        let layers = shape.layers;
        let phases = (0..layers)
            .map(|t| 2 + usize::from(t + 1 < layers) + 2 * t)
            .sum::<usize>()
            + params.refinement_iterations * 2 * (layers - 1);
        let progress = ctx.progress();
        progress.begin("ggnn build (GPU)", Some(phases as u64));
        for t in 0..layers {
            ctx.check_cancelled()?;
            run.timed("top", t, t, |r| r.top(t))?;
            progress.advance(1);
            if t + 1 < layers {
                ctx.check_cancelled()?;
                run.timed("select", t + 1, t, |r| r.select(t, ctx.seed()))?;
                progress.advance(1);
            }
            ctx.check_cancelled()?;
            run.sym(t)?;
            progress.advance(1);
            for lm in (0..t).rev() {
                ctx.check_cancelled()?;
                if lm == 0 {
                    run.ensure_seeds(&mut entries)?;
                }
                run.merge_and_order(t, lm)?;
                progress.advance(1);
                ctx.check_cancelled()?;
                run.sym(lm)?;
                progress.advance(1);
            }
        }
        for _ in 0..params.refinement_iterations {
            for lm in (0..layers - 1).rev() {
                ctx.check_cancelled()?;
                if lm == 0 {
                    run.ensure_seeds(&mut entries)?;
                }
                run.merge_and_order(layers - 1, lm)?;
                progress.advance(1);
                ctx.check_cancelled()?;
                run.sym(lm)?;
                progress.advance(1);
            }
        }
        progress.end();
        let max_nn1 = run.update_stats()?;
        let download_start = Instant::now();
        let mut out = run.finish(max_nn1)?;
        if self.timing {
            out.phases.push(GgnnPhaseTime {
                phase: "download",
                layer: 0,
                from: 0,
                seconds: download_start.elapsed().as_secs_f64(),
                pops: 0,
                scored: 0,
                by_layer: Vec::new(),
            });
        }
        Ok(out)
    }

    /// The nearest of `entries` (global ids, each below `data.rows()`) to every row of `data`
    /// in `metric`, ties to the earlier entry: the seeds of the entry-seeded merges
    /// (`ggnn_nearest_entry`; [`nearest_entries`](crate::nearest_entries) is its CPU reference).
    pub fn nearest_entries<T: Element>(
        &self,
        data: &DeviceMatrix<T>,
        metric: Metric,
        entries: &[NodeId],
    ) -> Result<Vec<NodeId>> {
        let seeds = nearest_entry_kernel(self.ctx, data, metric, entries)?;
        self.ctx.download(&seeds, data.rows())
    }

    /// The brute force of layer 0 alone (the `top` kernel over the base segments of `shape`):
    /// `n * k` ids (layer-local, sorted by distance, ties by id, [`INVALID`] past the segment)
    /// and the real 1-NN distances. For the kernel's oracle test.
    pub fn brute_force_base<T: Element>(
        &self,
        data: &DeviceMatrix<T>,
        metric: Metric,
        shape: &Sizing,
        k: usize,
    ) -> Result<(Vec<NodeId>, Vec<f32>)> {
        Self::check(shape, k, data.dim())?;
        if data.rows() != shape.n {
            return Err(Error::InvalidInput(format!(
                "{} device rows for {} points",
                data.rows(),
                shape.n
            )));
        }
        let n = shape.n;
        self.ctx
            .check_fits(n as u64 * (k as u64 + 2) * 4, self.budget)?;
        let identity: Vec<u32> = (0..n as u32).collect();
        let glob = self.ctx.upload(&identity)?;
        let mut ids = self.ctx.alloc_zeros::<u32>(n * k)?;
        let mut nn1 = self.ctx.alloc_zeros::<f32>(n)?;
        let rows = LayerRows {
            shape,
            l: 0,
            off: 0,
            k,
        };
        let bufs = TopBuffers {
            glob: &glob,
            ids: &mut ids,
            nn1: &mut nn1,
        };
        top_kernel(self.ctx, data, metric, rows, bufs)?;
        Ok((self.ctx.download(&ids, n * k)?, self.ctx.download(&nn1, n)?))
    }
}

impl GgnnBuild<'_> {
    /// Layer 0's locality order for `key1` (each point's best layer-1 point) and `rank` (each
    /// layer-1 point's rank, all below `rank.len()`): the points sorted by
    /// `rank[min(key1[v], rank.len() - 1)]` by the device's counting sort, points of equal keys
    /// in any order. For the kernels' test.
    pub fn grouped_order(&self, key1: &[u32], rank: &[u32]) -> Result<Vec<u32>> {
        if rank.is_empty() || rank.iter().any(|&r| r as usize >= rank.len()) {
            return Err(Error::InvalidInput(
                "ranks must be non-empty and below their count".into(),
            ));
        }
        let n = key1.len();
        if n == 0 {
            return Ok(Vec::new());
        }
        let d_key1 = self.ctx.upload(key1)?;
        let d_rank = self.ctx.upload(rank)?;
        let mut count = self.ctx.alloc_zeros::<u32>(rank.len())?;
        let mut order = self.ctx.alloc_zeros::<u32>(n)?;
        order_on_device(
            self.ctx,
            &d_key1,
            n,
            &d_rank,
            rank.len(),
            &mut count,
            &mut order,
        )?;
        self.ctx.download(&order, n)
    }
}

/// Blocks of a grid-stride copy or fill over `len` elements.
fn fill_blocks(len: usize) -> Result<u32> {
    Ok(u32_of(len.div_ceil(THREADS as usize), "blocks")?.min(FILL_BLOCKS))
}

/// `dst[off..off + len] = src[..len]`.
fn copy_u32(
    ctx: &GpuContext,
    dst: &mut DeviceBuffer<u32>,
    off: usize,
    src: &DeviceBuffer<u32>,
    len: usize,
) -> Result<()> {
    need(dst.len(), (off + len) as u64, "ggnn_copy_u32 destination")?;
    need(src.len(), len as u64, "ggnn_copy_u32 source")?;
    if len == 0 {
        return Ok(());
    }
    let mut view = dst.slice_mut(off..off + len);
    // SAFETY: each pointer's length was checked above (`need`) for these sizes.
    unsafe {
        ggnn::ggnn_copy_u32(
            ctx,
            Launch::blocks(fill_blocks(len)?, THREADS),
            &ggnn::GgnnCopyU32Args {
                dst: view.output(),
                src: src.input(),
                len: len as u64,
            },
        )
    }
}

/// `dst[..len] = 0, 1, ..., len - 1`.
fn iota_u32(ctx: &GpuContext, dst: &mut DeviceBuffer<u32>, len: usize) -> Result<()> {
    need(dst.len(), len as u64, "ggnn_iota_u32 destination")?;
    if len == 0 {
        return Ok(());
    }
    // SAFETY: each pointer's length was checked above (`need`) for these sizes.
    unsafe {
        ggnn::ggnn_iota_u32(
            ctx,
            Launch::blocks(fill_blocks(len)?, THREADS),
            &ggnn::GgnnIotaU32Args {
                dst: dst.output(),
                len: len as u64,
            },
        )
    }
}

/// `dst[off..off + len] = value`.
fn fill_u32(
    ctx: &GpuContext,
    dst: &mut DeviceBuffer<u32>,
    off: usize,
    len: usize,
    value: u32,
) -> Result<()> {
    need(dst.len(), (off + len) as u64, "ggnn_fill_u32 destination")?;
    if len == 0 {
        return Ok(());
    }
    let mut view = dst.slice_mut(off..off + len);
    // SAFETY: each pointer's length was checked above (`need`) for these sizes.
    unsafe {
        ggnn::ggnn_fill_u32(
            ctx,
            Launch::blocks(fill_blocks(len)?, THREADS),
            &ggnn::GgnnFillU32Args {
                dst: view.output(),
                len: len as u64,
                value,
            },
        )
    }
}

/// The `ggnn_nearest_entry` kernel: every row's nearest of `entries` (global ids), on the
/// device (`n` ids, all [`INVALID`] without entries).
fn nearest_entry_kernel<T: Element>(
    ctx: &GpuContext,
    data: &DeviceMatrix<T>,
    metric: Metric,
    entries: &[NodeId],
) -> Result<DeviceBuffer<u32>> {
    let n = data.rows();
    let mut out = ctx.alloc_zeros::<u32>(n.max(1))?;
    if entries.is_empty() {
        fill_u32(ctx, &mut out, 0, n, INVALID)?;
        return Ok(out);
    }
    if let Some(&bad) = entries.iter().find(|&&e| e as usize >= n) {
        return Err(Error::InvalidInput(format!(
            "entry point {bad} is not below the number of vectors ({n})"
        )));
    }
    let dev_entries = ctx.upload(entries)?;
    let view = data.rows_view(0, n)?;
    let stride = u32_of(data.stride(), "stride")?;
    let (ne, n32) = (u32_of(entries.len(), "entry points")?, u32_of(n, "rows")?);
    // SAFETY: `out` holds n ids and the entries were uploaded whole (all below n, checked above);
    // the data view covers its n rows.
    unsafe {
        ggnn::ggnn_nearest_entry(
            ctx,
            T::DTYPE,
            Launch::blocks(n32.div_ceil(WARPS), WARPS * 32),
            &ggnn::GgnnNearestEntryArgs {
                data: view.input(),
                stride,
                metric,
                entries: dev_entries.input(),
                n_entries: ne,
                n: n32,
                out: out.output(),
            },
        )
    }?;
    Ok(out)
}

/// One layer of the stacked row space: layer `l` of `shape`, its rows from row `off`, `k` slots
/// a row.
#[derive(Clone, Copy)]
struct LayerRows<'s> {
    /// The layers' sizes.
    shape: &'s Sizing,
    /// Which layer of `shape` (0: the base).
    l: usize,
    /// Its first row in the stacked buffers.
    off: usize,
    /// Slots per row.
    k: usize,
}

/// The stacked buffers of the `top` kernel: it reads the layer's global ids and writes its rows'
/// neighbour ids and real 1-NN distances.
struct TopBuffers<'b> {
    /// Global id of each row.
    glob: &'b DeviceBuffer<u32>,
    /// `k` neighbour ids per row.
    ids: &'b mut DeviceBuffer<u32>,
    /// The real 1-NN distance of each row.
    nn1: &'b mut DeviceBuffer<f32>,
}

/// The `top` kernel over the layer `rows` of the stacked buffers `bufs`.
fn top_kernel<T: Element>(
    ctx: &GpuContext,
    data: &DeviceMatrix<T>,
    metric: Metric,
    rows: LayerRows<'_>,
    bufs: TopBuffers<'_>,
) -> Result<()> {
    let LayerRows { shape, l, off, k } = rows;
    let TopBuffers { glob, ids, nn1 } = bufs;
    let len = shape.layer_len(l);
    need(glob.len(), (off + len) as u64, "ggnn_top global ids")?;
    need(ids.len(), ((off + len) * k) as u64, "ggnn_top ids")?;
    need(nn1.len(), (off + len) as u64, "ggnn_top nn1")?;
    let (s0, s0_off) = seg(shape, l);
    let segments = u32_of(shape.segments(l), "segments")?;
    let view = data.rows_view(0, data.rows())?;
    let stride = u32_of(data.stride(), "stride")?;
    let k32 = k as u32;
    // SAFETY: each pointer's length was checked above (`need`) for these sizes.
    unsafe {
        ggnn::ggnn_top(
            ctx,
            T::DTYPE,
            Launch::new((segments, 1, 1), WARPS * 32, WARPS * 2 * k32 * 4),
            &ggnn::GgnnTopArgs {
                data: view.input(),
                stride,
                metric,
                glob: glob.input(),
                off: u32_of(off, "row offset")?,
                s0,
                s0_off,
                k: k32,
                ids: ids.output(),
                nn1: nn1.output(),
            },
        )
    }
}

/// Writes into `order[..n]` the points `0..n` sorted by `rank[min(key1[v], l1 - 1)]` (every rank
/// below `l1`), with the kernels `ggnn_order_count`, `ggnn_order_scan` and `ggnn_order_scatter`
/// (`count` is scratch of `l1` entries); points of equal keys in any order.
fn order_on_device(
    ctx: &GpuContext,
    key1: &DeviceBuffer<u32>,
    n: usize,
    rank: &DeviceBuffer<u32>,
    l1: usize,
    count: &mut DeviceBuffer<u32>,
    order: &mut DeviceBuffer<u32>,
) -> Result<()> {
    need(key1.len(), n as u64, "ggnn_order keys")?;
    need(order.len(), n as u64, "ggnn_order order")?;
    need(rank.len(), l1 as u64, "ggnn_order ranks")?;
    need(count.len(), l1 as u64, "ggnn_order counts")?;
    if n == 0 || l1 == 0 {
        return Ok(());
    }
    let (n32, l132) = (u32_of(n, "points")?, u32_of(l1, "layer-1 points")?);
    let blocks = n32.div_ceil(THREADS);
    fill_u32(ctx, count, 0, l1, 0)?;
    // SAFETY: each pointer's length was checked above (`need`) for these sizes.
    unsafe {
        ggnn::ggnn_order_count(
            ctx,
            Launch::blocks(blocks, THREADS),
            &ggnn::GgnnOrderCountArgs {
                key1: key1.input(),
                n: n32,
                rank: rank.input(),
                l1: l132,
                count: count.output(),
            },
        )
    }?;
    // SAFETY: each pointer's length was checked above (`need`) for these sizes.
    unsafe {
        ggnn::ggnn_order_scan(
            ctx,
            Launch::blocks(1, 1024),
            &ggnn::GgnnOrderScanArgs {
                count: count.output(),
                len: l132,
            },
        )
    }?;
    // SAFETY: each pointer's length was checked above (`need`) for these sizes.
    unsafe {
        ggnn::ggnn_order_scatter(
            ctx,
            Launch::blocks(blocks, THREADS),
            &ggnn::GgnnOrderScatterArgs {
                key1: key1.input(),
                n: n32,
                rank: rank.input(),
                l1: l132,
                cursor: count.output(),
                order: order.output(),
            },
        )
    }
}

/// The indices `0..keys.len()` sorted stably by their key (keys above `buckets - 1` count as
/// `buckets - 1`): a counting sort.
fn counting_order(keys: &[u32], buckets: usize) -> Vec<u32> {
    let buckets = buckets.max(1);
    let mut start = vec![0usize; buckets + 1];
    for &c in keys {
        start[(c as usize).min(buckets - 1) + 1] += 1;
    }
    for b in 0..buckets {
        start[b + 1] += start[b];
    }
    let mut order = vec![0u32; keys.len()];
    for (v, &c) in keys.iter().enumerate() {
        let b = (c as usize).min(buckets - 1);
        order[start[b]] = v as u32;
        start[b] += 1;
    }
    order
}

/// One build in progress.
struct Run<'a, 'c, T: Element> {
    g: &'a GgnnBuild<'c>,
    data: &'a DeviceMatrix<T>,
    metric: Metric,
    shape: Sizing,
    k: usize,
    tau: f32,
    mean_nn1: f32,
    st: State,
    phases: Vec<GgnnPhaseTime>,
    /// The per-layer search counters at the end of the last timed phase.
    counted: Vec<u64>,
}

impl<T: Element> Run<'_, '_, T> {
    fn ctx(&self) -> &GpuContext {
        self.g.ctx
    }

    /// Runs `f`, recording its wall time (device synchronised around it) when timing is on.
    fn timed(
        &mut self,
        phase: &'static str,
        layer: usize,
        from: usize,
        f: impl FnOnce(&mut Self) -> Result<()>,
    ) -> Result<()> {
        if !self.g.timing {
            return f(self);
        }
        self.ctx().synchronize()?;
        let start = Instant::now();
        f(self)?;
        self.ctx().synchronize()?;
        let seconds = start.elapsed().as_secs_f64();
        let counts = self.ctx().download(&self.st.counts, self.counted.len())?;
        let by_layer: Vec<(usize, u64, u64)> = (0..self.shape.layers)
            .rev()
            .map(|l| {
                let pops = counts[2 * l] - self.counted[2 * l];
                (l, pops, counts[2 * l + 1] - self.counted[2 * l + 1])
            })
            .filter(|&(_, pops, scored)| pops + scored > 0)
            .collect();
        self.counted = counts;
        self.phases.push(GgnnPhaseTime {
            phase,
            layer,
            from,
            seconds,
            pops: by_layer.iter().map(|c| c.1).sum(),
            scored: by_layer.iter().map(|c| c.2).sum(),
            by_layer,
        });
        Ok(())
    }

    /// Whether the seen sets hold tags ([`GgnnTuning::seen_tags`], by row size when `None`).
    fn tags(&self) -> bool {
        self.g
            .tuning
            .seen_tags
            .unwrap_or_else(|| self.data.stride() * std::mem::size_of::<T>() >= TAGS_MIN_ROW_BYTES)
    }

    /// Lanes per distance team for this data's rows.
    fn team(&self) -> u32 {
        let per_vec = 16 / std::mem::size_of::<T>();
        team_size(self.data.stride() / per_vec, self.g.tuning.vecs_per_lane)
    }

    /// The build slack: `(tau_b * mean_nn1)^2` for squared L2, `tau_b * mean_nn1` otherwise.
    fn slack(&self) -> f32 {
        let xi = self.tau * self.mean_nn1;
        if self.metric == Metric::L2Squared {
            xi * xi
        } else {
            xi
        }
    }

    /// Mean (kept) and max (returned) of layer 0's 1-NN distances: summed in f64 on the device
    /// in a fixed order (`ggnn_nn1_stats`; the CPU reference sums in id order, so the two means
    /// can differ in the last bits of the f64 sum, almost never after the rounding to f32).
    fn update_stats(&mut self) -> Result<f32> {
        let n = u32_of(self.shape.n, "points")?;
        need(self.st.nn1.len(), n as u64, "ggnn_nn1_stats input")?;
        let ctx = self.g.ctx;
        // SAFETY: each pointer's length was checked above (`need`) for these sizes.
        unsafe {
            ggnn::ggnn_nn1_stats(
                ctx,
                Launch::blocks(1, 1024),
                &ggnn::GgnnNn1StatsArgs {
                    nn1: self.st.nn1.input(),
                    n,
                    out: self.st.stats.output(),
                },
            )
        }?;
        let stats = ctx.download(&self.st.stats, 2)?;
        self.mean_nn1 = (stats[0] / f64::from(n.max(1))) as f32;
        Ok(stats[1] as f32)
    }

    fn top(&mut self, l: usize) -> Result<()> {
        let rows = LayerRows {
            shape: &self.shape,
            l,
            off: self.st.row_off[l],
            k: self.k,
        };
        let bufs = TopBuffers {
            glob: &self.st.glob,
            ids: &mut self.st.ids,
            nn1: &mut self.st.nn1,
        };
        top_kernel(self.g.ctx, self.data, self.metric, rows, bufs)?;
        if l == 0 {
            self.update_stats()?;
        }
        Ok(())
    }

    fn select(&mut self, t: usize, seed: u64) -> Result<()> {
        let z = self.shape;
        let n_t = u32_of(z.layer_len(t), "layer size")?;
        let off_t = self.st.row_off[t] as u32;
        let off_up = self.st.row_off[t + 1] as u32;
        let (s0, s0_off) = seg(&z, t);
        let (g, s, sg, sg_off, t32) = (
            z.g as u32,
            z.s as u32,
            z.sg as u32,
            z.sg_off as u32,
            t as u32,
        );
        need(
            self.st.glob.len(),
            self.st.row_off[t + 2] as u64,
            "ggnn_select global ids",
        )?;
        // SAFETY: each pointer's length was checked above (`need`) for these sizes.
        unsafe {
            ggnn::ggnn_select(
                self.g.ctx,
                Launch::blocks(n_t.div_ceil(THREADS), THREADS),
                &ggnn::GgnnSelectArgs {
                    n_t,
                    off_t,
                    off_up,
                    s0,
                    s0_off,
                    g,
                    s,
                    sg,
                    sg_off,
                    seed,
                    t: t32,
                    nn1: self.st.nn1.input(),
                    glob: self.st.glob.output(),
                    sel: self.st.sel.output(),
                },
            )
        }
    }

    /// Computes the merge seeds (once) from the entry points `entries` yields, when there is
    /// such a source.
    fn ensure_seeds(
        &mut self,
        entries: &mut Option<&mut dyn FnMut() -> Result<Vec<NodeId>>>,
    ) -> Result<()> {
        if self.st.seeds.is_some() {
            return Ok(());
        }
        let Some(source) = entries.as_mut() else {
            return Ok(());
        };
        let list = source()?;
        let seeds = nearest_entry_kernel(self.g.ctx, self.data, self.metric, &list)?;
        self.st.seeds = Some(seeds);
        Ok(())
    }

    fn merge(&mut self, ltop: usize, lm: usize) -> Result<()> {
        let z = self.shape;
        let k = self.k;
        let n_lm = z.layer_len(lm);
        let (bcap, qcap, rcap) = caps(k + 1, MERGE_CACHE);
        let (seen, wide) = seen_slots(self.tags(), self.g.tuning.merge_seen_bytes, n_lm);
        let (warps, smem) = search_launch(
            search_words((bcap, qcap, rcap), seen, wide),
            self.g.tuning.max_warps,
        );
        let wide32 = u32::from(wide);
        let team = self.team();
        let levels = u32_of(z.g.pow((ltop - lm) as u32), "levels")?;
        let (s0, s0_off) = seg(&z, lm);
        let slack = self.slack();
        let ctx = self.g.ctx;
        let view = self.data.rows_view(0, self.data.rows())?;
        let stride = u32_of(self.data.stride(), "stride")?;
        let (k32, lm32, ltop32, n32, s32) = (
            k as u32,
            lm as u32,
            ltop as u32,
            u32_of(n_lm, "layer size")?,
            z.s as u32,
        );
        let max_pops = MERGE_MAX_POPS as u32;
        let heads = self.g.tuning.merge_heads;
        // Locality keys (when the order is on): a merge into layer 0 records each point's best
        // layer-1 point, a merge into layer 1 from layer 2 or above its best layer-2 point.
        let ordered = self.g.tuning.locality_order;
        let key_mask =
            u32::from(ordered && lm == 0) | (u32::from(ordered && lm == 1 && ltop >= 2) << 1);
        let use_order = u32::from(ordered && lm == 0 && self.st.have_order);
        let off_lm = self.st.row_off[lm] as u32;
        need(self.st.scratch.len(), (n_lm * k) as u64, "ggnn_merge out")?;
        need(self.st.counts.len(), 2 * ltop as u64, "ggnn_merge counts")?;
        need(
            self.st.ids.len(),
            (self.st.n_rows * k) as u64,
            "ggnn_merge ids",
        )?;
        let use_seeds = u32::from(lm == 0 && self.st.seeds.is_some());
        let st = &mut self.st;
        // The seeds (entry-seeded merges into layer 0); any u32 buffer stands in without them.
        let seeds = st.seeds.as_ref().unwrap_or(&st.order);
        // SAFETY: each pointer's length was checked above (`need`) for these sizes.
        unsafe {
            ggnn::ggnn_merge(
                ctx,
                T::DTYPE,
                Launch::new((n32.div_ceil(warps), 1, 1), warps * 32, smem),
                &ggnn::GgnnMergeArgs {
                    data: view.input(),
                    stride,
                    metric: self.metric,
                    ids: st.ids.input(),
                    glob: st.glob.input(),
                    sel: st.sel.input(),
                    row_off: st.row_off_dev.input(),
                    k: k32,
                    lm: lm32,
                    ltop: ltop32,
                    n_lm: n32,
                    s0,
                    s0_off,
                    s: s32,
                    levels,
                    slack,
                    bcap,
                    qcap,
                    rcap,
                    seen_slots: seen,
                    wide: wide32,
                    max_pops,
                    team,
                    heads,
                    perm: st.order.input(),
                    use_perm: use_order,
                    key1: st.key1.output(),
                    key2: st.key2.output(),
                    key_mask,
                    seeds: seeds.input(),
                    use_seeds,
                    out_ids: st.scratch.output(),
                    nn1: st.nn1.output(),
                    off_lm,
                    counts: st.counts.output(),
                },
            )
        }?;
        let off = self.st.row_off[lm] * k;
        copy_u32(ctx, &mut self.st.ids, off, &self.st.scratch, n_lm * k)?;
        if lm == 0 {
            self.update_stats()?;
        }
        if key_mask & 2 != 0 {
            self.rank_layer1()?;
        }
        Ok(())
    }

    /// Ranks the layer-1 points by (`key2`, id) on the host (`rank1`; a small layer).
    fn rank_layer1(&mut self) -> Result<()> {
        let l1 = self.shape.layer_len(1);
        let key2 = self.ctx().download(&self.st.key2, l1)?;
        let by_key2 = counting_order(&key2, self.shape.layer_len(2));
        let mut rank = vec![0u32; l1];
        for (r, &p) in by_key2.iter().enumerate() {
            rank[p as usize] = r as u32;
        }
        self.st.rank1 = self.ctx().upload(&rank)?;
        Ok(())
    }

    /// A merge into layer `lm` followed, after a merge into layer 0 with the locality order on,
    /// by the new processing order of layer 0 (phase `order`).
    fn merge_and_order(&mut self, ltop: usize, lm: usize) -> Result<()> {
        self.timed("merge", lm, ltop, |r| r.merge(ltop, lm))?;
        if lm == 0 && self.g.tuning.locality_order {
            self.timed("order", 0, 0, |r| r.reorder())?;
        }
        Ok(())
    }

    /// Layer 0's next merge and symmetric linking process the points grouped by the layer-1
    /// point their last merge found nearest (`key1`), the groups ordered by the layer-2 point
    /// nearest to that layer-1 point (`rank1`, once a merge into layer 1 from layer 2 or above
    /// has recorded it; by layer-1 id before): a counting sort on the device.
    fn reorder(&mut self) -> Result<()> {
        let n = self.shape.n;
        let l1 = self.shape.layer_len(1);
        order_on_device(
            self.g.ctx,
            &self.st.key1,
            n,
            &self.st.rank1,
            l1,
            &mut self.st.order_count,
            &mut self.st.order,
        )?;
        self.st.have_order = true;
        Ok(())
    }

    /// Symmetric linking of layer `l`: the searches, then the rows' second halves.
    fn sym(&mut self, l: usize) -> Result<()> {
        if self.k / 2 == 0 {
            return Ok(());
        }
        self.timed("sym", l, l, |r| r.sym_search(l))?;
        self.timed("sym_rebuild", l, l, |r| r.sym_rebuild(l))
    }

    /// The symmetric-link searches of layer `l` (inverse links into the link lists).
    fn sym_search(&mut self, l: usize) -> Result<()> {
        let k = self.k;
        let kf = k / 2;
        let kl = k - kf;
        let n = self.shape.layer_len(l);
        let (bcap, qcap, rcap) = caps(kf, SYM_CACHE);
        let (seen, wide) = seen_slots(self.tags(), self.g.tuning.sym_seen_bytes, n);
        let (warps, smem) = search_launch(
            search_words((bcap, qcap, rcap), seen, wide),
            self.g.tuning.max_warps,
        );
        let wide32 = u32::from(wide);
        let use_order = u32::from(l == 0 && self.st.have_order);
        let team = self.team();
        let slack = self.slack();
        let ctx = self.g.ctx;
        fill_u32(ctx, &mut self.st.link_cnt, 0, n, 0)?;
        let view = self.data.rows_view(0, self.data.rows())?;
        let stride = u32_of(self.data.stride(), "stride")?;
        let off = self.st.row_off[l] as u32;
        let (n32, k32, kl32, kf32) = (u32_of(n, "layer size")?, k as u32, kl as u32, kf as u32);
        let max_pops = SYM_MAX_POPS as u32;
        need(self.st.links.len(), (n * kf) as u64, "ggnn_sym links")?;
        need(self.st.counts.len(), 2 * l as u64 + 2, "ggnn_sym counts")?;
        let st = &mut self.st;
        let mut counts = st.counts.slice_mut(2 * l..2 * l + 2);
        // SAFETY: each pointer's length was checked above (`need`) for these sizes.
        unsafe {
            ggnn::ggnn_sym(
                ctx,
                T::DTYPE,
                Launch::new((n32.div_ceil(warps), 1, 1), warps * 32, smem),
                &ggnn::GgnnSymArgs {
                    data: view.input(),
                    stride,
                    metric: self.metric,
                    ids: st.ids.input(),
                    glob: st.glob.input(),
                    off,
                    n: n32,
                    k: k32,
                    kl: kl32,
                    kf: kf32,
                    slack,
                    bcap,
                    qcap,
                    rcap,
                    seen_slots: seen,
                    wide: wide32,
                    max_pops,
                    team,
                    perm: st.order.input(),
                    use_perm: use_order,
                    links: st.links.output(),
                    link_cnt: st.link_cnt.output(),
                    dropped: st.dropped.output(),
                    counts: counts.output(),
                },
            )
        }
    }

    /// The rows' second halves after the searches of [`Self::sym_search`] (layer `l`).
    fn sym_rebuild(&mut self, l: usize) -> Result<()> {
        let k = self.k;
        let kf = k / 2;
        let kl = k - kf;
        let n = self.shape.layer_len(l);
        let ctx = self.g.ctx;
        let off = self.st.row_off[l] as u32;
        let (n32, k32, kl32, kf32) = (u32_of(n, "layer size")?, k as u32, kl as u32, kf as u32);
        let st = &mut self.st;
        // SAFETY: the state's buffers were allocated for the layers' shape, which these offsets and
        // counts come from.
        unsafe {
            ggnn::ggnn_sym_rebuild(
                ctx,
                Launch::blocks(n32.div_ceil(THREADS), THREADS),
                &ggnn::GgnnSymRebuildArgs {
                    ids: st.ids.input(),
                    off,
                    n: n32,
                    k: k32,
                    kl: kl32,
                    kf: kf32,
                    links: st.links.output(),
                    link_cnt: st.link_cnt.input(),
                    out: st.scratch.output(),
                },
            )
        }?;
        let o = self.st.row_off[l] * k;
        copy_u32(ctx, &mut self.st.ids, o, &self.st.scratch, n * k)
    }

    fn finish(self, max_nn1: f32) -> Result<GgnnOut> {
        let ctx = self.g.ctx;
        let k = self.k;
        let dropped = ctx.download(&self.st.dropped, 1)?[0];
        let off = &self.st.row_off;
        // Each layer straight into its own vectors (no copy on the host).
        let layers = (0..self.shape.layers)
            .map(|l| {
                Ok(GgnnLayerOut {
                    ids: ctx.download_view(&self.st.ids.slice(off[l] * k..off[l + 1] * k))?,
                    global: ctx.download_view(&self.st.glob.slice(off[l]..off[l + 1]))?,
                    selection: if l == 0 {
                        Vec::new()
                    } else {
                        ctx.download_view(&self.st.sel.slice(off[l]..off[l + 1]))?
                    },
                })
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(GgnnOut {
            layers,
            mean_nn1: self.mean_nn1,
            max_nn1,
            dropped_links: dropped,
            phases: self.phases,
        })
    }
}

/// Every kernel a GPU GGNN build of `T` launches (any metric): the plain kernels (selection,
/// symmetric rebuild, ordering, fills) and the per-type top, merge, nearest-entry and
/// symmetric-link kernels. [`GgnnBuild::build`] prepares them together
/// ([`GpuContext::prepare_kernels`]); a caller that also searches may prepare them with its
/// search's kernels.
pub fn build_kernels<T: Element>() -> Result<Vec<weft_gpu::Kernel>> {
    Ok(vec![
        ggnn::ggnn_select_kernel(),
        ggnn::ggnn_top_kernel(T::DTYPE)?,
        ggnn::ggnn_merge_kernel(T::DTYPE)?,
        ggnn::ggnn_nearest_entry_kernel(T::DTYPE)?,
        ggnn::ggnn_sym_kernel(T::DTYPE)?,
    ])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counting_order_is_a_stable_sort_by_key() {
        let keys = [3u32, 1, 3, 0, 1, 9, 2];
        // Keys past the last bucket count as the last bucket (3 here).
        assert_eq!(counting_order(&keys, 4), vec![3, 1, 4, 6, 0, 2, 5]);
        assert_eq!(counting_order(&[], 4), Vec::<u32>::new());
        assert_eq!(counting_order(&[5, 5, 5], 1), vec![0, 1, 2]);
    }

    #[test]
    fn seen_sets_are_wide_only_when_tags_cannot_name_the_layer() {
        // 4096 bytes: 2048 tag slots name 2^23 ids exactly, or 1024 u32 ids.
        assert_eq!(seen_slots(true, 4096, 1 << 23), (2048, false));
        assert_eq!(seen_slots(true, 4096, (1 << 23) + 1), (1024, true));
        assert_eq!(seen_slots(true, 256, 1 << 19), (128, false));
        assert_eq!(seen_slots(true, 256, (1 << 19) + 1), (64, true));
        assert_eq!(seen_slots(false, 4096, 10), (1024, true));
        // Tags take half the words of u32 slots.
        let caps = (25, 39, 192);
        assert_eq!(
            search_words(caps, 2048, false) + 1024,
            search_words(caps, 2048, true)
        );
    }
}
