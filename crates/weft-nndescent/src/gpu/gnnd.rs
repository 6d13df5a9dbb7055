//! GPU NN-Descent (GNND; Wang, Zhao & Zeng, CIKM 2021): [`Gnnd`] builds a k-NN graph on the
//! device and leaves it there ([`DeviceKnnGraph`]) or brings it back ([`KnnGraph`]).
//!
//! The kernels are in this crate's `kernels/gnnd/gnnd.cu` (launched through the bindings
//! weft-kernels generates from their argument structs, `kernels/gnnd/args.cuh`); the design and
//! the choices where the paper is ambiguous are in `docs/gnnd.md`. The settings are
//! [`NnDescentParams`]' GPU fields (`gpu_sample`, `max_iters`, `delta`), the build context's
//! seed, and the GPU-only knobs of [`GnndTuning`]. In short, per iteration:
//! 1. `gnnd_sample`: the first `p` NEW and first `p` OLD entries of each sorted list (the
//!    closest) are sampled; the sampled NEW entries become OLD; every forward sample receives
//!    the list owner as a reverse sample (appended atomically, at most `p`).
//! 2. `gnnd_dedup`: samples de-duplicated; OLD samples that are also NEW dropped.
//! 3. `gnnd_join_*`: one block per list computes the NEW x (NEW + OLD) distances by register
//!    tiles over shared-memory chunks of the vectors, then the selective update: each NEW sample
//!    is offered its nearest other NEW and its nearest OLD sample, each OLD sample its nearest
//!    NEW; offers closer than the target's current worst entry go to the target's inbox.
//! 4. `gnnd_merge`: one warp per list inserts its inbox into the sorted list (duplicates
//!    rejected), and counts the insertions.
//!
//! The build stops after `max_iters` iterations or when an iteration inserts fewer than
//! `delta * n * k` entries. Inbox overflows (more offers to one list in one iteration than the
//! inbox holds) drop offers; they are counted in [`GnndStats::dropped`]. Results are valid
//! k-NN graphs but not bit-reproducible (atomic arrival order decides reverse samples and inbox
//! order).

use weft_core::error::check_graph_k;
use weft_core::{BuildCtx, DatasetView, Element, Error, KnnGraph, Metric, Result};
use weft_exact::gpu::launch::{exact_norms, exact_norms_kernel};
use weft_gpu::launch::{elem_bytes, need, u32_of};
use weft_gpu::{
    DeviceBuffer, DeviceKnnGraph, DeviceMatrix, DeviceView, GpuContext, Kernel, Launch,
};

use super::kernels::gnnd as kernels;
use crate::NnDescentParams;
use crate::params::GPU_SAMPLE_LIMIT;

mod merge;
use merge::MODE_CROSS;
pub use merge::MergeSide;

/// The largest sample count `p` (lists of NEW and of OLD samples hold at most `2 p = 64`): the
/// limit [`NnDescentParams::gpu_sample`] is validated against.
pub const MAX_SAMPLE: usize = GPU_SAMPLE_LIMIT;
/// The largest `k` GNND supports (a list must fit one warp's share of shared memory).
pub const MAX_K: usize = 1024;
/// The most vertices: ids use 31 bits (the top bit is the NEW flag).
pub const MAX_POINTS: usize = (1 << 31) - 2;

/// Threads per block of the warp-per-list kernels.
const WARP_BLOCK: u32 = 256;
/// Threads per block of `gnnd_join_*` (the kernel's `JOIN_THREADS`).
const JOIN_THREADS: u32 = 256;

/// GNND's GPU-only knobs, which [`NnDescentParams`] does not carry: the builder
/// ([`crate::NnDescentGpu`]) always uses the default, the settings measured best in
/// `docs/gnnd.md`; the oracle tests and `gnnd_bench` vary them through [`Gnnd::with_tuning`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GnndTuning {
    /// Inbox slots per list (offers per iteration); 0 picks `max(k, 8 p)` rounded up to 32.
    /// Default 0.
    pub inbox: usize,
    /// Offer each selected pair to both ends (the paper offers it to one: each NEW sample gets
    /// its nearest NEW and nearest OLD, each OLD sample its nearest NEW); see `docs/gnnd.md`.
    /// Default on.
    pub symmetric: bool,
    /// Offers per sample row and join, in `1..=4`: the row's nearest `row_offers` partners
    /// among the pairs worth offering (the paper: 1). Default 4.
    pub row_offers: usize,
    /// How a graph merge (GGM) makes room in each list for the other subset's vertices.
    /// Default [`MergeLists::Auto`].
    pub merge_lists: MergeLists,
}

/// How GGM ([`Gnnd::merge`]) makes room in each list for cross neighbours (vertices of the
/// other subset) while it refines the lists.
///
/// Measured on an H200 (`gnnd_bench` with `GNND_MERGE_HALVES`, two halves of 1M x 128 merged,
/// see `docs/gnnd.md`): at k = 8 the paper's lists reach graph recall 0.911 and doubled lists
/// 0.974 for 13% more merge time; at k = 16 and 32 the paper's lists are already above a single
/// build of the whole set (0.992 and 0.999 against 0.989 and 0.998) and doubled ones cost 1.4 to
/// 1.8x the merge time for 0.001 to 0.007 more.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum MergeLists {
    /// [`MergeLists::Doubled`] below degree [`MergeLists::DOUBLED_BELOW`], else
    /// [`MergeLists::Half`]. The default.
    #[default]
    Auto,
    /// The paper's: lists of `k` entries, of which each keeps its nearest `k - k/2` own entries
    /// and gives `k/2` slots to cross neighbours; the `k/2` own entries set aside return at the
    /// end. At small `k` the cross joins have too little to explore from.
    Half,
    /// Lists of `2k` entries during the merge: every own entry is kept and `k` slots take cross
    /// neighbours; each row is cut to its nearest `k` at the end (needs `2k <= MAX_K`).
    Doubled,
}

impl MergeLists {
    /// [`MergeLists::Auto`] doubles the lists of degrees below this.
    pub const DOUBLED_BELOW: usize = 16;

    /// The lists a merge of degree-`k` graphs uses ([`MergeLists::Auto`] resolved).
    pub fn resolve(self, k: usize) -> MergeLists {
        match self {
            MergeLists::Auto if k < Self::DOUBLED_BELOW => MergeLists::Doubled,
            MergeLists::Auto => MergeLists::Half,
            other => other,
        }
    }

    /// The entries per list during a merge of degree-`k` graphs.
    pub fn width(self, k: usize) -> usize {
        match self.resolve(k) {
            MergeLists::Doubled => 2 * k,
            _ => k,
        }
    }

    /// The own entries each list keeps during a merge of degree-`k` graphs.
    pub fn kept(self, k: usize) -> usize {
        match self.resolve(k) {
            MergeLists::Doubled => k,
            _ => k - k / 2,
        }
    }
}

impl Default for GnndTuning {
    fn default() -> Self {
        GnndTuning {
            inbox: 0,
            symmetric: true,
            row_offers: 4,
            merge_lists: MergeLists::default(),
        }
    }
}

impl GnndTuning {
    /// The inbox size used for degree `k` and sample count `sample`.
    pub fn inbox_for(&self, k: usize, sample: usize) -> usize {
        if self.inbox > 0 {
            self.inbox
        } else {
            k.max(8 * sample).next_multiple_of(32)
        }
    }

    /// The join kernel's `mode` argument: bit 0 symmetric, bits 8.. the row offers.
    fn mode(&self) -> u32 {
        self.symmetric as u32 | ((self.row_offers as u32) << 8)
    }

    /// Device bytes a build of `n` points of `dim` elements of `T` needs with degree `k` and
    /// `params`' sample count, without the vectors (`vectors`: plus the uploaded vectors).
    pub fn bytes_needed<T: Element>(
        &self,
        n: usize,
        dim: usize,
        k: usize,
        params: &NnDescentParams,
        vectors: bool,
    ) -> u64 {
        let n64 = n as u64;
        let m = self.inbox_for(k, params.gpu_sample) as u64;
        let s = 2 * params.gpu_sample as u64;
        let data = if vectors {
            DeviceMatrix::<T>::bytes_for(n, dim)
        } else {
            0
        };
        data + n64 * k as u64 * 8 + n64 * m * 8 + n64 * 4 + 2 * n64 * s * 4 + 4 * n64 * 4 + n64 * 4
    }

    /// Checks the GPU settings of `params` and these knobs for degree `k`.
    fn check(&self, params: &NnDescentParams, k: usize) -> Result<()> {
        if !(1..=MAX_SAMPLE).contains(&params.gpu_sample) {
            return Err(Error::invalid_param(
                "gpu_sample",
                format!(
                    "the GPU sample count must be in 1..={MAX_SAMPLE}, got {}",
                    params.gpu_sample
                ),
            ));
        }
        if !(params.delta.is_finite() && (0.0..1.0).contains(&params.delta)) {
            return Err(Error::invalid_param(
                "delta",
                format!("must be in [0, 1), got {}", params.delta),
            ));
        }
        if !(1..=4).contains(&self.row_offers) {
            return Err(Error::invalid_param(
                "row_offers",
                format!("must be in 1..=4, got {}", self.row_offers),
            ));
        }
        if k > MAX_K {
            return Err(Error::invalid_param(
                "k",
                format!("k = {k} exceeds the GNND maximum of {MAX_K}"),
            ));
        }
        if self.inbox != 0 && self.inbox < k {
            return Err(Error::invalid_param(
                "inbox",
                format!(
                    "the inbox ({}) must hold at least k = {k} offers",
                    self.inbox
                ),
            ));
        }
        Ok(())
    }
}

/// What a GNND build did.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct GnndStats {
    /// Iterations run after the initialisation.
    pub iterations: usize,
    /// List insertions of each iteration.
    pub updates: Vec<u64>,
    /// Offers dropped by full inboxes in each iteration.
    pub dropped: Vec<u64>,
    /// Device bytes the build allocated (the vectors included when they were uploaded).
    pub bytes: u64,
}

/// GNND on one GPU.
#[derive(Clone, Copy, Debug)]
pub struct Gnnd<'c> {
    ctx: &'c GpuContext,
    budget: Option<u64>,
    tuning: GnndTuning,
}

/// The device buffers of one build.
struct State {
    n: usize,
    k: usize,
    p: usize,
    m: usize,
    list_d: DeviceBuffer<f32>,
    list_i: DeviceBuffer<u32>,
    inbox_d: DeviceBuffer<f32>,
    inbox_i: DeviceBuffer<u32>,
    inbox_cnt: DeviceBuffer<u32>,
    new_s: DeviceBuffer<u32>,
    old_s: DeviceBuffer<u32>,
    /// Sample counts: forward (then, after dedup, all) NEW and OLD; reverse NEW and OLD.
    fwd_new: DeviceBuffer<u32>,
    fwd_old: DeviceBuffer<u32>,
    rev_new: DeviceBuffer<u32>,
    rev_old: DeviceBuffer<u32>,
    norms: DeviceBuffer<f32>,
    /// Insertions so far (cumulative).
    inserted: DeviceBuffer<u64>,
    /// Offers dropped by full inboxes so far (cumulative).
    dropped: DeviceBuffer<u64>,
}

impl<'c> Gnnd<'c> {
    /// GNND on `ctx`, within the default memory budget, with the default [`GnndTuning`].
    pub fn new(ctx: &'c GpuContext) -> Self {
        Gnnd {
            ctx,
            budget: None,
            tuning: GnndTuning::default(),
        }
    }

    /// Limits device memory to `bytes` (still capped by free memory).
    pub fn with_budget(mut self, bytes: u64) -> Self {
        self.budget = Some(bytes);
        self
    }

    /// Uses the GPU-only knobs `tuning` instead of the defaults.
    pub fn with_tuning(mut self, tuning: GnndTuning) -> Self {
        self.tuning = tuning;
        self
    }

    /// The GPU-only knobs in use.
    pub fn tuning(&self) -> &GnndTuning {
        &self.tuning
    }

    /// Device bytes a build of `n` points of `dim` elements of `T` needs with degree `k`,
    /// without the vectors (`vectors`: plus the uploaded vectors); see
    /// [`GnndTuning::bytes_needed`].
    pub fn bytes_needed<T: Element>(
        &self,
        n: usize,
        dim: usize,
        k: usize,
        params: &NnDescentParams,
        vectors: bool,
    ) -> u64 {
        self.tuning.bytes_needed::<T>(n, dim, k, params, vectors)
    }

    /// Builds the k-NN graph of `data` (on the host) with `params`' GPU fields (`gpu_sample`,
    /// `max_iters`, `delta`; the random initial graph seeded by `build`'s seed) and returns it
    /// on the host.
    pub fn build<T: Element>(
        &self,
        data: DatasetView<'_, T>,
        metric: Metric,
        k: usize,
        params: &NnDescentParams,
        build: &BuildCtx,
    ) -> Result<(KnnGraph, GnndStats)> {
        check_graph_k(k, data.rows())?;
        self.tuning.check(params, k)?;
        check_points(data.rows())?;
        let bytes = self.bytes_needed::<T>(data.rows(), data.dim(), k, params, true);
        self.ctx.check_fits(bytes, self.budget)?;
        let m = DeviceMatrix::upload(self.ctx, data)?;
        let (g, mut stats) = self.build_device(&m, metric, k, params, build)?;
        stats.bytes = bytes;
        Ok((g.download(self.ctx)?, stats))
    }

    /// Builds the k-NN graph of vectors already on the device and leaves it there (settings as
    /// in [`Gnnd::build`]).
    pub fn build_device<T: Element>(
        &self,
        data: &DeviceMatrix<T>,
        metric: Metric,
        k: usize,
        params: &NnDescentParams,
        build: &BuildCtx,
    ) -> Result<(DeviceKnnGraph, GnndStats)> {
        let n = data.rows();
        check_graph_k(k, n)?;
        self.tuning.check(params, k)?;
        check_points(n)?;
        let bytes = self.bytes_needed::<T>(n, data.dim(), k, params, false);
        self.ctx.check_fits(bytes, self.budget)?;
        build.check_cancelled()?;
        let ctx = self.ctx;
        let mut st = State::alloc(
            ctx,
            n,
            k,
            params.gpu_sample,
            self.tuning.inbox_for(k, params.gpu_sample),
        )?;
        ctx.prepare_kernels(&build_kernels::<T>(metric)?)?;
        let view = data.rows_view(0, n)?;
        let stride = u32_of(data.stride(), "stride")?;
        if metric == Metric::Cosine {
            exact_norms::<T>(ctx, &view, n as u32, stride, &mut st.norms.slice_mut(0..n))?;
        }
        let mut stats = GnndStats {
            bytes,
            ..Default::default()
        };
        build
            .progress()
            .begin("gnnd", Some(params.max_iters as u64));
        init::<T>(ctx, &view, stride, metric, build.seed(), &mut st)?;
        merge(ctx, &mut st)?;
        let vectors = Vectors {
            a: &view,
            b: &view,
            split: n as u32,
            stride,
        };
        let run = Iterations {
            params,
            mode: self.tuning.mode(),
            sample_split: 0,
        };
        iterate::<T>(ctx, &mut st, &vectors, metric, &run, build, &mut stats)?;
        build.progress().end();
        finish(ctx, &mut st)?;
        let graph = DeviceKnnGraph::from_parts(n, k, st.list_i, st.list_d)?;
        Ok((graph, stats))
    }
}

fn check_points(n: usize) -> Result<()> {
    if n > MAX_POINTS {
        return Err(Error::InvalidInput(format!(
            "{n} points exceed GNND's id range ({MAX_POINTS})"
        )));
    }
    Ok(())
}

/// Every kernel a GNND build of `T` with `metric` launches: the plain kernels (sampling,
/// deduplication, merge, finish), `gnnd_init_<dt>`, the join of the metric and, for cosine, the
/// norms. [`Gnnd::build_device`] prepares them together ([`GpuContext::prepare_kernels`]); a
/// caller that also searches may prepare them with its search's kernels.
pub fn build_kernels<T: Element>(metric: Metric) -> Result<Vec<Kernel>> {
    let mut v = vec![
        kernels::gnnd_sample_kernel(),
        kernels::gnnd_init_kernel(T::DTYPE)?,
        match metric {
            Metric::L2Squared => kernels::gnnd_join_l2_kernel(T::DTYPE)?,
            Metric::InnerProduct => kernels::gnnd_join_ip_kernel(T::DTYPE)?,
            Metric::Cosine => kernels::gnnd_join_cos_kernel(T::DTYPE)?,
        },
    ];
    if metric == Metric::Cosine {
        v.push(exact_norms_kernel::<T>()?);
    }
    Ok(v)
}

/// The kernels a GNND merge (GGM) of `T` with `metric` launches beyond
/// [`build_kernels`]' plain ones: `gnnd_cross_init_<dt>`, the join, and for cosine the norms.
pub fn merge_kernels<T: Element>(metric: Metric) -> Result<Vec<Kernel>> {
    let mut v = build_kernels::<T>(metric)?;
    v[1] = kernels::gnnd_cross_init_kernel(T::DTYPE)?;
    Ok(v)
}

/// How [`iterate`] runs: `params`' iteration bounds (`max_iters`, `delta`), the join's `mode`
/// and the sampling's `split` (0 for a build; the merge's first vertex of the second subset).
struct Iterations<'p> {
    params: &'p NnDescentParams,
    mode: u32,
    sample_split: u32,
}

/// The GNND iterations shared by a build and a merge (GGM): sample, dedup, join, merge, until
/// `max_iters` iterations have run or one inserts fewer than `delta * n * k` entries. Each
/// iteration's insertions and dropped offers are appended to `stats`; cancellation is checked
/// before each iteration and progress advanced after it.
fn iterate<T: Element>(
    ctx: &GpuContext,
    st: &mut State,
    vectors: &Vectors<'_, '_>,
    metric: Metric,
    run: &Iterations<'_>,
    build: &BuildCtx,
    stats: &mut GnndStats,
) -> Result<()> {
    let mut last = read_counters(ctx, st)?;
    let threshold = f64::from(run.params.delta) * st.n as f64 * st.k as f64;
    for _ in 0..run.params.max_iters {
        build.check_cancelled()?;
        sample(ctx, st, run.sample_split)?;
        dedup(ctx, st)?;
        join::<T>(ctx, vectors, metric, run.mode, st)?;
        merge(ctx, st)?;
        let now = read_counters(ctx, st)?;
        let updates = now[0] - last[0];
        stats.updates.push(updates);
        stats.dropped.push(now[1] - last[1]);
        stats.iterations += 1;
        last = now;
        build.progress().advance(1);
        if (updates as f64) < threshold {
            break;
        }
    }
    Ok(())
}

impl State {
    fn alloc(ctx: &GpuContext, n: usize, k: usize, p: usize, m: usize) -> Result<Self> {
        let s = 2 * p;
        Ok(State {
            n,
            k,
            p,
            m,
            list_d: ctx.alloc_zeros(n * k)?,
            list_i: ctx.alloc_zeros(n * k)?,
            inbox_d: ctx.alloc_zeros(n * m)?,
            inbox_i: ctx.alloc_zeros(n * m)?,
            inbox_cnt: ctx.alloc_zeros(n)?,
            new_s: ctx.alloc_zeros(n * s)?,
            old_s: ctx.alloc_zeros(n * s)?,
            fwd_new: ctx.alloc_zeros(n)?,
            fwd_old: ctx.alloc_zeros(n)?,
            rev_new: ctx.alloc_zeros(n)?,
            rev_old: ctx.alloc_zeros(n)?,
            norms: ctx.alloc_zeros(n)?,
            inserted: ctx.alloc_zeros(1)?,
            dropped: ctx.alloc_zeros(1)?,
        })
    }
}

fn read_counters(ctx: &GpuContext, st: &State) -> Result<[u64; 2]> {
    let a = ctx.download(&st.inserted, 1)?;
    let b = ctx.download(&st.dropped, 1)?;
    Ok([a[0], b[0]])
}

/// One warp per list, in blocks of [`WARP_BLOCK`] threads.
fn warp_launch(n: usize) -> Result<Launch> {
    let warps = WARP_BLOCK as usize / 32;
    Ok(Launch::blocks(
        u32_of(n.div_ceil(warps), "blocks")?,
        WARP_BLOCK,
    ))
}

fn init<T: Element>(
    ctx: &GpuContext,
    data: &DeviceView<'_, u8>,
    stride: u32,
    metric: Metric,
    seed: u64,
    st: &mut State,
) -> Result<()> {
    let (n, k, m) = (st.n as u32, st.k as u32, st.m as u32);
    need(data.len(), elem_bytes::<T>(n, stride), "gnnd_init data")?;
    if m < k {
        return Err(Error::Gpu(format!("internal: inbox {m} < k {k}")));
    }
    // SAFETY: each pointer's length was checked above (`need`) for these sizes.
    unsafe {
        kernels::gnnd_init(
            ctx,
            T::DTYPE,
            warp_launch(st.n)?,
            &kernels::GnndInitArgs {
                data: data.input(),
                n,
                stride,
                metric,
                k,
                seed,
                list_d: st.list_d.output(),
                list_i: st.list_i.output(),
                inbox_d: st.inbox_d.output(),
                inbox_i: st.inbox_i.output(),
                inbox_cnt: st.inbox_cnt.output(),
                m,
            },
        )
    }
}

/// `split`: 0 for a build; for a merge, the first vertex of the second subset (OLD entries of
/// the other subset are then not sampled).
fn sample(ctx: &GpuContext, st: &mut State, split: u32) -> Result<()> {
    let (n, k, p) = (st.n as u32, st.k as u32, st.p as u32);
    // SAFETY: the state's buffers were allocated by `State::alloc` for its own `n`, `k`, `p` and
    // `m`, the sizes passed here.
    unsafe {
        kernels::gnnd_sample(
            ctx,
            warp_launch(st.n)?,
            &kernels::GnndSampleArgs {
                list_i: st.list_i.output(),
                n,
                k,
                p,
                split,
                new_s: st.new_s.output(),
                old_s: st.old_s.output(),
                fwd_new: st.fwd_new.output(),
                fwd_old: st.fwd_old.output(),
                rev_new: st.rev_new.output(),
                rev_old: st.rev_old.output(),
            },
        )
    }
}

fn dedup(ctx: &GpuContext, st: &mut State) -> Result<()> {
    let (n, p) = (st.n as u32, st.p as u32);
    // SAFETY: the state's buffers were allocated by `State::alloc` for its own `n`, `k`, `p` and
    // `m`, the sizes passed here.
    unsafe {
        kernels::gnnd_dedup(
            ctx,
            warp_launch(st.n)?,
            &kernels::GnndDedupArgs {
                n,
                p,
                new_s: st.new_s.output(),
                old_s: st.old_s.output(),
                fwd_new: st.fwd_new.output(),
                fwd_old: st.fwd_old.output(),
                rev_new: st.rev_new.output(),
                rev_old: st.rev_old.output(),
            },
        )
    }
}

/// The vectors of the `n` vertices of a build or merge: `[0, split)` in `a`, `[split, n)` in `b`
/// (a build: `b` is `a` and `split` is `n`).
struct Vectors<'a, 'b> {
    a: &'a DeviceView<'b, u8>,
    b: &'a DeviceView<'b, u8>,
    split: u32,
    stride: u32,
}

impl Vectors<'_, '_> {
    /// Checks that both views cover the rows the kernels read.
    fn check<T: Element>(&self, n: u32, what: &str) -> Result<()> {
        let split = self.split.min(n);
        need(self.a.len(), elem_bytes::<T>(split, self.stride), what)?;
        need(self.b.len(), elem_bytes::<T>(n - split, self.stride), what)
    }
}

fn join<T: Element>(
    ctx: &GpuContext,
    data: &Vectors<'_, '_>,
    metric: Metric,
    mode: u32,
    st: &mut State,
) -> Result<()> {
    let (n, k, m) = (st.n as u32, st.k as u32, st.m as u32);
    data.check::<T>(n, "gnnd_join data")?;
    let stride = data.stride;
    let s = 2 * st.p as u32;
    let launch = Launch::blocks(n, JOIN_THREADS);
    // The three kernels (one per metric) share their argument struct.
    let args = kernels::GnndJoinArgs {
        data: data.a.input(),
        data_b: data.b.input(),
        split: data.split,
        stride,
        metric,
        norms: st.norms.input(),
        new_s: st.new_s.input(),
        new_cnt: st.fwd_new.input(),
        old_s: st.old_s.input(),
        old_cnt: st.fwd_old.input(),
        s,
        list_d: st.list_d.input(),
        k,
        inbox_d: st.inbox_d.output(),
        inbox_i: st.inbox_i.output(),
        inbox_cnt: st.inbox_cnt.output(),
        m,
        overflow: st.dropped.output(),
        mode,
    };
    let launcher = match metric {
        Metric::L2Squared => kernels::gnnd_join_l2,
        Metric::InnerProduct => kernels::gnnd_join_ip,
        Metric::Cosine => kernels::gnnd_join_cos,
    };
    // SAFETY: the data views were checked above (`Vectors::check`); the state's buffers were
    // allocated by `State::alloc` for its own `n`, `k`, `p` and `m`.
    unsafe { launcher(ctx, T::DTYPE, launch, &args) }
}

/// Warps per block of `gnnd_merge` for degree `k` (each warp holds a list in shared memory).
fn merge_warps(k: usize) -> u32 {
    ((48 * 1024) / (k * 8)).clamp(1, 8) as u32
}

fn merge(ctx: &GpuContext, st: &mut State) -> Result<()> {
    let (n, k, m) = (st.n as u32, st.k as u32, st.m as u32);
    let warps = merge_warps(st.k);
    // SAFETY: the state's buffers were allocated by `State::alloc` for its own `n`, `k`, `p` and
    // `m`, the sizes passed here.
    unsafe {
        kernels::gnnd_merge(
            ctx,
            Launch::new(
                (u32_of(st.n.div_ceil(warps as usize), "blocks")?, 1, 1),
                warps * 32,
                warps * k * 8,
            ),
            &kernels::GnndMergeArgs {
                list_d: st.list_d.output(),
                list_i: st.list_i.output(),
                n,
                k,
                inbox_d: st.inbox_d.input(),
                inbox_i: st.inbox_i.input(),
                inbox_cnt: st.inbox_cnt.output(),
                m,
                updates: st.inserted.output(),
            },
        )
    }
}

fn finish(ctx: &GpuContext, st: &mut State) -> Result<()> {
    let len = (st.n * st.k) as u64;
    // SAFETY: the state's buffers were allocated by `State::alloc` for its own `n`, `k`, `p` and
    // `m`, the sizes passed here.
    unsafe {
        kernels::gnnd_finish(
            ctx,
            Launch::blocks(u32_of(len.div_ceil(256) as usize, "blocks")?, 256),
            &kernels::GnndFinishArgs {
                list_i: st.list_i.output(),
                len,
            },
        )
    }
}

/// Device-side pieces of GNND run on explicit inputs, for the oracle tests (weft-nndescent's
/// `tests/gpu.rs` compares them with a CPU model).
pub mod testing {
    use super::*;

    /// Lists with NEW flags: `ids[v * k + j]` (top bit: NEW) and `dists`, sorted per row.
    #[derive(Clone, Debug, PartialEq)]
    pub struct FlaggedLists {
        /// Vertices.
        pub n: usize,
        /// Entries per list.
        pub k: usize,
        /// Ids, the top bit set for NEW entries; `INVALID` pads.
        pub ids: Vec<u32>,
        /// Distances (infinity pads).
        pub dists: Vec<f32>,
    }

    /// The top bit of a list id: the entry is NEW.
    pub const NEW_FLAG: u32 = 0x8000_0000;

    /// The samples a join reads: each vertex's deduplicated NEW samples (`new[v]`) and OLD
    /// samples (`old[v]`), at most `2 p` each for the sample count `p`.
    #[derive(Clone, Copy, Debug)]
    pub struct JoinSamples<'a> {
        /// The sample count (the sample rows hold `2 p` ids).
        pub p: usize,
        /// Each vertex's NEW samples.
        pub new: &'a [Vec<u32>],
        /// Each vertex's OLD samples.
        pub old: &'a [Vec<u32>],
    }

    /// How a join offers its candidates and where they go: `symmetric` and `row_offers` as in
    /// [`GnndTuning`] (`row_offers` clamped to `1..=4`), into inboxes of `inbox` slots per list
    /// (at least 1).
    #[derive(Clone, Copy, Debug)]
    pub struct JoinOffers {
        /// Inbox slots per list.
        pub inbox: usize,
        /// Offer each selected pair to both ends.
        pub symmetric: bool,
        /// Offers per sample row and join.
        pub row_offers: usize,
    }

    impl JoinOffers {
        /// The join kernel's `mode` argument without the cross bit: bit 0 symmetric, bits 8..
        /// the row offers.
        fn mode(&self) -> u32 {
            self.symmetric as u32 | ((self.row_offers.clamp(1, 4) as u32) << 8)
        }
    }

    /// Runs one join (`gnnd_join_*`) over the given deduplicated `samples` and one merge
    /// (`gnnd_merge`) on `lists`, offering as `offers` says; returns the lists after the merge
    /// and the insertions and dropped offers.
    pub fn join_and_merge<T: Element>(
        ctx: &GpuContext,
        data: DatasetView<'_, T>,
        metric: Metric,
        lists: &FlaggedLists,
        samples: &JoinSamples<'_>,
        offers: &JoinOffers,
    ) -> Result<(FlaggedLists, u64, u64)> {
        join_and_merge_split(ctx, data, None, metric, lists, samples, offers)
    }

    /// [`join_and_merge`] in the merge's cross-only mode (NEW x NEW pairs not joined), with the
    /// vectors in two device matrices: rows `[0, split)` and `[split, n)` (`0 < split < n`), as a
    /// merge holds them.
    pub fn cross_join_and_merge<T: Element>(
        ctx: &GpuContext,
        data: DatasetView<'_, T>,
        split: usize,
        metric: Metric,
        lists: &FlaggedLists,
        samples: &JoinSamples<'_>,
        offers: &JoinOffers,
    ) -> Result<(FlaggedLists, u64, u64)> {
        if split == 0 || split >= data.rows() {
            return Err(Error::InvalidInput(format!(
                "cross_join_and_merge: split {split} outside 1..{}",
                data.rows()
            )));
        }
        join_and_merge_split(ctx, data, Some(split), metric, lists, samples, offers)
    }

    /// [`join_and_merge`] (`split` = `None`), or [`cross_join_and_merge`] split at `split`.
    fn join_and_merge_split<T: Element>(
        ctx: &GpuContext,
        data: DatasetView<'_, T>,
        split: Option<usize>,
        metric: Metric,
        lists: &FlaggedLists,
        samples: &JoinSamples<'_>,
        offers: &JoinOffers,
    ) -> Result<(FlaggedLists, u64, u64)> {
        let mode = offers.mode() | if split.is_some() { MODE_CROSS } else { 0 };
        let (p, new, old, inbox) = (samples.p, samples.new, samples.old, offers.inbox);
        let (n, k) = (lists.n, lists.k);
        if data.rows() != n || new.len() != n || old.len() != n || inbox < 1 {
            return Err(Error::InvalidInput(
                "join_and_merge: inconsistent shapes".into(),
            ));
        }
        let s = 2 * p;
        if new.iter().chain(old).any(|l| l.len() > s) {
            return Err(Error::InvalidInput(
                "join_and_merge: too many samples".into(),
            ));
        }
        let mut st = State::alloc(ctx, n, k, p, inbox)?;
        let mut new_s = vec![0u32; n * s];
        let mut old_s = vec![0u32; n * s];
        let mut cnew = vec![0u32; n];
        let mut cold = vec![0u32; n];
        for v in 0..n {
            new_s[v * s..v * s + new[v].len()].copy_from_slice(&new[v]);
            old_s[v * s..v * s + old[v].len()].copy_from_slice(&old[v]);
            cnew[v] = new[v].len() as u32;
            cold[v] = old[v].len() as u32;
        }
        st.new_s = ctx.upload(&new_s)?;
        st.old_s = ctx.upload(&old_s)?;
        st.fwd_new = ctx.upload(&cnew)?;
        st.fwd_old = ctx.upload(&cold)?;
        st.list_i = ctx.upload(&lists.ids)?;
        st.list_d = ctx.upload(&lists.dists)?;
        let split = split.unwrap_or(n);
        let ma = DeviceMatrix::upload(ctx, data.slice_rows(0..split)?)?;
        let mb = if split < n {
            Some(DeviceMatrix::upload(ctx, data.slice_rows(split..n)?)?)
        } else {
            None
        };
        let va = ma.rows_view(0, split)?;
        let vb = match &mb {
            Some(m) => m.rows_view(0, n - split)?,
            None => ma.rows_view(0, split)?,
        };
        let stride = ma.stride() as u32;
        if metric == Metric::Cosine {
            exact_norms::<T>(
                ctx,
                &va,
                split as u32,
                stride,
                &mut st.norms.slice_mut(0..split),
            )?;
            if split < n {
                exact_norms::<T>(
                    ctx,
                    &vb,
                    (n - split) as u32,
                    stride,
                    &mut st.norms.slice_mut(split..n),
                )?;
            }
        }
        let vectors = Vectors {
            a: &va,
            b: &vb,
            split: split as u32,
            stride,
        };
        join::<T>(ctx, &vectors, metric, mode, &mut st)?;
        merge(ctx, &mut st)?;
        let c = read_counters(ctx, &st)?;
        let out = FlaggedLists {
            n,
            k,
            ids: ctx.download(&st.list_i, n * k)?,
            dists: ctx.download(&st.list_d, n * k)?,
        };
        Ok((out, c[0], c[1]))
    }

    /// Runs the sampling (`gnnd_sample` + `gnnd_dedup`) with sample count `p` on `lists`;
    /// returns the lists (sampled NEW entries now OLD) and each vertex's NEW and OLD samples.
    #[allow(clippy::type_complexity)]
    pub fn sample(
        ctx: &GpuContext,
        lists: &FlaggedLists,
        p: usize,
    ) -> Result<(FlaggedLists, Vec<Vec<u32>>, Vec<Vec<u32>>)> {
        sample_split(ctx, lists, p, 0)
    }

    /// [`sample`] as a merge samples (`split > 0`: the second subset starts at `split`; OLD
    /// entries of the other subset than the list owner's are not sampled).
    #[allow(clippy::type_complexity)]
    pub fn sample_split(
        ctx: &GpuContext,
        lists: &FlaggedLists,
        p: usize,
        split: usize,
    ) -> Result<(FlaggedLists, Vec<Vec<u32>>, Vec<Vec<u32>>)> {
        let (n, k) = (lists.n, lists.k);
        if !(1..=MAX_SAMPLE).contains(&p) {
            return Err(Error::InvalidInput(format!("sample count {p}")));
        }
        let mut st = State::alloc(ctx, n, k, p, k)?;
        st.list_i = ctx.upload(&lists.ids)?;
        st.list_d = ctx.upload(&lists.dists)?;
        super::sample(ctx, &mut st, u32_of(split, "split")?)?;
        dedup(ctx, &mut st)?;
        let s = 2 * p;
        let cnew = ctx.download(&st.fwd_new, n)?;
        let cold = ctx.download(&st.fwd_old, n)?;
        let new_s = ctx.download(&st.new_s, n * s)?;
        let old_s = ctx.download(&st.old_s, n * s)?;
        let ids = ctx.download(&st.list_i, n * k)?;
        let new = (0..n)
            .map(|v| new_s[v * s..v * s + cnew[v] as usize].to_vec())
            .collect();
        let old = (0..n)
            .map(|v| old_s[v * s..v * s + cold[v] as usize].to_vec())
            .collect();
        let out = FlaggedLists {
            n,
            k,
            ids,
            dists: lists.dists.clone(),
        };
        Ok((out, new, old))
    }
}
