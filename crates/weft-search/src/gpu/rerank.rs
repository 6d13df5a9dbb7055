//! The f16 traversal of the GPU CAGRA search
//! ([`SearchPrecision::F16`](crate::SearchPrecision::F16)), with the kernels of this crate's `kernels/search_rerank/`:
//!
//! 1. the `f32` data is copied once into an `f16` matrix of the same padded layout
//!    ([`half_copy`], kernel `search_rerank_to_f16`: round to nearest even, bit for bit
//!    `half::f16::from_f32`), and each batch of queries likewise;
//! 2. the CAGRA search runs on the f16 copies (half the bytes per distance; distances still
//!    accumulate in `f32`) and leaves each query's first `m` list entries on the device
//!    (`m` = [`CagraSearchParams::rerank_len`](crate::CagraSearchParams::rerank_len): the whole list by default);
//! 3. the rerank ([`rerank_lists`], kernel `search_rerank_f32`) scores those `m` ids with exact
//!    `f32` distances against the original rows, sorts them by (distance, id) and keeps the `k`
//!    best distinct ones; only those come back to the host.
//!
//! So the distances returned are exact `f32` distances and the ids among the reranked
//! candidates are in exact order; only which candidates reach the list depends on f16. With a
//! filter, the search's list already holds allowed ids only, so the rerank keeps the filter.
//!
//! Overflow: f16 holds magnitudes up to 65504; a value with `|x| >=` [`F16_OVERFLOW`] would
//! become infinite. The conversion counts such values and the search fails with
//! `InvalidParams` on `traversal` (the data is checked when its copy is made; a batch of
//! queries after its search, before anything is returned). No scaling is applied: the data
//! and queries are traversed as they are.

use half::f16;
use weft_core::{DType, Element, Error, Metric, Result};
use weft_gpu::launch::{need, u32_of};
use weft_gpu::{DeviceBuffer, DeviceMatrix, DeviceView, DeviceViewMut, GpuContext, Launch};

use super::kernels::search_rerank as kernels;
use crate::cagra_gpu_params::F16_OVERFLOW;

/// Threads per block of `search_rerank_f32` (the kernel's launch bound).
const RERANK_THREADS: u32 = 128;
/// Threads per block of `search_rerank_to_f16`.
const CONVERT_THREADS: u32 = 256;
/// Blocks of `search_rerank_to_f16` at most (a grid-stride loop covers the rest).
const CONVERT_BLOCKS_MAX: u64 = 8192;

/// The state of the f16 traversal of one set of data: its f16 copy (made on first use and
/// kept), the f16 query buffer and the rerank's buffers (grown, never shrunk). A
/// [`super::cagra::CagraSearchSession`] keeps one; a one-shot search makes one per call.
/// Buffers made on one stream are dropped when used on another.
#[derive(Default)]
pub struct HalfTraversal {
    /// The stream the buffers belong to (its address; 0 before the first search).
    owner: usize,
    pub(super) data: Option<DeviceMatrix<f16>>,
    pub(super) queries: Option<DeviceMatrix<f16>>,
    pub(super) out_ids: Option<DeviceBuffer<u32>>,
    pub(super) out_d: Option<DeviceBuffer<f32>>,
    pub(super) overflow: Option<DeviceBuffer<u64>>,
    pub(super) allocations: u64,
}

impl std::fmt::Debug for HalfTraversal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HalfTraversal")
            .field("bytes", &self.bytes())
            .field("allocations", &self.allocations)
            .finish()
    }
}

impl HalfTraversal {
    /// Nothing allocated until the first search.
    pub fn new() -> Self {
        Self::default()
    }

    /// Device bytes held now (the f16 copy of the data included).
    pub fn bytes(&self) -> u64 {
        let m = |x: &Option<DeviceMatrix<f16>>| {
            x.as_ref()
                .map_or(0, |m| DeviceMatrix::<f16>::bytes_for(m.capacity(), m.dim()))
        };
        m(&self.data)
            + m(&self.queries)
            + super::common::slot_bytes(&self.out_ids)
            + super::common::slot_bytes(&self.out_d)
            + super::common::slot_bytes(&self.overflow)
    }

    /// Device allocations made so far (the f16 copy of the data is one; a steady state
    /// makes none).
    pub fn allocations(&self) -> u64 {
        self.allocations
    }

    /// Whether the f16 copy of the data has been made.
    pub fn has_data_copy(&self) -> bool {
        self.data.is_some()
    }

    /// Drops buffers of another context's stream.
    pub(super) fn adopt(&mut self, ctx: &GpuContext) {
        let owner = ctx.stream_id();
        if self.owner != owner {
            let allocations = self.allocations;
            *self = HalfTraversal {
                owner,
                allocations,
                ..Default::default()
            };
        }
    }
}

/// `InvalidParams` on `traversal` unless the data is `f32`.
pub(super) fn check_f32<T: Element>() -> Result<()> {
    if T::DTYPE != DType::F32 {
        return Err(Error::invalid_param(
            "traversal",
            format!(
                "the f16 traversal reranks f32 data; this data is {:?} (use exact)",
                T::DTYPE
            ),
        ));
    }
    Ok(())
}

/// The overflow error of `count` values in `what`.
pub(super) fn overflow_error(count: u64, what: &str) -> Error {
    Error::invalid_param(
        "traversal",
        format!(
            "{count} values of the {what} have a magnitude of at least {F16_OVERFLOW}, which \
             overflows f16 (largest finite 65504); search these data with exact traversal or \
             scale them"
        ),
    )
}

/// Launches the conversion of the first `rows` rows of `src` (f32, `stride` elements apart)
/// into `dst` (f16, the same stride), adding the count of overflowing values to `overflow[0]`.
pub(super) fn convert_rows(
    ctx: &GpuContext,
    src: &DeviceView<'_, u8>,
    rows: usize,
    stride: usize,
    dst: &mut DeviceViewMut<'_, u8>,
    overflow: &mut DeviceBuffer<u64>,
) -> Result<()> {
    let elems = rows as u64 * stride as u64;
    if elems == 0 {
        return Ok(());
    }
    if !stride.is_multiple_of(16) {
        return Err(Error::InvalidInput(format!(
            "row stride {stride} is not a multiple of 16"
        )));
    }
    need(src.len(), elems * 4, "f16 conversion input")?;
    need(dst.len(), elems * 2, "f16 conversion output")?;
    need(overflow.len(), 1, "f16 conversion overflow counter")?;
    let blocks = (elems / 8)
        .div_ceil(CONVERT_THREADS as u64)
        .min(CONVERT_BLOCKS_MAX) as u32;
    // SAFETY: each pointer's length was checked above (`need`) for these sizes.
    unsafe {
        kernels::search_rerank_to_f16(
            ctx,
            Launch::blocks(blocks.max(1), CONVERT_THREADS),
            &kernels::SearchRerankToF16Args {
                src: src.input(),
                elems,
                dst: dst.output(),
                overflow: overflow.output(),
            },
        )
    }
}

/// The f16 copy of `data` (f32; any other type is `InvalidParams` on `traversal`) in the same
/// padded layout, within `budget` bytes (`None`: free memory). `InvalidParams` on `traversal`
/// when a value overflows f16 (`|x| >=` [`F16_OVERFLOW`]). Waits for the conversion.
pub fn half_copy<T: Element>(
    ctx: &GpuContext,
    data: &DeviceMatrix<T>,
    budget: Option<u64>,
) -> Result<DeviceMatrix<f16>> {
    check_f32::<T>()?;
    let (rows, dim) = (data.rows(), data.dim());
    ctx.check_fits(DeviceMatrix::<f16>::bytes_for(rows, dim) + 8, budget)?;
    let mut out = DeviceMatrix::<f16>::with_capacity(ctx, rows, dim)?;
    out.set_rows(rows)?;
    let mut overflow = ctx.alloc_zeros::<u64>(1)?;
    let src = data.rows_view(0, rows)?;
    let mut dst = out.rows_view_mut(0, rows)?;
    convert_rows(ctx, &src, rows, data.stride(), &mut dst, &mut overflow)?;
    let count = ctx.download(&overflow, 1)?[0];
    if count > 0 {
        return Err(overflow_error(count, "data"));
    }
    Ok(out)
}

/// The queries whose candidate lists [`rerank_lists`] scores: `nq` queries (f32 rows of the
/// data's stride) and their `m` listed ids each.
#[derive(Debug)]
pub struct CandidateLists<'a> {
    /// The queries' rows.
    pub queries: DeviceView<'a, u8>,
    /// Queries.
    pub nq: usize,
    /// The listed ids, `[query][m]`.
    pub cand: DeviceView<'a, u32>,
    /// Ids listed per query.
    pub m: usize,
}

/// The `k` best of each query's `m` listed ids by exact distance (kernel `search_rerank_f32`):
/// `lists.cand` holds `[query][m]` ids for the `nq` queries of `lists.queries` (f32 rows, the
/// stride of `data`); ids of `data.rows()` or more (INVALID included) take no part, duplicates
/// are returned once. Writes `[query][k]` pairs sorted by (distance, id) to `out_ids` /
/// `out_d`, padded with `(INVALID, +inf)` where fewer than `k` distinct valid ids were listed.
pub fn rerank_lists<T: Element>(
    ctx: &GpuContext,
    data: &DeviceMatrix<T>,
    lists: &CandidateLists<'_>,
    metric: Metric,
    k: usize,
    out_ids: &mut DeviceViewMut<'_, u32>,
    out_d: &mut DeviceViewMut<'_, f32>,
) -> Result<()> {
    let CandidateLists {
        ref queries,
        nq,
        ref cand,
        m,
    } = *lists;
    check_f32::<T>()?;
    if m == 0 || m > crate::CAGRA_GPU_MAX_BEAM_WIDTH {
        return Err(Error::invalid_param(
            "rerank",
            format!(
                "{m} entries per query: must be between 1 and {}",
                crate::CAGRA_GPU_MAX_BEAM_WIDTH
            ),
        ));
    }
    if k == 0 || k > m {
        return Err(Error::invalid_param(
            "k",
            format!("k = {k} must be between 1 and the {m} reranked entries"),
        ));
    }
    if nq == 0 {
        return Ok(());
    }
    let stride = data.stride();
    need(
        queries.len(),
        nq as u64 * stride as u64 * 4,
        "rerank queries",
    )?;
    need(cand.len(), nq as u64 * m as u64, "rerank candidates")?;
    need(
        out_ids.len().min(out_d.len()),
        nq as u64 * k as u64,
        "rerank results",
    )?;
    let slots = m.next_power_of_two() as u32;
    let n = u32_of(data.rows(), "points")?;
    let dv = data.rows_view(0, data.rows())?;
    // SAFETY: each pointer's length was checked above (`need`) for these sizes.
    unsafe {
        kernels::search_rerank_f32(
            ctx,
            Launch::new((u32_of(nq, "queries")?, 1, 1), RERANK_THREADS, slots * 8),
            &kernels::SearchRerankF32Args {
                data: dv.input(),
                n,
                stride: u32_of(stride, "row stride")?,
                queries: queries.input(),
                nq: nq as u32,
                cand: cand.input(),
                m: m as u32,
                slots,
                metric,
                k: k as u32,
                out_ids: out_ids.output(),
                out_d: out_d.output(),
            },
        )
    }
}
