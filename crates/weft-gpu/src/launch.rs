//! Checked launches of weft-gpu's own kernels (exact k-NN, device-side tests), and the
//! argument checks every crate's launching code uses ([`need`], [`u32_of`], [`elem_bytes`],
//! [`check_stride`]): a launch checks that each pointer covers what the kernel touches for the
//! shapes it passes, then calls the kernel's generated launcher.

use weft_core::{Element, Error, Metric, Result};

use crate::context::GpuContext;
use crate::kernel::Launch;
use crate::kernels::{exact, testing};
use crate::memory::{DeviceView, DeviceViewMut};

/// Threads per block of `exact_select_f32` (the kernel's `SELECT_THREADS`).
pub(crate) const SELECT_THREADS: u32 = 256;
/// Rows per block of `exact_norms_*` (the kernel's `NORM_WARPS`).
const NORM_WARPS: u32 = 8;
/// Queries and base rows per block tile of `exact_distances_*` (the kernel's `TQ`, `TB`).
const TILE: u32 = 128;

/// `v` as a u32 kernel argument, or `InvalidInput` naming `what`.
pub fn u32_of(v: usize, what: &str) -> Result<u32> {
    u32::try_from(v).map_err(|_| Error::InvalidInput(format!("{what} = {v} exceeds u32")))
}

/// `InvalidInput` naming `what` unless a buffer of `len` elements holds `needed`.
pub fn need(len: usize, needed: u64, what: &str) -> Result<()> {
    if (len as u64) < needed {
        return Err(Error::InvalidInput(format!(
            "{what}: buffer of {len} elements, kernel needs {needed}"
        )));
    }
    Ok(())
}

/// Bytes of `rows` rows of `stride` elements of `T`.
pub fn elem_bytes<T: Element>(rows: u32, stride: u32) -> u64 {
    rows as u64 * stride as u64 * std::mem::size_of::<T>() as u64
}

/// `InvalidInput` unless `stride` (elements between row starts) is a positive multiple of 16.
pub fn check_stride(stride: u32) -> Result<()> {
    if stride == 0 || !stride.is_multiple_of(16) {
        return Err(Error::InvalidInput(format!(
            "row stride {stride} is not a positive multiple of 16"
        )));
    }
    Ok(())
}

/// The kernel [`exact_norms`] launches for `T` (for [`GpuContext::prepare_kernels`]).
pub fn exact_norms_kernel<T: Element>() -> Result<crate::Kernel> {
    exact::exact_norms_kernel(T::DTYPE)
}

/// `out[r] = |x_r|^2` for `rows` rows of `stride` elements of `T` (kernel `exact_norms_*`):
/// the squared norms the cosine distance divides by, for the crates whose kernels take them
/// (GNND). Checks the stride and both lengths first.
pub fn exact_norms<T: Element>(
    ctx: &GpuContext,
    x: &DeviceView<'_, u8>,
    rows: u32,
    stride: u32,
    out: &mut DeviceViewMut<'_, f32>,
) -> Result<()> {
    check_stride(stride)?;
    need(x.len(), elem_bytes::<T>(rows, stride), "exact_norms input")?;
    need(out.len(), rows as u64, "exact_norms output")?;
    if rows == 0 {
        return Ok(());
    }
    // SAFETY: each pointer's length was checked above (`need`) for these sizes.
    unsafe {
        exact::exact_norms(
            ctx,
            T::DTYPE,
            Launch::blocks(rows.div_ceil(NORM_WARPS), NORM_WARPS * 32),
            &exact::ExactNormsArgs {
                x: x.input(),
                rows,
                stride,
                out: out.output(),
            },
        )
    }
}

/// The arguments of [`exact_distances`].
pub(crate) struct DistanceTile<'a, 'b> {
    pub q: &'a DeviceView<'b, u8>,
    pub nq: u32,
    pub b: &'a DeviceView<'b, u8>,
    pub nb: u32,
    pub stride: u32,
    pub qnorm: &'a DeviceView<'b, f32>,
    pub bnorm: &'a DeviceView<'b, f32>,
    pub metric: Metric,
}

/// `out[i * ldo + j] = distance(q_i, b_j)` for `nq` x `nb` pairs.
pub(crate) fn exact_distances<T: Element>(
    ctx: &GpuContext,
    t: &DistanceTile<'_, '_>,
    out: &mut DeviceViewMut<'_, f32>,
    ldo: u32,
) -> Result<()> {
    check_stride(t.stride)?;
    need(
        t.q.len(),
        elem_bytes::<T>(t.nq, t.stride),
        "exact_distances queries",
    )?;
    need(
        t.b.len(),
        elem_bytes::<T>(t.nb, t.stride),
        "exact_distances base",
    )?;
    if t.metric != Metric::InnerProduct {
        need(t.qnorm.len(), t.nq as u64, "exact_distances query norms")?;
        need(t.bnorm.len(), t.nb as u64, "exact_distances base norms")?;
    }
    if ldo < t.nb {
        return Err(Error::InvalidInput(format!("ldo {ldo} < nb {}", t.nb)));
    }
    if t.nq == 0 || t.nb == 0 {
        return Ok(());
    }
    need(
        out.len(),
        (t.nq as u64 - 1) * ldo as u64 + t.nb as u64,
        "exact_distances output",
    )?;
    // SAFETY: each pointer's length was checked above (`need`) for these sizes.
    unsafe {
        exact::exact_distances(
            ctx,
            T::DTYPE,
            Launch::new((t.nb.div_ceil(TILE), t.nq.div_ceil(TILE), 1), 256, 0),
            &exact::ExactDistancesArgs {
                q: t.q.input(),
                nq: t.nq,
                b: t.b.input(),
                nb: t.nb,
                stride: t.stride,
                qnorm: t.qnorm.input(),
                bnorm: t.bnorm.input(),
                metric: t.metric,
                out: out.output(),
                ldo,
            },
        )
    }
}

/// The arguments of [`exact_select`].
pub(crate) struct Select {
    /// Queries (rows of the distance buffer).
    pub nq: u32,
    /// Leading dimension of the distance buffer.
    pub ldd: u32,
    /// Columns (base rows) to fold in.
    pub ncols: u32,
    /// Global id of column 0.
    pub base_offset: u32,
    /// Global index of query 0 (for `exclude_self`).
    pub query_offset: u32,
    /// Skip base id == query id.
    pub exclude_self: bool,
    /// Neighbours wanted.
    pub k: u32,
    /// List length per query (power of two >= k).
    pub list: u32,
}

/// Shared-memory slots (pairs) the select kernel uses for list length `list`.
pub(crate) fn select_slots(list: u32) -> u32 {
    (list + 8 * SELECT_THREADS).next_power_of_two()
}

/// Folds a distance buffer into the running top-`list` lists of `nq` queries.
pub(crate) fn exact_select(
    ctx: &GpuContext,
    s: &Select,
    dist: &DeviceView<'_, f32>,
    top_d: &mut DeviceViewMut<'_, f32>,
    top_i: &mut DeviceViewMut<'_, u32>,
) -> Result<()> {
    if s.k == 0 || s.k > s.list || !s.list.is_power_of_two() {
        return Err(Error::InvalidInput(format!(
            "select: k = {} and list = {} (need 1 <= k <= list, list a power of two)",
            s.k, s.list
        )));
    }
    if s.ldd < s.ncols {
        return Err(Error::InvalidInput(format!(
            "ldd {} < ncols {}",
            s.ldd, s.ncols
        )));
    }
    if s.nq == 0 || s.ncols == 0 {
        return Ok(());
    }
    need(
        dist.len(),
        (s.nq as u64 - 1) * s.ldd as u64 + s.ncols as u64,
        "select distances",
    )?;
    need(
        top_d.len(),
        s.nq as u64 * s.list as u64,
        "select list distances",
    )?;
    need(top_i.len(), s.nq as u64 * s.list as u64, "select list ids")?;
    let slots = select_slots(s.list);
    // SAFETY: each pointer's length was checked above (`need`) for these sizes.
    unsafe {
        exact::exact_select_f32(
            ctx,
            Launch::new((s.nq, 1, 1), SELECT_THREADS, slots * 8),
            &exact::ExactSelectF32Args {
                dist: dist.input(),
                ldd: s.ldd,
                ncols: s.ncols,
                base_offset: s.base_offset,
                query_offset: s.query_offset,
                exclude_self: s.exclude_self as i32,
                k: s.k,
                list: s.list,
                slots,
                top_d: top_d.output(),
                top_i: top_i.output(),
            },
        )
    }
}

/// `testing_rng_u64`: three values per index (see kernels/testing/testing.cu).
pub(crate) fn testing_rng(
    ctx: &GpuContext,
    seed: u64,
    count: usize,
    n: u64,
    out: &mut DeviceViewMut<'_, u64>,
) -> Result<()> {
    let count = u32_of(count, "count")?;
    need(out.len(), 3 * count as u64, "testing_rng output")?;
    if count == 0 {
        return Ok(());
    }
    // SAFETY: each pointer's length was checked above (`need`) for these sizes.
    unsafe {
        testing::testing_rng_u64(
            ctx,
            Launch::per_item(count, 256),
            &testing::TestingRngU64Args {
                seed,
                count,
                n,
                out: out.output(),
            },
        )
    }
}

/// `testing_affine_walk`: one thread per walk, `2 + steps` words each (see
/// kernels/testing/testing.cu).
pub(crate) fn testing_affine_walk(
    ctx: &GpuContext,
    seed: u64,
    ms: &DeviceView<'_, u32>,
    steps: u32,
    out: &mut DeviceViewMut<'_, u32>,
) -> Result<()> {
    let count = u32_of(ms.len(), "walks")?;
    need(
        out.len(),
        u64::from(count) * (2 + u64::from(steps)),
        "testing_affine_walk output",
    )?;
    if count == 0 {
        return Ok(());
    }
    // SAFETY: each pointer's length was checked above (`need`) for these sizes.
    unsafe {
        testing::testing_affine_walk(
            ctx,
            Launch::per_item(count, 256),
            &testing::TestingAffineWalkArgs {
                seed,
                ms: ms.input(),
                count,
                steps,
                out: out.output(),
            },
        )
    }
}

/// `testing_pair_distance_<dtype>`: one warp per pair of rows.
pub(crate) fn testing_pair_distance<T: Element>(
    ctx: &GpuContext,
    a_rows: &DeviceView<'_, u8>,
    b_rows: &DeviceView<'_, u8>,
    pairs: u32,
    stride: u32,
    metric: Metric,
    out: &mut DeviceViewMut<'_, f32>,
) -> Result<()> {
    check_stride(stride)?;
    need(
        a_rows.len(),
        elem_bytes::<T>(pairs, stride),
        "pair distance a",
    )?;
    need(
        b_rows.len(),
        elem_bytes::<T>(pairs, stride),
        "pair distance b",
    )?;
    need(out.len(), pairs as u64, "pair distance output")?;
    if pairs == 0 {
        return Ok(());
    }
    // SAFETY: each pointer's length was checked above (`need`) for these sizes.
    unsafe {
        testing::testing_pair_distance(
            ctx,
            T::DTYPE,
            Launch::blocks(pairs.div_ceil(4), 128),
            &testing::TestingPairDistanceArgs {
                a: a_rows.input(),
                b: b_rows.input(),
                pairs,
                stride,
                metric,
                out: out.output(),
            },
        )
    }
}

/// `testing_warp_sort_f32`: sorts runs of 32 pairs in place.
pub(crate) fn testing_warp_sort(
    ctx: &GpuContext,
    d: &mut DeviceViewMut<'_, f32>,
    id: &mut DeviceViewMut<'_, u32>,
    runs: u32,
) -> Result<()> {
    need(d.len(), runs as u64 * 32, "warp sort distances")?;
    need(id.len(), runs as u64 * 32, "warp sort ids")?;
    if runs == 0 {
        return Ok(());
    }
    // SAFETY: each pointer's length was checked above (`need`) for these sizes.
    unsafe {
        testing::testing_warp_sort_f32(
            ctx,
            Launch::blocks(runs.div_ceil(4), 128),
            &testing::TestingWarpSortF32Args {
                d: d.output(),
                id: id.output(),
                runs,
            },
        )
    }
}

/// Which set kernel of `testing.cu` a [`SetRun`] drives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SetKind {
    /// `testing_visited_set`: `2^bits` u32 slots (bits in 1..=13).
    Visited,
    /// `testing_tag_set`: `2^bits` 16-bit tag slots (bits in 1..=14).
    Tag,
}

impl SetKind {
    /// The kernel, the largest `bits` (32 KiB of shared memory) and the log2 of the bytes of
    /// one slot.
    fn spec(self) -> (&'static str, u32, u32) {
        match self {
            SetKind::Visited => ("testing_visited_set", 13, 2),
            SetKind::Tag => ("testing_tag_set", 14, 1),
        }
    }

    /// u32 words of one table of `2^bits` slots.
    pub(crate) fn table_words(self, bits: u32) -> usize {
        let (_, _, slot_log2) = self.spec();
        (1usize << bits) << slot_log2 >> 2
    }
}

/// Shapes of one `testing_visited_set` or `testing_tag_set` launch.
pub(crate) struct SetRun {
    /// The kernel.
    pub kind: SetKind,
    /// Ids per block.
    pub per_block: u32,
    /// log2 of the table's slots.
    pub bits: u32,
    /// Blocks (runs of `per_block` ids).
    pub blocks: u32,
    /// 0: concurrent inserts; 1: thread 0 inserts in order.
    pub mode: i32,
}

/// `testing_visited_set` / `testing_tag_set`: inserts runs of ids into shared-memory sets (one
/// per block); `answers` receives each insert's answer, `contains` the membership afterwards,
/// `table` each block's final words.
pub(crate) fn testing_set(
    ctx: &GpuContext,
    run: &SetRun,
    ids: &DeviceView<'_, u32>,
    answers: &mut DeviceViewMut<'_, u8>,
    contains: &mut DeviceViewMut<'_, u8>,
    table: &mut DeviceViewMut<'_, u32>,
) -> Result<()> {
    let (name, max_bits, _) = run.kind.spec();
    if run.bits == 0 || run.bits > max_bits {
        return Err(Error::InvalidInput(format!(
            "{name} of 2^{} slots: bits must be in 1..={max_bits} (32 KiB of shared memory)",
            run.bits
        )));
    }
    let n = run.per_block as u64 * run.blocks as u64;
    let words = run.kind.table_words(run.bits);
    need(ids.len(), n, "set ids")?;
    need(answers.len(), n, "set answers")?;
    need(contains.len(), n, "set membership")?;
    need(table.len(), run.blocks as u64 * words as u64, "set tables")?;
    if n == 0 {
        return Ok(());
    }
    let launch = Launch::new((run.blocks, 1, 1), 256, (words * 4) as u32);
    match run.kind {
        // SAFETY: each pointer's length was checked above (`need`) for these sizes.
        SetKind::Visited => unsafe {
            testing::testing_visited_set(
                ctx,
                launch,
                &testing::TestingVisitedSetArgs {
                    ids: ids.input(),
                    per_block: run.per_block,
                    bits: run.bits,
                    mode: run.mode,
                    is_new: answers.output(),
                    contains: contains.output(),
                    table: table.output(),
                },
            )
        },
        // SAFETY: each pointer's length was checked above (`need`) for these sizes.
        SetKind::Tag => unsafe {
            testing::testing_tag_set(
                ctx,
                launch,
                &testing::TestingTagSetArgs {
                    ids: ids.input(),
                    per_block: run.per_block,
                    bits: run.bits,
                    mode: run.mode,
                    answer: answers.output(),
                    contains: contains.output(),
                    table: table.output(),
                },
            )
        },
    }
}
