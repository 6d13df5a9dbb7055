//! Checked launches of the exact search's kernels (`kernels/exact`): each checks that every
//! pointer covers what the kernel touches for the shapes it passes (with weft-gpu's
//! [`need`], [`elem_bytes`] and [`check_stride`]), then calls the kernel's generated launcher.
//! [`exact_norms`] is public: GNND (weft-nndescent) takes the squared norms of its cosine
//! distances from it.

use weft_core::{Element, Error, Metric, Result};
use weft_gpu::launch::{check_stride, elem_bytes, need};
use weft_gpu::{DeviceView, DeviceViewMut, GpuContext, Kernel, Launch};

use super::kernels::exact;

/// Threads per block of `exact_select_f32` (the kernel's `SELECT_THREADS`).
pub(crate) const SELECT_THREADS: u32 = 256;
/// Rows per block of `exact_norms_*` (the kernel's `NORM_WARPS`).
const NORM_WARPS: u32 = 8;
/// Queries and base rows per block tile of `exact_distances_*` (the kernel's `TQ`, `TB`).
const TILE: u32 = 128;

/// The kernel [`exact_norms`] launches for `T` (for [`GpuContext::prepare_kernels`]).
pub fn exact_norms_kernel<T: Element>() -> Result<Kernel> {
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
