//! The GGNN query on the GPU: [`GgnnSearchGpu`] (a [`Searcher`], name `ggnn_gpu`),
//! [`GgnnSearchDevice`] (sets already on the device) and [`GgnnSearchSession`] (data and graph
//! resident). Parameters: the CPU search's [`GgnnSearchParams`] plus the GPU's own knobs
//! ([`GgnnGpuOptions`]).
//!
//! One thread block per query (this crate's `kernels/ggnn_search/`): the query in shared memory, a sorted
//! best list and a sorted bounded priority queue in shared memory, a visited hash table in
//! shared memory, distances by teams of lanes with 16-byte loads, and all the neighbours of an
//! expanded vertex scored and merged into both lists at once. The stop rule is the CPU
//! search's ([`crate::GgnnSearch`]): the queue's head is expanded while `d < d_best_k + xi`
//! with `xi = tau * min(d_best_1, max_nn1)` in real distances, **squared** for squared L2
//! (`d^2 < d_k^2 + xi^2`) and linear for inner product and cosine.
//!
//! How it differs from the CPU search (`docs/ggnn.md`, "Search on the GPU"):
//!
//! - visited cache: the CPU keeps a FIFO ring of the last `visited` expanded vertices and skips
//!   an id while it is in the ring, the best list or the queue. The GPU keeps the same ring,
//!   plus an open-addressing hash table that remembers every id scored since it was last reset;
//!   before a row could fill it beyond half, it is reset and refilled with the two lists and the
//!   ring. So the GPU never forgets an id the CPU remembers, and also skips ids the CPU would
//!   score again (those that failed the bound or fell off a list since the last reset);
//! - a row is scored as a batch: every new neighbour is compared with the bound of the state
//!   before the row (the CPU tightens the bound after each accepted neighbour), so the queue
//!   can hold a few extra entries that the bound already excludes (they are never expanded
//!   while the bound only shrinks, as it does for L2 and cosine);
//! - ties: lists are ordered by (distance, id); the CPU puts a newer entry before older equal
//!   ones.
//!
//! A filter ([`GgnnSearchParams::filter`]) keeps a third list in shared memory, the `k` best
//! allowed points scored (one bit test per scored candidate), which is the answer; the
//! traversal is the unfiltered one, and the visited table's refill keeps that list too. A
//! filter of at most [`FILTER_EXACT_PER_L`](crate::FILTER_EXACT_PER_L)` * beam_width` ids is
//! answered exactly: its ids are the entry points, all scored, and nothing is expanded.
//!
//! With lists large enough that nothing falls off and enough iterations, both searches expand
//! every vertex whose distance passes the bound and return the same ids up to distance ties
//! (the oracle test, `crates/weft-search/tests/ggnn_gpu.rs`).

use weft_core::{
    DatasetView, Element, Error, FixedDegreeGraph, GraphView, Metric, Neighbors, NeighborsMut,
    NodeId, Params, Result, SearchStats, Searcher,
};
use weft_gpu::launch::{need, u32_of};
use weft_gpu::matrix::padded_stride;
use weft_gpu::{DeviceFixedGraph, DeviceMatrix, GpuContext, Kernel, Launch};
use weft_graph::hier::HierGraph;

use super::common::{
    DeviceSearchInputs, ListChunk, SessionQueries, check_entries, check_graph_rows,
    check_host_shapes, check_out_rows, download_last_results, download_results, download_stats,
    fmt_session, grow_bytes, result_buffers, take_grown, upload_entries_zero_counters,
    upload_resident, upload_search, work_buffers,
};
use super::kernels::ggnn_search as kernels;
use crate::check::check_search_inputs;
use crate::ggnn::fallback_entry_points;
pub use crate::ggnn::{GgnnGpuOptions, GgnnSearchParams};
use crate::inputs::SearchInputs;

/// The largest graph degree (candidates per expanded vertex).
pub const MAX_DEGREE: usize = 1024;
/// Merge elements one thread holds (the kernel's `MAX_PER_THREAD`): best + queue + candidates
/// must not exceed this times the block size.
const MERGE_PER_THREAD: usize = 8;
/// Shared memory a block may use (the launch wrapper's limit).
const SMEM_LIMIT: usize = 48 * 1024;
/// The largest visited table (2^13 slots, 32 KiB).
const MAX_TABLE_BITS: u32 = 13;
/// The launch plan of one search, resolved from the parameters, the options and the shapes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GgnnSearchPlan {
    /// Best-list size (`max(best, k)`).
    pub best_cap: usize,
    /// Candidate buffer: the degree rounded up to a multiple of 32 (at least 32); entry points
    /// are scored in chunks of this size.
    pub cand_cap: usize,
    /// log2 of the visited table's slots: the smallest power of two holding twice the lists,
    /// the ring and one row.
    pub hash_bits: u32,
    /// Lanes per distance.
    pub team_size: usize,
    /// Threads per block.
    pub block_threads: usize,
    /// Dynamic shared memory per block, in bytes.
    pub shared_bytes: usize,
}

/// Every kernel a GPU GGNN search of `T` launches (any metric): `ggnn_search_<dt>`. The search
/// prepares it before its first launch ([`GpuContext::prepare_kernels`]); a caller that also
/// builds may prepare it with its build's kernels.
pub fn search_kernels<T: Element>() -> Result<Vec<Kernel>> {
    Ok(vec![kernels::ggnn_search_kernel(T::DTYPE)?])
}

/// The automatic team size for rows of `dim` elements of `elem_bytes` bytes: one lane per four
/// 16-byte loads of the padded row, a power of two between 2 and 32 (8 for 128 f32).
pub fn auto_team_size(dim: usize, elem_bytes: usize) -> usize {
    let vecs = padded_stride(dim) * elem_bytes / 16;
    vecs.div_ceil(4).next_power_of_two().clamp(2, 32)
}

/// Checks `params` and `options` for `n` points of `dim` elements of `elem_bytes` bytes, a
/// graph of `degree` and `k` results, and resolves the launch plan.
pub fn plan(
    n: usize,
    dim: usize,
    elem_bytes: usize,
    degree: usize,
    k: usize,
    params: &GgnnSearchParams,
    options: &GgnnGpuOptions,
) -> Result<GgnnSearchPlan> {
    if n == 0 {
        return Err(Error::InvalidInput("cannot search an empty set".into()));
    }
    if n >= NodeId::MAX as usize {
        return Err(Error::InvalidInput(format!(
            "{n} points: ids must stay below u32::MAX"
        )));
    }
    weft_core::error::check_k(k, n)?;
    if let Some(filter) = &params.filter {
        filter.check_len(n)?;
    }
    params.tuning.validate()?;
    if params.beam_width == 0 {
        return Err(Error::invalid_param("beam_width", "must be at least 1"));
    }
    if params.tuning.max_iterations > u32::MAX as usize {
        return Err(Error::invalid_param(
            "max_iterations",
            format!(
                "{} must be between 1 and 2^32 - 1",
                params.tuning.max_iterations
            ),
        ));
    }
    if let Some(m) = params.max_nn1
        && !(m.is_finite() && m >= 0.0)
    {
        return Err(Error::invalid_param(
            "max_nn1",
            format!("{m} is not a finite distance >= 0"),
        ));
    }
    if degree > MAX_DEGREE {
        return Err(Error::InvalidGraph(format!(
            "graph degree {degree} exceeds the GPU GGNN search's {MAX_DEGREE}"
        )));
    }
    if !matches!(options.block_threads, 0 | 32 | 64 | 128) {
        return Err(Error::invalid_param(
            "block_threads",
            format!(
                "{}: use 0 (automatic), 32, 64 or 128",
                options.block_threads
            ),
        ));
    }
    if !matches!(options.team_size, 0 | 2 | 4 | 8 | 16 | 32) {
        return Err(Error::invalid_param(
            "team_size",
            format!(
                "{} lanes per distance: use 0 (automatic), 2, 4, 8, 16 or 32",
                options.team_size
            ),
        ));
    }
    let best_cap = params.tuning.best.max(k);
    let cand_cap = degree.max(1).div_ceil(32).max(1) * 32;
    let merge = best_cap + params.beam_width + cand_cap;
    let block_threads = if options.block_threads != 0 {
        options.block_threads
    } else {
        // One warp keeps the most queries in flight; wide rows and large lists take more.
        let row_bytes = padded_stride(dim) * elem_bytes;
        let base = if row_bytes > 1024 { 64 } else { 32 };
        [base, 64, 128]
            .into_iter()
            .find(|&b| b >= base && merge <= MERGE_PER_THREAD * b)
            .unwrap_or(128)
    };
    if merge > MERGE_PER_THREAD * block_threads {
        return Err(Error::invalid_param(
            "beam_width",
            format!(
                "best {best_cap} + beam_width {} + {cand_cap} candidates exceed the {} entries a block \
                 of {block_threads} threads merges (at most {} threads per block)",
                params.beam_width,
                MERGE_PER_THREAD * block_threads,
                128
            ),
        ));
    }
    let team_size = if options.team_size == 0 {
        auto_team_size(dim, elem_bytes).min(block_threads)
    } else {
        options.team_size
    };
    if team_size > block_threads {
        return Err(Error::invalid_param(
            "team_size",
            format!("{team_size} lanes exceed the block of {block_threads} threads"),
        ));
    }
    // The table is reset before a row could fill it past half, and refilled with the lists
    // and the ring: half of it must hold those and one row. A filtered search also keeps a
    // result list of k entries.
    let res = if params.filter.is_some() { k } else { 0 };
    let keep = best_cap + params.beam_width + params.tuning.visited + cand_cap + res;
    let hash_bits = (2 * keep).next_power_of_two().trailing_zeros().max(6);
    if hash_bits > MAX_TABLE_BITS {
        return Err(Error::invalid_param(
            "visited",
            format!(
                "best {best_cap} + beam_width {} + visited {} + {cand_cap} candidates need a visited \
                 table of 2^{hash_bits} slots; the GPU search holds at most 2^{MAX_TABLE_BITS}",
                params.beam_width, params.tuning.visited
            ),
        ));
    }
    let stride = padded_stride(dim);
    let words = stride
        + 2 * best_cap
        + 2 * params.beam_width
        + 3 * cand_cap
        + params.tuning.visited
        + (1 << hash_bits)
        + 4 * res;
    let shared_bytes = words * 4;
    if shared_bytes > SMEM_LIMIT {
        return Err(Error::invalid_param(
            "visited",
            format!(
                "dimension {dim} with best {best_cap}, beam_width {}, visited {} and {cand_cap} \
                 candidates needs {shared_bytes} bytes of shared memory per block (limit \
                 {SMEM_LIMIT})",
                params.beam_width, params.tuning.visited
            ),
        ));
    }
    Ok(GgnnSearchPlan {
        best_cap,
        cand_cap,
        hash_bits,
        team_size,
        block_threads,
        shared_bytes,
    })
}

work_buffers! {
    /// Device work buffers of [`GgnnSearchDevice::search_device_with`], kept across searches:
    /// they grow to the largest call seen and are freed when dropped. Buffers made on one
    /// [`GpuContext`] and handed to a search on another are dropped and made again there.
    pub struct GgnnSearchBuffers {
        out_ids: u32,
        out_d: f32,
        entries: u32,
        filter: u32,
        counters: u64,
    }
}

/// The GGNN query on one GPU (see the module documentation).
#[derive(Clone, Copy, Debug)]
pub struct GgnnSearchDevice<'c> {
    ctx: &'c GpuContext,
    budget: Option<u64>,
}

impl<'c> GgnnSearchDevice<'c> {
    /// The search on `ctx`, within the default memory budget.
    pub fn new(ctx: &'c GpuContext) -> Self {
        GgnnSearchDevice { ctx, budget: None }
    }

    /// Limits device memory to `bytes` (still capped by free memory).
    pub fn with_budget(mut self, bytes: u64) -> Self {
        self.budget = Some(bytes);
        self
    }

    /// Searches host data through a host graph of fixed degree (layer 0 of a GGNN hierarchy,
    /// say), starting every query from `entries` (the hierarchy's entry points; when empty,
    /// from 32 random points per query drawn as the CPU search draws them); `k` results per
    /// query. Data, graph and queries are uploaded for this call after checking that they fit.
    pub fn search<T: Element>(
        &self,
        inputs: SearchInputs<'_, FixedDegreeGraph, T>,
        entries: &[NodeId],
        metric: Metric,
        k: usize,
        params: &GgnnSearchParams,
        options: &GgnnGpuOptions,
    ) -> Result<(Neighbors, SearchStats)> {
        let mut out = result_buffers(inputs.queries.rows(), k)?;
        let stats = self.search_into(inputs, entries, metric, params, options, out.as_mut())?;
        Ok((out, stats))
    }

    /// [`GgnnSearchDevice::search`] into the caller's buffers (`out.k()` results for each of
    /// the `out.rows()` queries).
    pub fn search_into<T: Element>(
        &self,
        inputs: SearchInputs<'_, FixedDegreeGraph, T>,
        entries: &[NodeId],
        metric: Metric,
        params: &GgnnSearchParams,
        options: &GgnnGpuOptions,
        out: NeighborsMut<'_>,
    ) -> Result<SearchStats> {
        let SearchInputs {
            graph,
            data,
            queries,
        } = inputs;
        check_host_shapes(data, graph, queries)?;
        check_out_rows(&out, queries.rows())?;
        let k = out.k();
        plan(
            data.rows(),
            data.dim(),
            std::mem::size_of::<T>(),
            graph.degree(),
            k,
            params,
            options,
        )?;
        check_entries(entries, data.rows())?;
        if queries.rows() == 0 {
            return Ok(SearchStats::default());
        }
        let results = queries.rows() as u64 * k as u64 * 8;
        let (d, q, g) = upload_search(self.ctx, data, graph, queries, results, self.budget)?;
        let mut bufs = GgnnSearchBuffers::new();
        let inputs = DeviceSearchInputs {
            data: &d,
            graph: &g,
            entries,
            queries: &q,
        };
        self.search_device_with(&mut bufs, inputs, metric, params, options, out)
    }

    /// Searches data already on the device through a device graph for `k` results per query;
    /// the results come back to the host. Allocates its work buffers for this call only;
    /// repeated searches should keep a [`GgnnSearchBuffers`] and call
    /// [`GgnnSearchDevice::search_device_with`].
    pub fn search_device<T: Element>(
        &self,
        inputs: DeviceSearchInputs<'_, T>,
        metric: Metric,
        k: usize,
        params: &GgnnSearchParams,
        options: &GgnnGpuOptions,
    ) -> Result<(Neighbors, SearchStats)> {
        let mut bufs = GgnnSearchBuffers::new();
        let mut out = result_buffers(inputs.queries.rows(), k)?;
        let stats =
            self.search_device_with(&mut bufs, inputs, metric, params, options, out.as_mut())?;
        Ok((out, stats))
    }

    /// [`GgnnSearchDevice::search_device`] into the caller's buffers (`out.k()` results for
    /// each query), with the work buffers (results, entry points, counters) kept in `bufs`
    /// across calls: they grow when a call needs more (checked against the budget first) and
    /// are never shrunk.
    pub fn search_device_with<T: Element>(
        &self,
        bufs: &mut GgnnSearchBuffers,
        inputs: DeviceSearchInputs<'_, T>,
        metric: Metric,
        params: &GgnnSearchParams,
        options: &GgnnGpuOptions,
        mut out: NeighborsMut<'_>,
    ) -> Result<SearchStats> {
        let DeviceSearchInputs {
            data,
            graph,
            entries,
            queries,
        } = inputs;
        let ctx = self.ctx;
        ctx.prepare_kernels(&search_kernels::<T>()?)?;
        let n = data.rows();
        inputs.check_shapes()?;
        check_out_rows(&out, queries.rows())?;
        let k = out.k();
        let p = plan(
            n,
            data.dim(),
            std::mem::size_of::<T>(),
            graph.degree(),
            k,
            params,
            options,
        )?;
        check_entries(entries, n)?;
        let nq = queries.rows();
        if nq == 0 {
            return Ok(SearchStats::default());
        }
        // A small filter is answered exactly, as on the CPU: its allowed ids are the entry
        // points, which the kernel scores (and offers to the result list) before it expands
        // anything, and nothing is expanded (an empty filter gives padding only).
        let allowed: Option<Vec<NodeId>> = params.small_filter().map(|f| f.ids().collect());
        let entries: &[NodeId] = allowed.as_deref().unwrap_or(entries);
        let chunk = nq.min(1 << 20);
        let filter = params.filter.as_ref();
        let filter_words = filter.map_or(0, |f| f.words().len());
        bufs.adopt(ctx);
        let grow = grow_bytes::<u32>(&bufs.out_ids, chunk * k)
            + grow_bytes::<f32>(&bufs.out_d, chunk * k)
            + grow_bytes::<u32>(&bufs.entries, entries.len())
            + grow_bytes::<u32>(&bufs.filter, filter_words)
            + grow_bytes::<u64>(&bufs.counters, 2);
        ctx.check_fits(grow, self.budget)?;
        let allocs = &mut bufs.allocations;
        let mut out_ids = take_grown(ctx, &mut bufs.out_ids, chunk * k, allocs)?;
        let mut out_d = take_grown(ctx, &mut bufs.out_d, chunk * k, allocs)?;
        let before = *allocs;
        let mut entry_buf = take_grown(ctx, &mut bufs.entries, entries.len(), allocs)?;
        let fresh_entries = *allocs != before;
        let mut filter_buf = take_grown(ctx, &mut bufs.filter, filter_words, allocs)?;
        let mut counters = take_grown(ctx, &mut bufs.counters, 2, allocs)?;
        let result = (|| -> Result<SearchStats> {
            if let Some(f) = filter {
                ctx.copy_to_device(f.words(), &mut filter_buf.slice_mut(0..filter_words))?;
            }
            upload_entries_zero_counters(
                ctx,
                entries,
                &mut entry_buf,
                fresh_entries,
                &mut bufs.entries_held,
                &mut counters,
            )?;
            let stride = u32_of(data.stride(), "row stride")?;
            let n32 = u32_of(n, "points")?;
            let degree = u32_of(graph.degree(), "degree")?;
            need(graph.ids().len(), n as u64 * degree as u64, "graph ids")?;
            let best_cap = u32_of(p.best_cap, "best")?;
            let beam_width = u32_of(params.beam_width, "beam_width")?;
            let ring = u32_of(params.tuning.visited, "visited")?;
            let max_iter = if allowed.is_some() {
                0
            } else {
                u32_of(params.tuning.max_iterations, "max_iterations")?
            };
            let guard = params.max_nn1.unwrap_or(f32::INFINITY);
            let team = p.team_size as u32;
            let n_entries = u32_of(entries.len(), "entry points")?;
            let cand_cap = p.cand_cap as u32;
            let k32 = u32_of(k, "k")?;
            let prefetch = u32::from(options.prefetch_rows);
            let mut start = 0usize;
            while start < nq {
                let cnt = chunk.min(nq - start);
                let cnt32 = cnt as u32;
                let q_base = u32_of(start, "query index")?;
                let qv = queries.rows_view(start, start + cnt)?;
                let dv = data.rows_view(0, n)?;
                need(
                    out_ids.len().min(out_d.len()),
                    cnt as u64 * k as u64,
                    "search results",
                )?;
                // SAFETY: each pointer's length was checked above (`need`) for these sizes.
                unsafe {
                    kernels::ggnn_search(
                        ctx,
                        T::DTYPE,
                        Launch::new((cnt32, 1, 1), p.block_threads as u32, p.shared_bytes as u32),
                        &kernels::GgnnSearchArgs {
                            data: dv.input(),
                            n: n32,
                            stride,
                            graph: graph.ids().input(),
                            degree,
                            queries: qv.input(),
                            nq: cnt32,
                            q_base,
                            metric,
                            best_cap,
                            beam_width,
                            ring_cap: ring,
                            max_iter,
                            tau: params.tuning.tau,
                            guard,
                            team,
                            seed: params.seed,
                            entries: entry_buf.input(),
                            n_entries,
                            filter: filter_buf.input(),
                            has_filter: u32::from(filter.is_some()),
                            cand_cap,
                            hash_bits: p.hash_bits,
                            k: k32,
                            prefetch,
                            out_ids: out_ids.output(),
                            out_d: out_d.output(),
                            counters: counters.output(),
                        },
                    )
                }?;
                if start + cnt == nq {
                    // The last batch: its results and the counters in one round trip.
                    let chunk = ListChunk {
                        ids: &out_ids,
                        dists: &out_d,
                        start,
                        cnt,
                        counters: &counters,
                        last: true,
                    };
                    return download_last_results(ctx, &chunk, &mut out, nq);
                }
                download_results(ctx, &out_ids, &out_d, &mut out, start, cnt)?;
                start += cnt;
            }
            download_stats(ctx, &counters, nq)
        })();
        bufs.out_ids = Some(out_ids);
        bufs.out_d = Some(out_d);
        bufs.entries = Some(entry_buf);
        bufs.filter = Some(filter_buf);
        bufs.counters = Some(counters);
        result
    }
}

/// A resident GGNN search: the context, the data, the base-layer graph and its entry points on
/// the device, and the work and query buffers, kept across searches (what `weft::Index` holds
/// between GGNN GPU searches of a hierarchical graph). Only the queries travel per call.
pub struct GgnnSearchSession<T: Element> {
    ctx: GpuContext,
    data: DeviceMatrix<T>,
    graph: DeviceFixedGraph,
    entries: Vec<NodeId>,
    queries: Option<DeviceMatrix<T>>,
    bufs: GgnnSearchBuffers,
}

impl<T: Element> std::fmt::Debug for GgnnSearchSession<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        fmt_session(
            f,
            "GgnnSearchSession",
            &self.data,
            &self.graph,
            &self.entries,
            &self.queries,
            &self.bufs,
        )
    }
}

impl<T: Element> GgnnSearchSession<T> {
    /// Uploads `data` and `graph` (a hierarchy's base layer, say) to `ctx` after checking that
    /// they fit; `entries` (checked against the rows) start every query.
    pub fn new(
        ctx: GpuContext,
        data: DatasetView<'_, T>,
        graph: &FixedDegreeGraph,
        entries: &[NodeId],
    ) -> Result<Self> {
        check_graph_rows(graph.n(), data.rows())?;
        check_entries(entries, data.rows())?;
        let (d, g) = upload_resident(&ctx, data, graph, None)?;
        Ok(GgnnSearchSession {
            ctx,
            data: d,
            graph: g,
            entries: entries.to_vec(),
            queries: None,
            bufs: GgnnSearchBuffers::new(),
        })
    }

    /// The session's context.
    pub fn context(&self) -> &GpuContext {
        &self.ctx
    }

    /// The work buffers (their size and allocation count).
    pub fn buffers(&self) -> &GgnnSearchBuffers {
        &self.bufs
    }

    /// Searches host queries for `k` results each (see [`GgnnSearchSession::search_into`]).
    pub fn search(
        &mut self,
        queries: DatasetView<'_, T>,
        metric: Metric,
        k: usize,
        params: &GgnnSearchParams,
        options: &GgnnGpuOptions,
    ) -> Result<(Neighbors, SearchStats)> {
        let mut out = result_buffers(queries.rows(), k)?;
        let stats = self.search_into(queries, metric, params, options, out.as_mut())?;
        Ok((out, stats))
    }

    /// Searches host queries into the caller's buffers (`out.k()` results for each of the
    /// `out.rows()` queries): they are copied into the session's query buffer (grown when the
    /// batch is larger than any before), then as [`GgnnSearchDevice::search_device_with`]; the
    /// results are copied from the device straight into `out`.
    pub fn search_into(
        &mut self,
        queries: DatasetView<'_, T>,
        metric: Metric,
        params: &GgnnSearchParams,
        options: &GgnnGpuOptions,
        out: NeighborsMut<'_>,
    ) -> Result<SearchStats> {
        let (data, graph, entries) = (&self.data, &self.graph, &self.entries);
        let dev = GgnnSearchDevice::new(&self.ctx);
        let (dim, budget) = (data.dim(), None);
        let staged = SessionQueries::new(&self.ctx, budget, dim, &mut self.queries, &mut self.bufs);
        staged.search(
            queries,
            out,
            |k| {
                let elem = std::mem::size_of::<T>();
                plan(
                    data.rows(),
                    data.dim(),
                    elem,
                    graph.degree(),
                    k,
                    params,
                    options,
                )
                .map(drop)
            },
            |bufs, q, out| {
                let inputs = DeviceSearchInputs {
                    data,
                    graph,
                    entries,
                    queries: q,
                };
                dev.search_device_with(bufs, inputs, metric, params, options, out)
            },
        )
    }
}

/// The GGNN query on a GPU (name `ggnn_gpu`): one thread block per query, the CPU search's
/// parameters ([`GgnnSearchParams`]) and stop rule (squared slack for L2, linear for inner
/// product and cosine), over a `HierGraph` (its layer 0 entered from the hierarchy's entry
/// points) or a [`FixedDegreeGraph`] (its entry points; without any, the same entry points as
/// [`crate::GgnnSearch`]: [`GgnnSearchParams::entry_points`] points spread over the data,
/// picked on the host once per call, or with `entry_points = 0` 32 random points per query
/// drawn as the CPU draws them). The data, graph and queries are uploaded for each call;
/// [`GgnnSearchDevice::search_device_with`] searches sets already on the device with reused
/// buffers, and [`GgnnSearchSession`] keeps them there.
///
/// GPU-only knobs: threads per block (32, 64 or 128) and lanes per distance (2 to 32), each 0
/// for automatic; invalid values give [`Error::InvalidParams`] at search time.
#[derive(Clone, Copy, Debug)]
pub struct GgnnSearchGpu<'c> {
    ctx: &'c GpuContext,
    options: GgnnGpuOptions,
}

impl<'c> GgnnSearchGpu<'c> {
    /// The search on `ctx`, with automatic block and team sizes.
    pub fn new(ctx: &'c GpuContext) -> Self {
        GgnnSearchGpu {
            ctx,
            options: GgnnGpuOptions::default(),
        }
    }

    /// Threads per query block: 32, 64 or 128 (0: automatic).
    pub fn with_block_threads(mut self, threads: usize) -> Self {
        self.options.block_threads = threads;
        self
    }

    /// Lanes per distance: 2, 4, 8, 16 or 32 (0: automatic).
    pub fn with_team_size(mut self, lanes: usize) -> Self {
        self.options.team_size = lanes;
        self
    }

    /// The GPU knobs this searcher passes with the parameters.
    pub fn options(&self) -> GgnnGpuOptions {
        self.options
    }
}

/// A graph the GPU GGNN search walks: its base layer of fixed degree (searched on the device)
/// and the entry points every query starts from.
pub trait GgnnGpuGraph: GraphView {
    /// The graph of fixed degree the search expands.
    fn base_layer(&self) -> &FixedDegreeGraph;
    /// The entry points (empty: the fallback of [`GgnnSearchParams::entry_points`]).
    fn search_entry_points(&self) -> &[NodeId];
}

impl GgnnGpuGraph for HierGraph {
    /// Layer 0 of the hierarchy.
    fn base_layer(&self) -> &FixedDegreeGraph {
        self.base()
    }
    /// The hierarchy's entry points.
    fn search_entry_points(&self) -> &[NodeId] {
        self.entry_points()
    }
}

impl GgnnGpuGraph for FixedDegreeGraph {
    /// The graph itself.
    fn base_layer(&self) -> &FixedDegreeGraph {
        self
    }
    /// The graph's own entry points.
    fn search_entry_points(&self) -> &[NodeId] {
        self.entry_points()
    }
}

impl<G: GgnnGpuGraph> Searcher<G> for GgnnSearchGpu<'_> {
    type Params = GgnnSearchParams;

    fn name(&self) -> &'static str {
        "ggnn_gpu"
    }

    fn search<T: Element>(
        &self,
        graph: &G,
        data: DatasetView<'_, T>,
        queries: DatasetView<'_, T>,
        metric: Metric,
        params: &GgnnSearchParams,
        out: NeighborsMut<'_>,
    ) -> Result<SearchStats> {
        check_search_inputs(graph, data, queries, &out, |n, dim| params.validate(n, dim))?;
        data.check_finite()?;
        queries.check_finite()?;
        let base = graph.base_layer();
        if base.n() != data.rows() {
            return Err(Error::dim_mismatch(
                "graph vertices vs data rows",
                data.rows(),
                base.n(),
            ));
        }
        let entries = graph.search_entry_points();
        let spread = if entries.is_empty() {
            fallback_entry_points(data, metric, params)?
        } else {
            None
        };
        let entries = spread.as_deref().unwrap_or(entries);
        let inputs = SearchInputs {
            graph: base,
            data,
            queries,
        };
        GgnnSearchDevice::new(self.ctx).search_into(
            inputs,
            entries,
            metric,
            params,
            &self.options,
            out,
        )
    }
}
