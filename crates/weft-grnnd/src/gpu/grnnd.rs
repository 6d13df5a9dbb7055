//! GRNND (Li, Li, Chang & Miyazaki 2025), RNN-Descent on the GPU: [`Grnnd`] builds a search
//! graph of fixed out-degree on the device and leaves it there ([`DeviceFixedGraph`]) or brings
//! it back ([`FixedDegreeGraph`]).
//!
//! The kernels are in this crate's `kernels/grnnd/grnnd.cu` (launched through the bindings
//! weft-kernels generates from their argument structs, `kernels/grnnd/args.cuh`); the design
//! and the choices where the paper is ambiguous are in `docs/grnnd.md`. The settings are
//! [`GrnndParams`] themselves (the fields GRNND reads are listed at [`Grnnd::build`]) and the
//! build context's seed. In short:
//! 1. `grnnd_init_*`: every vertex gets `min(S, n - 1)` distinct random neighbours, NEW.
//! 2. `T1` outer iterations of `T2` rounds of `grnnd_update_*` (one warp per vertex): the
//!    vertex's pool (read buffer) is visited pair by pair in the configured order (random,
//!    ascending, descending); the RNG rule redirects the farther member of a pruned pair to the
//!    closer one's pool in the write buffer; survivors go to the vertex's own pool. Insertions
//!    are the digest's corrected WARP_INSERT on packed 64-bit `(distance, flag, id)` entries
//!    (ballot de-duplication, slot reservation, compare-and-swap replacement of the largest
//!    entry). The read buffer is cleared and the buffers swapped after every round.
//! 3. Between outer iterations (and after the last with `final_reverse`), `grnnd_reverse`
//!    copies every pool and adds the reverse edges of the `ceil(rho k)` closest (or first) entries.
//!    With `fill_fraction > 0`, the rounds of the last outer iteration also keep, per vertex,
//!    the `fill_len` closest entries pruned from its pool (a buffer of `n x fill_len` packed
//!    entries).
//! 4. `grnnd_finalize`: rows de-duplicated, sorted, cut to the output degree; a row with fewer
//!    than `fill_len` entries is filled up to `fill_len` from the vertex's pruned entries (the
//!    CPU RNN-Descent's rule: kept entries stay, the row ends ascending by distance).
//! 5. The entry point (the vertex nearest the mean), a breadth-first search from it on the
//!    device, and, when some vertices are unreachable, the host repair every search-graph
//!    builder shares, [`weft_graph::connect::repair_rows`] (the vectors are brought to the host
//!    for it only then).
//!
//! Results are valid graphs but not bit-reproducible for a seed (atomic arrival order decides
//! which of equal-capacity candidates land first).

use weft_core::{
    BuildCtx, DatasetView, Element, Error, FixedDegreeGraph, INVALID, Metric, NodeId, Result,
};
use weft_gpu::launch::{elem_bytes, need, u32_of};
use weft_gpu::{DeviceBuffer, DeviceFixedGraph, DeviceMatrix, DeviceView, GpuContext, Launch};
use weft_rnndescent::{ReverseSampling, UpdateOrder};

use super::kernels::grnnd as kernels;
use crate::GrnndParams;

/// The largest pool capacity `R` (a warp's rows fit 4 x 20 R bytes of shared memory).
pub const MAX_R: usize = 256;
/// The most vertices: ids use 31 bits (bit 31 of an entry is the NEW flag).
pub const MAX_POINTS: usize = (1 << 31) - 2;
/// A free pool slot (larger than every entry).
pub const EMPTY: u64 = u64::MAX;
/// The NEW flag of a packed entry.
pub const NEW_BIT: u64 = 0x8000_0000;

/// Warps per block of the warp-per-vertex kernels (the kernel's `WARPS`).
const WARPS: u32 = 4;
/// Threads per block and most blocks of the grid-stride kernels.
const FILL_THREADS: u32 = 256;
const FILL_BLOCKS: u64 = 4096;
/// Rows per block of `grnnd_colsum_*` (the kernel's `COLSUM_ROWS`).
const COLSUM_ROWS: u32 = 1024;

/// The order-preserving map of `f32` to `u32` the kernels use for entry keys.
pub fn ordered(f: f32) -> u32 {
    let b = f.to_bits();
    if b & 0x8000_0000 != 0 {
        !b
    } else {
        b | 0x8000_0000
    }
}

/// The inverse of [`ordered`].
pub fn from_ordered(key: u32) -> f32 {
    f32::from_bits(if key & 0x8000_0000 != 0 {
        key & 0x7fff_ffff
    } else {
        !key
    })
}

/// A packed pool entry: `ordered(dist) << 32 | new << 31 | id` (`id < 2^31 - 1`).
pub fn pack(dist: f32, new: bool, id: NodeId) -> u64 {
    (u64::from(ordered(dist + 0.0)) << 32) | if new { NEW_BIT } else { 0 } | u64::from(id)
}

/// `(distance, new, id)` of a packed entry.
pub fn unpack(e: u64) -> (f32, bool, NodeId) {
    (
        from_ordered((e >> 32) as u32),
        e & NEW_BIT != 0,
        (e as u32) & 0x7fff_ffff,
    )
}

/// The update kernel's code of a pair order (the paper's Fig. 7).
fn order_code(order: UpdateOrder) -> u32 {
    match order {
        UpdateOrder::Random => 0,
        UpdateOrder::Ascending => 1,
        UpdateOrder::Descending => 2,
    }
}

/// Checks the fields of `params` GRNND reads for `n` vertices, against the GPU limits.
fn check(params: &GrnndParams, n: usize) -> Result<()> {
    if params.r == 0 || params.r > MAX_R {
        return Err(Error::invalid_param(
            "r",
            format!(
                "the GPU pool capacity R must be in 1..={MAX_R}, got {}",
                params.r
            ),
        ));
    }
    if params.s == 0 || params.s > params.r {
        return Err(Error::invalid_param(
            "s",
            format!("S = {} must be in 1..=R (R = {})", params.s, params.r),
        ));
    }
    if params.t1 == 0 || params.t2 == 0 {
        return Err(Error::invalid_param("t1", "T1 and T2 must be at least 1"));
    }
    if params.degree == 0 || params.degree > params.r {
        return Err(Error::invalid_param(
            "degree",
            format!(
                "degree {} must be in 1..=R (R = {})",
                params.degree, params.r
            ),
        ));
    }
    if !(params.rho > 0.0 && params.rho <= 1.0) {
        return Err(Error::invalid_param(
            "rho",
            format!("must be in (0, 1], got {}", params.rho),
        ));
    }
    if !(0.0..=1.0).contains(&params.fill_fraction) {
        return Err(Error::invalid_param(
            "fill_fraction",
            format!("must be in [0, 1], got {}", params.fill_fraction),
        ));
    }
    if let Some(m) = params.max_pairs
        && (m == 0 || m > u32::MAX as usize)
    {
        return Err(Error::invalid_param(
            "max_pairs",
            format!("must be in 1..={}, got {m}", u32::MAX),
        ));
    }
    if n == 0 {
        return Err(Error::InvalidInput(
            "cannot build a graph over an empty set".into(),
        ));
    }
    if n > MAX_POINTS {
        return Err(Error::InvalidInput(format!(
            "{n} points exceed GRNND's id range ({MAX_POINTS})"
        )));
    }
    Ok(())
}

/// The update kernel's `mode` argument: bit 0 strict pruning, bit 1 new/old flags, bits 2..
/// the pair order.
fn mode(params: &GrnndParams) -> u32 {
    params.strict_prune as u32
        | (params.new_old_flags as u32) << 1
        | order_code(params.update_order) << 2
}

/// What a GRNND build did.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct GrnndStats {
    /// Update rounds run (`t1 * t2`).
    pub rounds: usize,
    /// Reverse-edge steps run.
    pub reverse_steps: usize,
    /// Pair distances evaluated by the update rounds.
    pub distance_computations: u64,
    /// Redirected (pruned) edges.
    pub redirects: u64,
    /// Entries of the final pools before the cut to the output degree.
    pub edges_before_cut: u64,
    /// Edges the finalisation added to short rows from pruned entries
    /// ([`GrnndParams::fill_fraction`]).
    pub filled_edges: u64,
    /// The entry point (the vertex nearest the mean of the data).
    pub entry_point: NodeId,
    /// Vertices unreachable from the entry point before the repair.
    pub unreachable: usize,
    /// Edges the repair needed (its local links and bridges).
    pub repair_links: usize,
    /// Vertices still unreachable after the repair (0 unless the repair was off or gave up).
    pub unreachable_after: usize,
    /// Device bytes the build allocated (the vectors included when they were uploaded).
    pub bytes: u64,
}

/// GRNND on one GPU (see the module documentation).
#[derive(Clone, Copy, Debug)]
pub struct Grnnd<'c> {
    ctx: &'c GpuContext,
    budget: Option<u64>,
}

/// Two pools of `n x r` packed entries with their reservation counters.
struct Pools {
    n: usize,
    r: usize,
    a: DeviceBuffer<u64>,
    ca: DeviceBuffer<u32>,
    b: DeviceBuffer<u64>,
    cb: DeviceBuffer<u32>,
}

impl<'c> Grnnd<'c> {
    /// GRNND on `ctx`, within the default memory budget.
    pub fn new(ctx: &'c GpuContext) -> Self {
        Grnnd { ctx, budget: None }
    }

    /// Limits device memory to `bytes` (still capped by free memory).
    pub fn with_budget(mut self, bytes: u64) -> Self {
        self.budget = Some(bytes);
        self
    }

    /// Device bytes a build of `n` points of `dim` elements of `T` needs with pool capacity `r`,
    /// output degree `degree` and rows filled up to `fill_len` entries
    /// ([`GrnndParams::fill_len`]; 0: no pruned buffer) (`vectors`: plus the uploaded vectors).
    pub fn bytes_needed<T: Element>(
        n: usize,
        dim: usize,
        r: usize,
        degree: usize,
        fill_len: usize,
        vectors: bool,
    ) -> u64 {
        let n64 = n as u64;
        let data = if vectors {
            DeviceMatrix::<T>::bytes_for(n, dim)
        } else {
            0
        };
        // Two pools and counters, the pruned buffer, the output rows and counts, levels, column
        // sums, scalars.
        data + 2 * n64 * r as u64 * 8
            + 2 * n64 * 4
            + n64 * fill_len as u64 * 8
            + n64 * degree as u64 * 4
            + 2 * n64 * 4
            + dim as u64 * 4
            + 64
    }

    /// Builds the graph of `data` (on the host) and returns it on the host, with the entry
    /// point.
    ///
    /// GRNND reads these fields of `params`: `s`, `r` (at most [`MAX_R`]), `t1`, `t2`,
    /// `degree`, `fill_fraction`, `rho`, `update_order`, `reverse_sampling`, `new_old_flags`,
    /// `strict_prune`, `max_pairs`, `final_reverse_edges` and `repair`; `build`'s seed seeds
    /// the random start and the random pair order. The CPU-only fields are ignored here (the
    /// builder, [`crate::GrnndGpu`], refuses those GRNND cannot honour).
    pub fn build<T: Element>(
        &self,
        data: DatasetView<'_, T>,
        metric: Metric,
        params: &GrnndParams,
        build: &BuildCtx,
    ) -> Result<(FixedDegreeGraph, GrnndStats)> {
        check(params, data.rows())?;
        data.check_finite()?;
        let bytes = Self::bytes_needed::<T>(
            data.rows(),
            data.dim(),
            params.r,
            params.degree,
            params.fill_len(),
            true,
        );
        self.ctx.check_fits(bytes, self.budget)?;
        let m = DeviceMatrix::upload(self.ctx, data)?;
        let (g, mut stats) = self.build_device(&m, metric, params, build)?;
        stats.bytes = bytes;
        let graph = g
            .download(self.ctx)?
            .with_entry_points(vec![stats.entry_point]);
        Ok((graph, stats))
    }

    /// Builds the graph of vectors already on the device and leaves it there (the entry point
    /// is in the stats); settings as in [`Grnnd::build`].
    pub fn build_device<T: Element>(
        &self,
        data: &DeviceMatrix<T>,
        metric: Metric,
        params: &GrnndParams,
        build: &BuildCtx,
    ) -> Result<(DeviceFixedGraph, GrnndStats)> {
        let n = data.rows();
        check(params, n)?;
        let fill_len = params.fill_len();
        let bytes =
            Self::bytes_needed::<T>(n, data.dim(), params.r, params.degree, fill_len, false);
        self.ctx.check_fits(bytes, self.budget)?;
        build.check_cancelled()?;
        let ctx = self.ctx;
        ctx.prepare_kernels(&build_kernels::<T>()?)?;
        let view = data.rows_view(0, n)?;
        let stride = u32_of(data.stride(), "stride")?;
        let mut stats = GrnndStats {
            bytes,
            ..Default::default()
        };
        let seed = build.seed();
        let mut pools = Pools::alloc(ctx, n, params.r)?;
        // Pairs evaluated, redirects, filled edges.
        let mut counters = ctx.alloc_zeros::<u64>(3)?;
        let total = (params.t1 * params.t2) as u64;
        build.progress().begin("grnnd", Some(total));
        let vectors = Vectors {
            data: &view,
            stride,
            metric,
        };
        init::<T>(ctx, &vectors, params.s, seed, &mut pools)?;
        // The pruned entries of the last outer iteration (a placeholder until then, and for
        // good without filling).
        let mut pruned = Pruned::none(ctx)?;
        let mut round = 0u32;
        for t1 in 0..params.t1 {
            if fill_len > 0 && t1 + 1 == params.t1 {
                pruned = Pruned::alloc(ctx, n, fill_len)?;
            }
            for _ in 0..params.t2 {
                build.check_cancelled()?;
                let r = UpdateRound {
                    params,
                    seed,
                    round,
                };
                update::<T>(ctx, &vectors, &r, &mut pools, &mut pruned, &mut counters)?;
                pools.clear_a_and_swap(ctx)?;
                round += 1;
                stats.rounds += 1;
                build.progress().advance(1);
            }
            if t1 + 1 != params.t1 || params.final_reverse_edges {
                build.check_cancelled()?;
                reverse(ctx, params, &mut pools)?;
                pools.clear_a_and_swap(ctx)?;
                stats.reverse_steps += 1;
            }
        }
        build.progress().end();
        build.check_cancelled()?;
        let (ids, counts) = finalize(ctx, params.degree, &pools, &pruned, &mut counters)?;
        drop(pools);
        drop(pruned);
        let c = ctx.download(&counters, 3)?;
        stats.distance_computations = c[0];
        stats.redirects = c[1];
        stats.filled_edges = c[2];
        stats.edges_before_cut = ctx.download(&counts, n)?.iter().map(|&k| k as u64).sum();
        drop(counts);
        let entry = entry_point::<T>(ctx, &view, n, data.dim(), stride)?;
        stats.entry_point = entry;
        let graph = DeviceFixedGraph::from_parts(n, params.degree, ids)?;
        let levels = reachability(ctx, &graph, entry)?;
        stats.unreachable = levels.iter().filter(|&&l| l == INVALID).count();
        stats.unreachable_after = stats.unreachable;
        if stats.unreachable == 0 || !params.repair {
            return Ok((graph, stats));
        }
        let host = graph.download(ctx)?;
        let mut ids = host.ids().to_vec();
        let vectors = data.download(ctx)?;
        let vectors = vectors.view();
        let dist = metric.distance_fn::<T>();
        let report = weft_graph::connect::repair_rows(
            &mut ids,
            params.degree,
            &[entry],
            |a, b| dist.eval(vectors.row(a as usize), vectors.row(b as usize)),
            build.cancel_token(),
        )?;
        stats.repair_links = report.local_links + report.bridges;
        stats.unreachable_after = report.unreachable_after;
        let ids = ctx.upload(&ids)?;
        Ok((DeviceFixedGraph::from_parts(n, params.degree, ids)?, stats))
    }
}

impl Pools {
    fn alloc(ctx: &GpuContext, n: usize, r: usize) -> Result<Self> {
        let len = n * r;
        let mut p = Pools {
            n,
            r,
            a: ctx.alloc_zeros(len)?,
            ca: ctx.alloc_zeros(n)?,
            b: ctx.alloc_zeros(len)?,
            cb: ctx.alloc_zeros(n)?,
        };
        fill_u64(ctx, &mut p.a, len, EMPTY)?;
        fill_u64(ctx, &mut p.b, len, EMPTY)?;
        Ok(p)
    }

    /// Empties pool A (EMPTY entries, zero counters) and swaps A and B.
    fn clear_a_and_swap(&mut self, ctx: &GpuContext) -> Result<()> {
        fill_u64(ctx, &mut self.a, self.n * self.r, EMPTY)?;
        ctx.zero(&mut self.ca.view_mut())?;
        std::mem::swap(&mut self.a, &mut self.b);
        std::mem::swap(&mut self.ca, &mut self.cb);
        Ok(())
    }
}

/// Per vertex, the closest entries the updates of the last outer iteration pruned from its pool:
/// `n x len` packed entries (flags clear, [`EMPTY`] when free, unsorted); `len` 0 is a
/// one-entry placeholder that no kernel reads.
struct Pruned {
    len: usize,
    buf: DeviceBuffer<u64>,
}

impl Pruned {
    /// The placeholder of a build without filling (the kernels take a pointer regardless).
    fn none(ctx: &GpuContext) -> Result<Self> {
        Ok(Pruned {
            len: 0,
            buf: ctx.alloc_zeros(1)?,
        })
    }

    /// An empty buffer of `len` slots for each of `n` vertices.
    fn alloc(ctx: &GpuContext, n: usize, len: usize) -> Result<Self> {
        let total = n * len;
        let mut buf = ctx.alloc_zeros(total.max(1))?;
        fill_u64(ctx, &mut buf, total, EMPTY)?;
        Ok(Pruned { len, buf })
    }
}

/// A grid-stride launch over `len` items: [`FILL_THREADS`] per block, at most [`FILL_BLOCKS`]
/// blocks.
fn grid_stride(len: u64) -> Result<Launch> {
    Ok(Launch::blocks(
        u32_of(
            len.div_ceil(FILL_THREADS as u64).clamp(1, FILL_BLOCKS) as usize,
            "blocks",
        )?,
        FILL_THREADS,
    ))
}

/// One warp per vertex, [`WARPS`] warps per block, with `shared_bytes` of dynamic shared
/// memory.
fn warp_launch(n: usize, shared_bytes: u32) -> Result<Launch> {
    Ok(
        Launch::blocks(u32_of(n.div_ceil(WARPS as usize), "blocks")?, WARPS * 32)
            .with_shared_bytes(shared_bytes),
    )
}

/// Dynamic shared memory of the pool kernels: per warp, 2 R entries and R indices.
fn pool_smem(r: usize) -> u32 {
    WARPS * r as u32 * 20
}

fn fill_u64(ctx: &GpuContext, p: &mut DeviceBuffer<u64>, len: usize, value: u64) -> Result<()> {
    need(p.len(), len as u64, "grnnd_fill_u64")?;
    if len == 0 {
        return Ok(());
    }
    let len64 = len as u64;
    // SAFETY: each pointer's length was checked above (`need`) for these sizes.
    unsafe {
        kernels::grnnd_fill_u64(
            ctx,
            grid_stride(len64)?,
            &kernels::GrnndFillU64Args {
                p: p.output(),
                len: len64,
                value,
            },
        )
    }
}

fn fill_u32(ctx: &GpuContext, p: &mut DeviceBuffer<u32>, len: usize, value: u32) -> Result<()> {
    need(p.len(), len as u64, "grnnd_fill_u32")?;
    if len == 0 {
        return Ok(());
    }
    let len64 = len as u64;
    // SAFETY: each pointer's length was checked above (`need`) for these sizes.
    unsafe {
        kernels::grnnd_fill_u32(
            ctx,
            grid_stride(len64)?,
            &kernels::GrnndFillU32Args {
                p: p.output(),
                len: len64,
                value,
            },
        )
    }
}

/// The vectors the distance kernels read: rows of `stride` elements, compared by `metric`.
struct Vectors<'a, 'b> {
    data: &'a DeviceView<'b, u8>,
    stride: u32,
    metric: Metric,
}

fn init<T: Element>(
    ctx: &GpuContext,
    v: &Vectors<'_, '_>,
    s: usize,
    seed: u64,
    p: &mut Pools,
) -> Result<()> {
    let (n, r, s) = (u32_of(p.n, "vertices")?, u32_of(p.r, "r")?, u32_of(s, "s")?);
    need(
        v.data.len(),
        elem_bytes::<T>(n, v.stride),
        "grnnd_init data",
    )?;
    need(p.a.len(), n as u64 * r as u64, "grnnd_init pool")?;
    if s > r {
        return Err(Error::Gpu(format!("internal: S {s} > R {r}")));
    }
    // SAFETY: each pointer's length was checked above (`need`) for these sizes.
    unsafe {
        kernels::grnnd_init(
            ctx,
            T::DTYPE,
            warp_launch(p.n, 0)?,
            &kernels::GrnndInitArgs {
                data: v.data.input(),
                n,
                stride: v.stride,
                metric: v.metric,
                s,
                seed,
                p: p.a.output(),
                c: p.ca.output(),
                r,
            },
        )
    }
}

/// One update round of a build: the settings it runs in, and the seed and round number that
/// together seed its random pair order (round `round` of a build seeded with `seed`).
#[derive(Clone, Copy, Debug)]
pub struct UpdateRound<'p> {
    /// The settings the round reads: strict pruning, new/old flags, the pair order and the
    /// pair cap (`max_pairs`).
    pub params: &'p GrnndParams,
    /// The build's seed.
    pub seed: u64,
    /// The round's number within the build, from 0.
    pub round: u32,
}

/// One update round from pool A into pool B; with `pruned.len > 0` the entries it prunes are
/// kept in `pruned`.
fn update<T: Element>(
    ctx: &GpuContext,
    v: &Vectors<'_, '_>,
    round: &UpdateRound<'_>,
    p: &mut Pools,
    pruned: &mut Pruned,
    counters: &mut DeviceBuffer<u64>,
) -> Result<()> {
    let (n, r) = (u32_of(p.n, "vertices")?, u32_of(p.r, "r")?);
    let fill_len = u32_of(pruned.len, "fill_len")?;
    if fill_len > r {
        return Err(Error::Gpu(format!("internal: fill_len {fill_len} > R {r}")));
    }
    need(
        pruned.buf.len(),
        n as u64 * fill_len as u64,
        "grnnd_update pruned",
    )?;
    need(
        v.data.len(),
        elem_bytes::<T>(n, v.stride),
        "grnnd_update data",
    )?;
    need(p.a.len(), n as u64 * r as u64, "grnnd_update pool A")?;
    need(p.b.len(), n as u64 * r as u64, "grnnd_update pool B")?;
    need(counters.len(), 2, "grnnd_update counters")?;
    // SAFETY: each pointer's length was checked above (`need`) for these sizes.
    unsafe {
        kernels::grnnd_update(
            ctx,
            T::DTYPE,
            warp_launch(p.n, pool_smem(p.r))?,
            &kernels::GrnndUpdateArgs {
                data: v.data.input(),
                n,
                stride: v.stride,
                metric: v.metric,
                pa: p.a.input(),
                ca: p.ca.input(),
                pb: p.b.output(),
                cb: p.cb.output(),
                r,
                mode: mode(round.params),
                max_pairs: round.params.max_pairs.unwrap_or(0) as u32,
                seed: round.seed,
                round: round.round,
                counters: counters.output(),
                pruned: pruned.buf.output(),
                fill_len,
            },
        )
    }
}

fn reverse(ctx: &GpuContext, params: &GrnndParams, p: &mut Pools) -> Result<()> {
    let (n, r) = (u32_of(p.n, "vertices")?, u32_of(p.r, "r")?);
    need(p.a.len(), n as u64 * r as u64, "grnnd_reverse pool A")?;
    need(p.b.len(), n as u64 * r as u64, "grnnd_reverse pool B")?;
    // SAFETY: each pointer's length was checked above (`need`) for these sizes.
    unsafe {
        kernels::grnnd_reverse(
            ctx,
            warp_launch(p.n, pool_smem(p.r))?,
            &kernels::GrnndReverseArgs {
                pa: p.a.input(),
                ca: p.ca.input(),
                pb: p.b.output(),
                cb: p.cb.output(),
                n,
                r,
                rho: params.rho,
                closest: (params.reverse_sampling == ReverseSampling::Closest) as u32,
            },
        )
    }
}

/// The output rows (`n * degree`) and the pool sizes (`n`) of pool A, rows shorter than
/// `pruned.len` filled from `pruned`; `counters[2]` += the edges filled in.
fn finalize(
    ctx: &GpuContext,
    degree: usize,
    p: &Pools,
    pruned: &Pruned,
    counters: &mut DeviceBuffer<u64>,
) -> Result<(DeviceBuffer<NodeId>, DeviceBuffer<u32>)> {
    let (n, r, d) = (
        u32_of(p.n, "vertices")?,
        u32_of(p.r, "r")?,
        u32_of(degree, "degree")?,
    );
    let fill_len = u32_of(pruned.len, "fill_len")?;
    if d > r {
        return Err(Error::Gpu(format!("internal: degree {d} > R {r}")));
    }
    if fill_len > d {
        return Err(Error::Gpu(format!(
            "internal: fill_len {fill_len} > degree {d}"
        )));
    }
    need(
        pruned.buf.len(),
        n as u64 * fill_len as u64,
        "grnnd_finalize pruned",
    )?;
    need(counters.len(), 3, "grnnd_finalize counters")?;
    let mut filled = counters.slice_mut(2..3);
    let mut out = ctx.alloc_zeros::<NodeId>(p.n * degree)?;
    let mut counts = ctx.alloc_zeros::<u32>(p.n)?;
    // SAFETY: each pointer's length was checked above (`need`) for these sizes.
    unsafe {
        kernels::grnnd_finalize(
            ctx,
            warp_launch(p.n, pool_smem(p.r))?,
            &kernels::GrnndFinalizeArgs {
                p: p.a.input(),
                c: p.ca.input(),
                n,
                r,
                degree: d,
                pruned: pruned.buf.input(),
                fill_len,
                out: out.output(),
                counts: counts.output(),
                filled: filled.output(),
            },
        )
    }?;
    Ok((out, counts))
}

/// The vertex nearest (squared L2) to the mean of the data, ties to the lowest id.
fn entry_point<T: Element>(
    ctx: &GpuContext,
    data: &DeviceView<'_, u8>,
    n: usize,
    dim: usize,
    stride: u32,
) -> Result<NodeId> {
    let (n32, dim32) = (u32_of(n, "vertices")?, u32_of(dim, "dim")?);
    need(data.len(), elem_bytes::<T>(n32, stride), "grnnd entry data")?;
    if dim32 > stride {
        return Err(Error::Gpu(format!("internal: dim {dim} > stride {stride}")));
    }
    let mut sums = ctx.alloc_zeros::<f32>(dim.max(1))?;
    // SAFETY: each pointer's length was checked above (`need`) for these sizes.
    unsafe {
        kernels::grnnd_colsum(
            ctx,
            T::DTYPE,
            Launch::blocks(n32.div_ceil(COLSUM_ROWS), 128),
            &kernels::GrnndColsumArgs {
                data: data.input(),
                n: n32,
                stride,
                dim: dim32,
                sums: sums.output(),
            },
        )
    }?;
    let mut best = ctx.upload(&[u64::MAX])?;
    // SAFETY: each pointer's length was checked above (`need`) for these sizes.
    unsafe {
        kernels::grnnd_nearest(
            ctx,
            T::DTYPE,
            warp_launch(n, 0)?,
            &kernels::GrnndNearestArgs {
                data: data.input(),
                n: n32,
                stride,
                dim: dim32,
                sums: sums.input(),
                best: best.output(),
            },
        )
    }?;
    let b = ctx.download(&best, 1)?[0];
    let id = b as u32;
    if id as usize >= n {
        return Err(Error::Gpu(format!("internal: entry point {id} >= n = {n}")));
    }
    Ok(id)
}

/// BFS levels of every vertex of `graph` from `entry` (`INVALID`: unreachable), on the device.
pub fn reachability(ctx: &GpuContext, graph: &DeviceFixedGraph, entry: NodeId) -> Result<Vec<u32>> {
    let n = graph.n();
    if entry as usize >= n {
        return Err(Error::InvalidInput(format!(
            "entry point {entry} out of range (n = {n})"
        )));
    }
    let (n32, d32) = (u32_of(n, "vertices")?, u32_of(graph.degree(), "degree")?);
    need(graph.ids().len(), n as u64 * d32 as u64, "grnnd_bfs graph")?;
    let mut level = ctx.alloc_zeros::<u32>(n)?;
    fill_u32(ctx, &mut level, n, INVALID)?;
    ctx.zero(&mut level.slice_mut(entry as usize..entry as usize + 1))?;
    let mut changed = ctx.alloc_zeros::<u32>(1)?;
    let edges = n as u64 * d32 as u64;
    for cur in 0..n32 {
        ctx.zero(&mut changed.view_mut())?;
        // SAFETY: each pointer's length was checked above (`need`) for these sizes.
        unsafe {
            kernels::grnnd_bfs_step(
                ctx,
                grid_stride(edges)?,
                &kernels::GrnndBfsStepArgs {
                    g: graph.ids().input(),
                    n: n32,
                    degree: d32,
                    level: level.output(),
                    cur,
                    changed: changed.output(),
                },
            )
        }?;
        if ctx.download(&changed, 1)?[0] == 0 {
            break;
        }
    }
    ctx.download(&level, n)
}

/// Host BFS: which vertices of the rows `ids` (`n x degree`) are reachable from `entries`.
pub fn reachable(ids: &[NodeId], n: usize, degree: usize, entries: &[NodeId]) -> Vec<bool> {
    let mut seen = vec![false; n];
    let mut stack: Vec<NodeId> = Vec::new();
    for &e in entries {
        if (e as usize) < n && !seen[e as usize] {
            seen[e as usize] = true;
            stack.push(e);
        }
    }
    flood(ids, n, degree, &mut seen, &mut stack);
    seen
}

fn flood(ids: &[NodeId], n: usize, degree: usize, seen: &mut [bool], stack: &mut Vec<NodeId>) {
    while let Some(u) = stack.pop() {
        for &w in &ids[u as usize * degree..(u as usize + 1) * degree] {
            if (w as usize) < n && !seen[w as usize] {
                seen[w as usize] = true;
                stack.push(w);
            }
        }
    }
}

/// Device-side pieces of GRNND run on explicit inputs, for the oracle tests
/// (`tests/grnnd_device.rs`).
pub mod testing {
    use super::*;

    /// A pool buffer brought back: `n` rows of `r` packed entries and the reservation counters.
    #[derive(Clone, Debug, PartialEq, Eq)]
    pub struct PoolRows {
        /// Rows.
        pub n: usize,
        /// Capacity per row.
        pub r: usize,
        /// `n * r` packed entries ([`EMPTY`] when free).
        pub entries: Vec<u64>,
        /// Reservation counters (the valid slots of row `v` are the first `min(counts[v], r)`).
        pub counts: Vec<u32>,
    }

    impl PoolRows {
        /// Rows holding `rows[v]` (at most `r` entries each).
        pub fn from_rows(rows: &[Vec<u64>], r: usize) -> Result<Self> {
            let n = rows.len();
            let mut entries = vec![EMPTY; n * r];
            let mut counts = vec![0u32; n];
            for (v, row) in rows.iter().enumerate() {
                if row.len() > r {
                    return Err(Error::InvalidInput(format!("row {v} exceeds R = {r}")));
                }
                entries[v * r..v * r + row.len()].copy_from_slice(row);
                counts[v] = row.len() as u32;
            }
            Ok(PoolRows {
                n,
                r,
                entries,
                counts,
            })
        }

        /// The valid entries of row `v` (EMPTY skipped), in slot order.
        pub fn row(&self, v: usize) -> Vec<u64> {
            let k = (self.counts[v] as usize).min(self.r);
            self.entries[v * self.r..v * self.r + k]
                .iter()
                .copied()
                .filter(|&e| e != EMPTY)
                .collect()
        }

        fn upload(&self, ctx: &GpuContext) -> Result<(DeviceBuffer<u64>, DeviceBuffer<u32>)> {
            Ok((ctx.upload(&self.entries)?, ctx.upload(&self.counts)?))
        }

        fn download(
            ctx: &GpuContext,
            n: usize,
            r: usize,
            p: &DeviceBuffer<u64>,
            c: &DeviceBuffer<u32>,
        ) -> Result<Self> {
            Ok(PoolRows {
                n,
                r,
                entries: ctx.download(p, n * r)?,
                counts: ctx.download(c, n)?,
            })
        }
    }

    /// Runs `grnnd_insert_test`: warp `w` inserts `entries[w]` into row `owners[w]` of `pool`
    /// (all warps at once); returns the pool afterwards.
    pub fn insert(
        ctx: &GpuContext,
        pool: &PoolRows,
        owners: &[u32],
        entries: &[u64],
    ) -> Result<PoolRows> {
        if owners.len() != entries.len() || owners.iter().any(|&o| o as usize >= pool.n) {
            return Err(Error::InvalidInput("insert: bad owners".into()));
        }
        let (mut p, mut c) = pool.upload(ctx)?;
        let m = u32_of(owners.len(), "insertions")?;
        if m > 0 {
            let o = ctx.upload(owners)?;
            let e = ctx.upload(entries)?;
            let r = u32_of(pool.r, "r")?;
            // SAFETY: `pool.upload` gives n * r entries and n counts; the owners (below n, checked
            // above) and the entries were uploaded whole, m of each.
            unsafe {
                kernels::grnnd_insert_test(
                    ctx,
                    warp_launch(owners.len(), 0)?,
                    &kernels::GrnndInsertTestArgs {
                        p: p.output(),
                        c: c.output(),
                        r,
                        owners: o.input(),
                        entries: e.input(),
                        m,
                    },
                )
            }?;
        }
        PoolRows::download(ctx, pool.n, pool.r, &p, &c)
    }

    /// Runs update round `round` (`grnnd_update_*`, in `round.params`' mode) on `pool` (rows
    /// of the vertices of `data`) into an empty pool; returns it, the pairs evaluated and the
    /// redirects. Nothing is recorded for filling.
    pub fn update_round<T: Element>(
        ctx: &GpuContext,
        data: DatasetView<'_, T>,
        metric: Metric,
        round: &UpdateRound<'_>,
        pool: &PoolRows,
    ) -> Result<(PoolRows, u64, u64)> {
        let (out, pairs, redirects, _) =
            update_round_recording(ctx, data, metric, round, pool, 0, &[])?;
        Ok((out, pairs, redirects))
    }

    /// [`update_round`] as in the last outer iteration of a build that fills rows: the entries
    /// it prunes from a vertex's row are also offered to that vertex's row of `pruned`
    /// (`n * fill_len` packed entries, [`EMPTY`] when free; `fill_len` 0: none, `pruned`
    /// empty), which is returned after the pool, the pairs and the redirects.
    pub fn update_round_recording<T: Element>(
        ctx: &GpuContext,
        data: DatasetView<'_, T>,
        metric: Metric,
        round: &UpdateRound<'_>,
        pool: &PoolRows,
        fill_len: usize,
        pruned: &[u64],
    ) -> Result<(PoolRows, u64, u64, Vec<u64>)> {
        let params = round.params;
        check(params, data.rows())?;
        if pool.n != data.rows() || pool.r != params.r {
            return Err(Error::InvalidInput(
                "update_round: inconsistent shapes".into(),
            ));
        }
        if fill_len > params.r || pruned.len() != pool.n * fill_len {
            return Err(Error::InvalidInput(format!(
                "update_round: {} pruned entries for {} rows of fill_len {fill_len} (at most \
                 R = {})",
                pruned.len(),
                pool.n,
                params.r
            )));
        }
        let mut rec = if fill_len == 0 {
            Pruned::none(ctx)?
        } else {
            Pruned {
                len: fill_len,
                buf: ctx.upload(pruned)?,
            }
        };
        let m = DeviceMatrix::upload(ctx, data)?;
        let view = m.rows_view(0, pool.n)?;
        let (a, ca) = pool.upload(ctx)?;
        let mut p = Pools::alloc(ctx, pool.n, pool.r)?;
        p.a = a;
        p.ca = ca;
        let mut counters = ctx.alloc_zeros::<u64>(2)?;
        let vectors = Vectors {
            data: &view,
            stride: m.stride() as u32,
            metric,
        };
        update::<T>(ctx, &vectors, round, &mut p, &mut rec, &mut counters)?;
        let c = ctx.download(&counters, 2)?;
        let kept = if fill_len == 0 {
            Vec::new()
        } else {
            ctx.download(&rec.buf, pool.n * fill_len)?
        };
        Ok((
            PoolRows::download(ctx, pool.n, pool.r, &p.b, &p.cb)?,
            c[0],
            c[1],
            kept,
        ))
    }

    /// Runs one reverse-edge step (`grnnd_reverse`, `params`' `rho` and `reverse_sampling`)
    /// on `pool` into an empty pool.
    pub fn reverse_step(
        ctx: &GpuContext,
        params: &GrnndParams,
        pool: &PoolRows,
    ) -> Result<PoolRows> {
        check(params, pool.n)?;
        if pool.r != params.r {
            return Err(Error::InvalidInput(
                "reverse_step: inconsistent shapes".into(),
            ));
        }
        let (a, ca) = pool.upload(ctx)?;
        let mut p = Pools::alloc(ctx, pool.n, pool.r)?;
        p.a = a;
        p.ca = ca;
        reverse(ctx, params, &mut p)?;
        PoolRows::download(ctx, pool.n, pool.r, &p.b, &p.cb)
    }

    /// Runs `grnnd_finalize` on `pool` without filling: the output rows (`n * degree`) and the
    /// pool sizes.
    pub fn finalize_rows(
        ctx: &GpuContext,
        pool: &PoolRows,
        degree: usize,
    ) -> Result<(Vec<NodeId>, Vec<u32>)> {
        let (ids, counts, _) = finalize_filled(ctx, pool, degree, 0, &[])?;
        Ok((ids, counts))
    }

    /// Runs `grnnd_finalize` on `pool`, rows shorter than `fill_len` (at most `degree`) filled
    /// from `pruned` (`n * fill_len` packed entries, [`EMPTY`] when free, any order, repeats
    /// allowed; empty when `fill_len` is 0): the output rows (`n * degree`), the pool sizes and
    /// the edges filled in.
    pub fn finalize_filled(
        ctx: &GpuContext,
        pool: &PoolRows,
        degree: usize,
        fill_len: usize,
        pruned: &[u64],
    ) -> Result<(Vec<NodeId>, Vec<u32>, u64)> {
        if degree == 0 || degree > pool.r || fill_len > degree {
            return Err(Error::InvalidInput(format!(
                "finalize: degree {degree} must be in 1..=R (R = {}), fill_len {fill_len} at \
                 most the degree",
                pool.r
            )));
        }
        if pruned.len() != pool.n * fill_len {
            return Err(Error::InvalidInput(format!(
                "finalize: {} pruned entries for {} rows of fill_len {fill_len}",
                pruned.len(),
                pool.n
            )));
        }
        let (a, ca) = pool.upload(ctx)?;
        let mut p = Pools::alloc(ctx, pool.n, pool.r)?;
        p.a = a;
        p.ca = ca;
        let rec = if fill_len == 0 {
            Pruned::none(ctx)?
        } else {
            Pruned {
                len: fill_len,
                buf: ctx.upload(pruned)?,
            }
        };
        let mut counters = ctx.alloc_zeros::<u64>(3)?;
        let (ids, counts) = finalize(ctx, degree, &p, &rec, &mut counters)?;
        Ok((
            ctx.download(&ids, pool.n * degree)?,
            ctx.download(&counts, pool.n)?,
            ctx.download(&counters, 3)?[2],
        ))
    }
}

/// The kernels a GRNND build over elements `T` launches, for compiling them together before the
/// first launch ([`GpuContext::prepare_kernels`]); a caller that also searches may prepare them
/// with its search's kernels.
pub fn build_kernels<T: Element>() -> Result<Vec<weft_gpu::Kernel>> {
    Ok(vec![
        kernels::grnnd_fill_u64_kernel(),
        kernels::grnnd_fill_u32_kernel(),
        kernels::grnnd_reverse_kernel(),
        kernels::grnnd_finalize_kernel(),
        kernels::grnnd_bfs_step_kernel(),
        kernels::grnnd_init_kernel(T::DTYPE)?,
        kernels::grnnd_update_kernel(T::DTYPE)?,
        kernels::grnnd_colsum_kernel(T::DTYPE)?,
        kernels::grnnd_nearest_kernel(T::DTYPE)?,
    ])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packing_orders_like_distance_then_id() {
        let ds = [-3.5f32, -0.0, 0.0, 1e-30, 0.5, 2.0, f32::INFINITY];
        for w in ds.windows(2) {
            assert!(pack(w[0], false, 1) <= pack(w[1], false, 1), "{w:?}");
        }
        assert!(pack(1.0, false, 3) < pack(1.0, false, 4));
        assert!(pack(f32::INFINITY, true, 0x7fff_fffe) < EMPTY);
        for &d in &ds[2..] {
            assert_eq!(unpack(pack(d, true, 17)), (d, true, 17));
        }
    }
}
