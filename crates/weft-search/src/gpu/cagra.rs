//! CAGRA-style graph search on the GPU: [`CagraSearchDevice`].
//!
//! It searches a graph of fixed out-degree ([`FixedDegreeGraph`] on the host or
//! [`DeviceFixedGraph`] on the device, e.g. from weft-cagra's GPU optimiser) with the kernels
//! of this crate's `kernels/cagra_search/`: per query an internal top-`beam_width` list sorted by distance, a candidate
//! buffer of `search_width * degree` entries, parent selection of the first `search_width`
//! entries not yet expanded, distances by teams of threads with 16-byte loads, a bitonic sort of
//! the candidates and a merge into the list, a visited hash table (in shared memory and cleared
//! when half full, or in global memory). Every query starts from all the graph's entry points
//! (the first block of each query scores them, in batches of the candidate buffer's size, before
//! its first expansion; these batches do not count as iterations) and seeded random points. Two
//! modes:
//!
//! - **single-CTA**: one block per query (lists of up to [`MAX_BEAM_WIDTH`] entries); deterministic,
//!   and a query's result depends only on the query, the data, the graph and the parameters
//!   (the random starting points are keyed by a hash of the query's bytes), never on the batch;
//! - **multi-CTA**: `max(search_width, ceil(beam_width / 32))` blocks per query, each with a 32-entry
//!   list, sharing one visited table in global memory, merged by `cagra_search_merge`; for small
//!   batches. Which block reaches a vertex first depends on timing, so results may differ
//!   slightly between runs. With one block per query the table is in shared memory, as in
//!   single-CTA mode.
//!
//! The parameters are the crate's [`CagraSearchParams`] (the filter included).
//! [`CagraSearchMode::Auto`] picks multi-CTA when the batch is smaller than twice the number of
//! SMs or `beam_width > 512`. A filter (a bitset of allowed ids) keeps a second result list of
//! allowed points only: filtered-out points are traversed (so the search still reaches the
//! allowed points near the query) but never returned.

use weft_core::{
    DatasetView, Element, Error, FixedDegreeGraph, GraphView, Metric, Neighbors, NeighborsMut,
    NodeId, Params, Result, SearchStats, Searcher,
};
use weft_gpu::launch::{need, u32_of};
use weft_gpu::matrix::padded_stride;
use weft_gpu::{DeviceFixedGraph, DeviceMatrix, GpuContext, Kernel, Launch};

use super::common::{
    DeviceSearchInputs, ListChunk, SessionQueries, check_entries, check_graph_rows,
    check_host_shapes, check_out_rows, download_last_results, download_results, download_stats,
    fmt_session, grow_bytes, result_buffers, take_grown, upload_entries_zero_counters,
    upload_resident, upload_search, work_buffers,
};
use super::kernels::cagra_search as kernels;
use super::rerank::{self, CandidateLists, HalfTraversal};
use crate::cagra_gpu_params::{
    CAGRA_GPU_MAX_BEAM_WIDTH as MAX_BEAM_WIDTH, CAGRA_GPU_MAX_SEARCH_WIDTH as MAX_SEARCH_WIDTH,
    check_filter_words,
};
pub use crate::cagra_gpu_params::{
    CagraSearchMode, CagraSearchParams, CagraSearchTuning, SearchPrecision,
};
use crate::check::check_search_inputs;

/// The largest candidate buffer (`search_width * degree`).
pub const MAX_CANDIDATES: usize = 1024;
/// Entries of each block's list in multi-CTA mode ([`CagraSearchPlan::block_list_len`]).
pub const MULTI_CTA_BLOCK_LIST_LEN: usize = 32;
/// Threads per search block at most: the kernel's launch bound (`__launch_bounds__(512, 2)`,
/// which also caps it at 64 registers a thread, so that 16 blocks of 64 threads fit on an SM).
const BLOCK_MAX: usize = 512;
/// List plus candidate entries above which a block has 128 threads rather than 64 (more threads
/// shorten each query's sort and merge; fewer keep more queries in flight per SM).
const WIDE_BLOCK_ENTRIES: usize = 1024;
/// Shared memory a block may use (the launch wrapper's limit).
const SMEM_LIMIT: usize = 48 * 1024;
/// The largest multi-CTA merge buffer (pairs).
const MERGE_SLOTS_MAX: usize = 4096;

/// Every kernel a GPU CAGRA search of `T` may launch (any metric): `cagra_search_<dt>` and the
/// plain kernels (table fill, multi-CTA merge). The search prepares them before its first launch
/// ([`GpuContext::prepare_kernels`]); a caller that also builds may prepare them with its build's
/// kernels, so that a first use compiles both at once.
pub fn search_kernels<T: Element>() -> Result<Vec<Kernel>> {
    Ok(vec![
        kernels::cagra_search_kernel(T::DTYPE)?,
        kernels::cagra_search_fill_kernel(),
    ])
}

/// The automatic team size for rows of `dim` elements of `elem_bytes` bytes: one lane per four
/// 16-byte loads of the padded row, rounded up to a power of two, between 4 and 32 (8 for 128
/// f32, 32 for 960 f32, 4 for 128 f16).
pub fn auto_team_size(dim: usize, elem_bytes: usize) -> usize {
    let vecs = padded_stride(dim) * elem_bytes / 16;
    vecs.div_ceil(4).next_power_of_two().clamp(4, 32)
}

/// The launch plan of one search, resolved from a [`CagraSearchParams`] and the shapes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CagraSearchPlan {
    /// The mode used (never `Auto`).
    pub mode: CagraSearchMode,
    /// Threads per distance.
    pub team_size: usize,
    /// Iteration cap.
    pub max_iterations: usize,
    /// Blocks per query.
    pub ctas_per_query: usize,
    /// Each block's list length: the beam width in single-CTA mode; in multi-CTA mode
    /// [`MULTI_CTA_BLOCK_LIST_LEN`] per block, `ctas_per_query` blocks together holding at
    /// least the beam width. The kernel's `beam_width` argument is this (a block's own beam).
    pub block_list_len: usize,
    /// Parents per iteration of each block.
    pub width: usize,
    /// Candidate buffer (a power of two).
    pub candidates: usize,
    /// log2 of the visited table size.
    pub hash_bits: u32,
    /// Where the visited table lives: 0 shared memory, 1 global per block, 2 global per query.
    pub table_mode: u32,
    /// Dynamic shared memory per search block, in bytes.
    pub shared_bytes: usize,
    /// Threads per search block: single-CTA 64, or 128 for lists and candidates of more than
    /// 1024 entries; multi-CTA one team per candidate (at most 512).
    pub block_threads: usize,
}

/// The sizes a search's launch plan depends on ([`plan`]): the data, its graph, the batch of
/// queries and whether a filter keeps a second list.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CagraSearchShape {
    /// Points (data rows, graph vertices).
    pub n: usize,
    /// Elements per row.
    pub dim: usize,
    /// Bytes per element as the search reads them (2 for the f16 traversal of f32 data).
    pub elem_bytes: usize,
    /// The graph's out-degree.
    pub degree: usize,
    /// Queries in the batch.
    pub nq: usize,
    /// Results per query.
    pub k: usize,
    /// Whether the search has a filter (each block then keeps a list of allowed points too).
    pub filtered: bool,
}

impl CagraSearchShape {
    /// The shape of a search of `nq` queries over `n` rows of `dim` elements of `T` and their
    /// graph of out-degree `degree`, for `k` results per query.
    fn of_rows<T: Element>(
        n: usize,
        dim: usize,
        degree: usize,
        nq: usize,
        k: usize,
        filtered: bool,
    ) -> Self {
        CagraSearchShape {
            n,
            dim,
            elem_bytes: std::mem::size_of::<T>(),
            degree,
            nq,
            k,
            filtered,
        }
    }

    /// The shape of a search of `inputs` reading elements of `elem_bytes` bytes, for `k`
    /// results per query.
    fn of<T: Element>(
        inputs: &DeviceSearchInputs<'_, T>,
        elem_bytes: usize,
        k: usize,
        filtered: bool,
    ) -> Self {
        CagraSearchShape {
            n: inputs.data.rows(),
            dim: inputs.data.dim(),
            elem_bytes,
            degree: inputs.graph.degree(),
            nq: inputs.queries.rows(),
            k,
            filtered,
        }
    }
}

/// CAGRA-style search on one GPU (see the module documentation).
#[derive(Clone, Copy, Debug)]
pub struct CagraSearchDevice<'c> {
    pub(super) ctx: &'c GpuContext,
    pub(super) budget: Option<u64>,
}

work_buffers! {
    /// Device work buffers of [`CagraSearchDevice::search_device_with`], kept across searches
    /// (a search session): they grow to the largest call seen and are freed when dropped.
    /// Buffers made on one [`GpuContext`] and handed to a search on another are dropped and made
    /// again there.
    pub struct CagraSearchBuffers {
        gtable: u32,
        part_ids: u32,
        part_d: f32,
        fin_ids: u32,
        fin_d: f32,
        filter: u32,
        entries: u32,
        counters: u64,
    }
}

impl<'c> CagraSearchDevice<'c> {
    /// The search on `ctx`, within the default memory budget.
    pub fn new(ctx: &'c GpuContext) -> Self {
        CagraSearchDevice { ctx, budget: None }
    }

    /// Limits device memory to `bytes` (still capped by free memory).
    pub fn with_budget(mut self, bytes: u64) -> Self {
        self.budget = Some(bytes);
        self
    }

    /// Checks `params` for a search of `shape` and resolves the launch plan.
    pub fn plan(
        &self,
        shape: CagraSearchShape,
        params: &CagraSearchParams,
    ) -> Result<CagraSearchPlan> {
        plan(self.ctx.info().sm_count as usize, shape, params)
    }

    /// Searches host data through a host graph (all its entry points, when it has some, start
    /// the search besides the random points), with `params.filter` if any (see
    /// [`CagraSearchDevice::search_device`]); `k` results per query.
    pub fn search<T: Element>(
        &self,
        data: DatasetView<'_, T>,
        graph: &FixedDegreeGraph,
        queries: DatasetView<'_, T>,
        metric: Metric,
        k: usize,
        params: &CagraSearchParams,
    ) -> Result<(Neighbors, SearchStats)> {
        let mut out = result_buffers(queries.rows(), k)?;
        let stats = self.search_into(data, graph, queries, metric, params, out.as_mut())?;
        Ok((out, stats))
    }

    /// [`CagraSearchDevice::search`] into the caller's buffers (`out.k()` results for each of
    /// the `out.rows()` queries).
    pub fn search_into<T: Element>(
        &self,
        data: DatasetView<'_, T>,
        graph: &FixedDegreeGraph,
        queries: DatasetView<'_, T>,
        metric: Metric,
        params: &CagraSearchParams,
        out: NeighborsMut<'_>,
    ) -> Result<SearchStats> {
        let filter = params.filter.as_deref();
        check_host_shapes(data, graph, queries)?;
        check_out_rows(&out, queries.rows())?;
        // Check everything that needs no device memory before uploading.
        let shape = CagraSearchShape::of_rows::<T>(
            data.rows(),
            data.dim(),
            graph.degree(),
            queries.rows(),
            out.k(),
            filter.is_some(),
        );
        self.plan(shape, params)?;
        check_filter_words(filter, data.rows())?;
        if queries.rows() == 0 {
            return Ok(SearchStats::default());
        }
        let (d, q, g) = upload_search(self.ctx, data, graph, queries, 0, self.budget)?;
        let mut bufs = CagraSearchBuffers::default();
        let inputs = DeviceSearchInputs {
            data: &d,
            graph: &g,
            entries: graph.entry_points(),
            queries: &q,
        };
        self.search_device_with(&mut bufs, inputs, metric, params, out)
    }

    /// Searches data already on the device through a device graph; the results come back to
    /// the host. `inputs.entries`: vertices every query starts from besides the random ones (may
    /// be empty; any number, all scored before the first expansion in batches of the candidate
    /// buffer's size that do not count towards `max_iterations`). `params.filter`: a bitset of
    /// allowed ids, bit `i % 32` of word `i / 32` set when id `i` may be returned (at least
    /// `ceil(n / 32)` words). Allocates its work buffers for this call only; repeated searches
    /// should keep a [`CagraSearchBuffers`] and call [`CagraSearchDevice::search_device_with`].
    pub fn search_device<T: Element>(
        &self,
        inputs: DeviceSearchInputs<'_, T>,
        metric: Metric,
        k: usize,
        params: &CagraSearchParams,
    ) -> Result<(Neighbors, SearchStats)> {
        let mut bufs = CagraSearchBuffers::default();
        let mut out = result_buffers(inputs.queries.rows(), k)?;
        let stats = self.search_device_with(&mut bufs, inputs, metric, params, out.as_mut())?;
        Ok((out, stats))
    }

    /// [`CagraSearchDevice::search_device`] into the caller's buffers (`out.k()` results for
    /// each query), with work buffers (visited tables, partial and final results, filter, entry
    /// points, counters) kept in `bufs` across calls: they grow when a call needs more (checked
    /// against the budget first) and are never shrunk, so repeated calls of the same or smaller
    /// batches allocate no device memory.
    ///
    /// With [`SearchPrecision::F16`] the f16 copy of the data is made for this call (a
    /// [`CagraSearchSession`] keeps it).
    pub fn search_device_with<T: Element>(
        &self,
        bufs: &mut CagraSearchBuffers,
        inputs: DeviceSearchInputs<'_, T>,
        metric: Metric,
        params: &CagraSearchParams,
        mut out: NeighborsMut<'_>,
    ) -> Result<SearchStats> {
        if params.tuning.traversal == SearchPrecision::F16 {
            let mut half = HalfTraversal::new();
            return search_f16(self, bufs, &mut half, inputs, metric, params, out);
        }
        let ctx = self.ctx;
        let nq = inputs.queries.rows();
        check_out_rows(&out, nq)?;
        let k = out.k();
        self.search_lists(bufs, inputs, metric, params, k, &mut |c| {
            if c.last {
                // The last batch: its results and the counters in one round trip.
                return download_last_results(ctx, &c, &mut out, nq).map(Some);
            }
            download_results(ctx, c.ids, c.dists, &mut out, c.start, c.cnt)?;
            Ok(None)
        })
    }

    /// The search of [`CagraSearchDevice::search_device_with`] with `k` results per query,
    /// each batch of queries' results handed on the device to `sink` (which returns the
    /// statistics when it has taken the last batch, [`ListChunk::last`]).
    pub(crate) fn search_lists<T: Element>(
        &self,
        bufs: &mut CagraSearchBuffers,
        inputs: DeviceSearchInputs<'_, T>,
        metric: Metric,
        params: &CagraSearchParams,
        k: usize,
        sink: &mut dyn FnMut(ListChunk<'_>) -> Result<Option<SearchStats>>,
    ) -> Result<SearchStats> {
        let DeviceSearchInputs {
            data,
            graph,
            entries,
            queries,
        } = inputs;
        let ctx = self.ctx;
        ctx.prepare_kernels(&search_kernels::<T>()?)?;
        let filter = params.filter.as_deref();
        let n = data.rows();
        inputs.check_shapes()?;
        let nq = queries.rows();
        let shape = CagraSearchShape::of(&inputs, std::mem::size_of::<T>(), k, filter.is_some());
        let p = plan_with_entries(ctx.info().sm_count as usize, shape, params, entries.len())?;
        check_filter_words(filter, n)?;
        check_entries(entries, n)?;
        if nq == 0 {
            return Ok(SearchStats::default());
        }
        let sms = ctx.info().sm_count as usize;
        let multi = p.mode == CagraSearchMode::MultiCta;
        // Several blocks per query write their lists for cagra_search_merge; one block per
        // query (single-CTA, or multi-CTA with one part) writes its k results directly.
        let merged = multi && p.ctas_per_query > 1;
        let hsize = 1usize << p.hash_bits;
        // Queries per launch and grid: bounded so that tables and staging stay small.
        let chunk = if multi {
            let per_query = hsize * 4 + p.ctas_per_query * p.block_list_len * 8;
            ((256usize << 20) / per_query).clamp(1, 65_536).min(nq)
        } else {
            nq.min(1 << 20)
        };
        let grid_cap = sms * 16;
        let grid_max = (chunk * p.ctas_per_query).min(grid_cap).max(1);
        let tables = match p.table_mode {
            0 => 1,
            1 => grid_max * hsize,
            _ => chunk * hsize,
        };
        let parts_out = if merged {
            chunk * p.ctas_per_query * p.block_list_len
        } else {
            chunk * k
        };
        let filter_words = filter.map_or(0, |_| n.div_ceil(32));
        let fin_len = if merged { chunk * k } else { 1 };
        bufs.adopt(ctx);
        let grow = grow_bytes::<u32>(&bufs.gtable, tables)
            + grow_bytes::<u32>(&bufs.part_ids, parts_out)
            + grow_bytes::<f32>(&bufs.part_d, parts_out)
            + grow_bytes::<u32>(&bufs.fin_ids, fin_len)
            + grow_bytes::<f32>(&bufs.fin_d, fin_len)
            + grow_bytes::<u32>(&bufs.filter, filter_words)
            + grow_bytes::<u32>(&bufs.entries, entries.len())
            + grow_bytes::<u64>(&bufs.counters, 2);
        ctx.check_fits(grow, self.budget)?;
        let allocs = &mut bufs.allocations;
        let mut gtable = take_grown(ctx, &mut bufs.gtable, tables, allocs)?;
        let mut part_ids = take_grown(ctx, &mut bufs.part_ids, parts_out, allocs)?;
        let mut part_d = take_grown(ctx, &mut bufs.part_d, parts_out, allocs)?;
        let mut fin_ids = take_grown(ctx, &mut bufs.fin_ids, fin_len, allocs)?;
        let mut fin_d = take_grown(ctx, &mut bufs.fin_d, fin_len, allocs)?;
        let mut filter_buf = take_grown(ctx, &mut bufs.filter, filter_words, allocs)?;
        let before = *allocs;
        let mut entry_buf = take_grown(ctx, &mut bufs.entries, entries.len(), allocs)?;
        let fresh_entries = *allocs != before;
        let mut counters = take_grown(ctx, &mut bufs.counters, 2, allocs)?;
        // The buffers go back to `bufs` whatever happens below.
        let result = (|| -> Result<SearchStats> {
            if let Some(f) = filter {
                ctx.copy_to_device(
                    &f[..filter_words],
                    &mut filter_buf.slice_mut(0..filter_words),
                )?;
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
            // The kernel's beam is one block's list: the beam width in single-CTA mode.
            let beam_width = p.block_list_len as u32;
            let width = p.width as u32;
            let max_iter = p.max_iterations as u32;
            let min_iter = u32_of(params.tuning.min_iterations, "min_iterations")?;
            let team = p.team_size as u32;
            let n_entries = u32_of(entries.len(), "entry points")?;
            let has_filter = filter.is_some() as u32;
            let cand_cap = p.candidates as u32;
            let ncta = p.ctas_per_query as u32;
            need(graph.ids().len(), n as u64 * degree as u64, "graph ids")?;

            let mut start = 0usize;
            while start < nq {
                let cnt = chunk.min(nq - start);
                let cnt32 = cnt as u32;
                if p.table_mode == 2 {
                    let len = (cnt * hsize) as u64;
                    need(gtable.len(), len, "visited tables")?;
                    let blocks = (len.div_ceil(256)).min(8192) as u32;
                    // SAFETY: each pointer's length was checked above (`need`) for these sizes.
                    unsafe {
                        kernels::cagra_search_fill(
                            ctx,
                            Launch::blocks(blocks, 256),
                            &kernels::CagraSearchFillArgs {
                                p: gtable.output(),
                                len,
                            },
                        )
                    }?;
                }
                let qv = queries.rows_view(start, start + cnt)?;
                let dv = data.rows_view(0, n)?;
                let out_len = if merged {
                    p.block_list_len as u32
                } else {
                    k as u32
                };
                // One block per (query, part), so that the hardware keeps every SM busy to the
                // end (a grid-stride loop over more blocks than fit at once leaves a partial last
                // wave); only blocks with their own global table are capped at grid_cap.
                let blocks = cnt * p.ctas_per_query;
                let grid = if p.table_mode == 1 {
                    blocks.min(grid_cap)
                } else {
                    blocks
                };
                let grid = u32_of(grid.max(1), "search blocks")?;
                need(
                    part_ids.len().min(part_d.len()),
                    cnt as u64
                        * if merged {
                            p.ctas_per_query * p.block_list_len
                        } else {
                            k
                        } as u64,
                    "search results",
                )?;
                // SAFETY: each pointer's length was checked above (`need`) for these sizes.
                unsafe {
                    kernels::cagra_search(
                        ctx,
                        T::DTYPE,
                        Launch::new((grid, 1, 1), p.block_threads as u32, p.shared_bytes as u32),
                        &kernels::CagraSearchArgs {
                            data: dv.input(),
                            n: n32,
                            stride,
                            graph: graph.ids().input(),
                            degree,
                            queries: qv.input(),
                            nq: cnt32,
                            metric,
                            beam_width,
                            width,
                            max_iter,
                            min_iter,
                            team,
                            seed: params.seed,
                            entries: entry_buf.input(),
                            n_entries,
                            filter: filter_buf.input(),
                            has_filter,
                            cand_cap,
                            hash_bits: p.hash_bits,
                            table_mode: p.table_mode,
                            gtable: gtable.output(),
                            num_cta: ncta,
                            out_len,
                            out_ids: part_ids.output(),
                            out_d: part_d.output(),
                            counters: counters.output(),
                        },
                    )
                }?;
                let (src_ids, src_d) = if merged {
                    let parts = p.ctas_per_query as u32;
                    let len = p.block_list_len as u32;
                    let slots = (parts * len).next_power_of_two();
                    need(
                        fin_ids.len().min(fin_d.len()),
                        cnt as u64 * k as u64,
                        "merged results",
                    )?;
                    // SAFETY: each pointer's length was checked above (`need`) for these sizes.
                    unsafe {
                        kernels::cagra_search_merge(
                            ctx,
                            Launch::new((cnt32, 1, 1), 256, slots * 8),
                            &kernels::CagraSearchMergeArgs {
                                in_ids: part_ids.input(),
                                in_d: part_d.input(),
                                parts,
                                len,
                                slots,
                                k: k as u32,
                                out_ids: fin_ids.output(),
                                out_d: fin_d.output(),
                            },
                        )
                    }?;
                    (&fin_ids, &fin_d)
                } else {
                    (&part_ids, &part_d)
                };
                let chunk = ListChunk {
                    ids: src_ids,
                    dists: src_d,
                    start,
                    cnt,
                    counters: &counters,
                    last: start + cnt == nq,
                };
                if let Some(stats) = sink(chunk)? {
                    return Ok(stats);
                }
                start += cnt;
            }
            download_stats(ctx, &counters, nq)
        })();
        bufs.gtable = Some(gtable);
        bufs.part_ids = Some(part_ids);
        bufs.part_d = Some(part_d);
        bufs.fin_ids = Some(fin_ids);
        bufs.fin_d = Some(fin_d);
        bufs.filter = Some(filter_buf);
        bufs.entries = Some(entry_buf);
        bufs.counters = Some(counters);
        result
    }
}

/// A search session on one device: the data and the graph resident, a query buffer and the
/// work buffers ([`CagraSearchBuffers`]) kept across calls, so that a steady state of searches
/// of at most the largest batch seen uploads only the queries and allocates nothing. Owns its
/// context; everything is freed when it is dropped.
pub struct CagraSearchSession<T: Element> {
    ctx: GpuContext,
    budget: Option<u64>,
    data: DeviceMatrix<T>,
    graph: DeviceFixedGraph,
    entries: Vec<NodeId>,
    queries: Option<DeviceMatrix<T>>,
    bufs: CagraSearchBuffers,
    /// The f16 copy of the data and the buffers of [`SearchPrecision::F16`] (made on first use).
    half: HalfTraversal,
}

impl<T: Element> std::fmt::Debug for CagraSearchSession<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        fmt_session(
            f,
            "CagraSearchSession",
            &self.data,
            &self.graph,
            &self.entries,
            &self.queries,
            &self.bufs,
        )
    }
}

impl<T: Element> CagraSearchSession<T> {
    /// Uploads `data` and `graph` (its entry points stay on the host and start every query)
    /// to `ctx`, after checking that they fit.
    pub fn new(
        ctx: GpuContext,
        data: DatasetView<'_, T>,
        graph: &FixedDegreeGraph,
    ) -> Result<Self> {
        Self::new_with_budget(ctx, data, graph, None)
    }

    /// [`CagraSearchSession::new`] within `budget` bytes of device memory (`None`: free memory),
    /// which also bounds the later growth of the buffers.
    pub fn new_with_budget(
        ctx: GpuContext,
        data: DatasetView<'_, T>,
        graph: &FixedDegreeGraph,
        budget: Option<u64>,
    ) -> Result<Self> {
        check_graph_rows(graph.n(), data.rows())?;
        let (d, g) = upload_resident(&ctx, data, graph, budget)?;
        Self::from_device(ctx, d, g, graph.entry_points(), budget)
    }

    /// A session over data and a graph already on `ctx`'s device.
    pub fn from_device(
        ctx: GpuContext,
        data: DeviceMatrix<T>,
        graph: DeviceFixedGraph,
        entries: &[NodeId],
        budget: Option<u64>,
    ) -> Result<Self> {
        check_graph_rows(graph.n(), data.rows())?;
        check_entries(entries, data.rows())?;
        Ok(CagraSearchSession {
            ctx,
            budget,
            data,
            graph,
            entries: entries.to_vec(),
            queries: None,
            bufs: CagraSearchBuffers::new(),
            half: HalfTraversal::new(),
        })
    }

    /// The session's context.
    pub fn context(&self) -> &GpuContext {
        &self.ctx
    }

    /// The resident data.
    pub fn data(&self) -> &DeviceMatrix<T> {
        &self.data
    }

    /// The resident graph.
    pub fn graph(&self) -> &DeviceFixedGraph {
        &self.graph
    }

    /// The work buffers (their size and allocation count).
    pub fn buffers(&self) -> &CagraSearchBuffers {
        &self.bufs
    }

    /// The f16 copy of the data and the buffers of [`SearchPrecision::F16`] (their size and
    /// allocation count; empty until the first such search).
    pub fn half_traversal(&self) -> &HalfTraversal {
        &self.half
    }

    /// Searches host queries for `k` results each (see [`CagraSearchSession::search_into`]).
    pub fn search(
        &mut self,
        queries: DatasetView<'_, T>,
        metric: Metric,
        k: usize,
        params: &CagraSearchParams,
    ) -> Result<(Neighbors, SearchStats)> {
        let mut out = result_buffers(queries.rows(), k)?;
        let stats = self.search_into(queries, metric, params, out.as_mut())?;
        Ok((out, stats))
    }

    /// Searches host queries into the caller's buffers (`out.k()` results for each of the
    /// `out.rows()` queries): the queries are copied into the session's query buffer (grown
    /// when the batch is larger than any before), then as
    /// [`CagraSearchDevice::search_device_with`]; the results are copied from the device
    /// straight into `out`.
    pub fn search_into(
        &mut self,
        queries: DatasetView<'_, T>,
        metric: Metric,
        params: &CagraSearchParams,
        out: NeighborsMut<'_>,
    ) -> Result<SearchStats> {
        let (data, graph, entries) = (&self.data, &self.graph, &self.entries);
        let dev = CagraSearchDevice {
            ctx: &self.ctx,
            budget: self.budget,
        };
        let filter = params.filter.as_deref();
        let (dim, budget) = (data.dim(), self.budget);
        let half = &mut self.half;
        let staged = SessionQueries::new(&self.ctx, budget, dim, &mut self.queries, &mut self.bufs);
        staged.search(
            queries,
            out,
            |k| {
                let shape = CagraSearchShape::of_rows::<T>(
                    data.rows(),
                    data.dim(),
                    graph.degree(),
                    queries.rows(),
                    k,
                    filter.is_some(),
                );
                dev.plan(shape, params)?;
                check_filter_words(filter, data.rows())
            },
            |bufs, q, out| {
                let inputs = DeviceSearchInputs {
                    data,
                    graph,
                    entries,
                    queries: q,
                };
                if params.tuning.traversal == SearchPrecision::F16 {
                    return search_f16(&dev, bufs, half, inputs, metric, params, out);
                }
                dev.search_device_with(bufs, inputs, metric, params, out)
            },
        )
    }

    /// Searches queries already on the device for `k` results each, with the session's work
    /// buffers.
    pub fn search_device(
        &mut self,
        queries: &DeviceMatrix<T>,
        metric: Metric,
        k: usize,
        params: &CagraSearchParams,
    ) -> Result<(Neighbors, SearchStats)> {
        let mut out = result_buffers(queries.rows(), k)?;
        let dev = CagraSearchDevice {
            ctx: &self.ctx,
            budget: self.budget,
        };
        let inputs = DeviceSearchInputs {
            data: &self.data,
            graph: &self.graph,
            entries: &self.entries,
            queries,
        };
        if params.tuning.traversal == SearchPrecision::F16 {
            let (bufs, half) = (&mut self.bufs, &mut self.half);
            let stats = search_f16(&dev, bufs, half, inputs, metric, params, out.as_mut())?;
            return Ok((out, stats));
        }
        let stats = dev.search_device_with(&mut self.bufs, inputs, metric, params, out.as_mut())?;
        Ok((out, stats))
    }
}

/// [`CagraSearchDevice::plan`] for a device of `sms` SMs (a search with at most
/// `candidates` entry points; see [`plan_with_entries`]).
pub fn plan(
    sms: usize,
    shape: CagraSearchShape,
    params: &CagraSearchParams,
) -> Result<CagraSearchPlan> {
    plan_with_entries(sms, shape, params, 0)
}

/// [`plan`] for a search that starts from `n_entries` entry points. Only multi-CTA's visited
/// table depends on them: one table per query, never cleared during the search, so it also
/// makes room for the entry points beyond the first `candidates` (those replace random points
/// of the first gather, which the table already counts). The forgettable single-CTA table keeps
/// its size: the kernel checks it between batches of entry points as between iterations, so it
/// never fills past half however many entry points there are.
pub fn plan_with_entries(
    sms: usize,
    shape: CagraSearchShape,
    params: &CagraSearchParams,
    n_entries: usize,
) -> Result<CagraSearchPlan> {
    let CagraSearchShape {
        n,
        dim,
        elem_bytes,
        degree,
        nq,
        k,
        filtered,
    } = shape;
    if n == 0 {
        return Err(Error::InvalidInput("cannot search an empty set".into()));
    }
    if n > (1usize << 31) - 1 {
        return Err(Error::InvalidInput(format!(
            "{n} points: the GPU search marks expanded vertices with the id's top bit and needs \
             fewer than 2^31 points"
        )));
    }
    if k == 0 || k > MAX_BEAM_WIDTH {
        return Err(Error::invalid_param(
            "k",
            format!("k = {k} must be between 1 and {MAX_BEAM_WIDTH}"),
        ));
    }
    crate::plan::check_beam_width(params.beam_width, k)?;
    if params.beam_width > MAX_BEAM_WIDTH {
        return Err(Error::invalid_param(
            "beam_width",
            format!(
                "the beam width {} exceeds the GPU search's {MAX_BEAM_WIDTH}",
                params.beam_width
            ),
        ));
    }
    params.rerank_len(k)?;
    if params.tuning.search_width == 0 || params.tuning.search_width > MAX_SEARCH_WIDTH {
        return Err(Error::invalid_param(
            "search_width",
            format!(
                "{} parents per iteration: must be between 1 and {MAX_SEARCH_WIDTH}",
                params.tuning.search_width
            ),
        ));
    }
    if degree == 0 || degree > MAX_CANDIDATES {
        return Err(Error::InvalidGraph(format!(
            "graph degree {degree} must be between 1 and {MAX_CANDIDATES}"
        )));
    }
    if !matches!(params.tuning.team_size, 0 | 2 | 4 | 8 | 16 | 32) {
        return Err(Error::invalid_param(
            "team_size",
            format!(
                "{} threads per distance: use 0 (automatic), 2, 4, 8, 16 or 32",
                params.tuning.team_size
            ),
        ));
    }
    if params.tuning.max_iterations != 0
        && params.tuning.min_iterations > params.tuning.max_iterations
    {
        return Err(Error::invalid_param(
            "min_iterations",
            format!(
                "min_iterations = {} exceeds max_iterations = {}",
                params.tuning.min_iterations, params.tuning.max_iterations
            ),
        ));
    }
    if params.tuning.max_iterations > u32::MAX as usize
        || params.tuning.min_iterations > u32::MAX as usize
    {
        return Err(Error::invalid_param(
            "max_iterations",
            "iteration counts must fit in 32 bits",
        ));
    }
    let mode = match params.tuning.mode {
        CagraSearchMode::Auto => {
            if nq < 2 * sms || params.beam_width > 512 {
                CagraSearchMode::MultiCta
            } else {
                CagraSearchMode::SingleCta
            }
        }
        m => m,
    };
    let multi = mode == CagraSearchMode::MultiCta;
    let (block_list_len, width, ctas) = if multi {
        (
            MULTI_CTA_BLOCK_LIST_LEN,
            1,
            params
                .tuning
                .search_width
                .max(params.beam_width.div_ceil(MULTI_CTA_BLOCK_LIST_LEN)),
        )
    } else {
        (params.beam_width, params.tuning.search_width, 1)
    };
    if multi && (ctas * block_list_len).next_power_of_two() > MERGE_SLOTS_MAX {
        return Err(Error::invalid_param(
            "beam_width",
            format!(
                "multi-CTA search merges at most {MERGE_SLOTS_MAX} entries per query; beam_width = {} \
                 needs {ctas} blocks of {block_list_len}",
                params.beam_width
            ),
        ));
    }
    if width * degree > MAX_CANDIDATES {
        return Err(Error::invalid_param(
            "search_width",
            format!("search_width {width} x degree {degree} candidates exceed {MAX_CANDIDATES}"),
        ));
    }
    let candidates = (width * degree).next_power_of_two().max(32);
    let team_size = if params.tuning.team_size == 0 {
        auto_team_size(dim, elem_bytes)
    } else {
        params.tuning.team_size
    };
    let auto_iter = if multi {
        36
    } else {
        let l = block_list_len as f64 / width as f64;
        1 + ((1.1 * l).ceil() as usize).min(block_list_len / width + 10)
    };
    let max_iterations = if params.tuning.max_iterations == 0 {
        auto_iter.max(params.tuning.min_iterations).max(1)
    } else {
        params.tuning.max_iterations
    };
    let stride = padded_stride(dim);
    let results = if filtered { block_list_len } else { 0 };
    // query f32, top and result lists (pairs, double-buffered), candidates and their sorted copy
    // (pairs), parents, filter masks.
    let base_words =
        stride + 4 * block_list_len + 4 * results + 4 * candidates + 32 + candidates / 32;
    if base_words * 4 > SMEM_LIMIT {
        return Err(Error::invalid_param(
            "beam_width",
            format!(
                "dimension {dim} with lists of {block_list_len} entries per block and {candidates} \
                 candidates needs {} bytes of shared memory per block (limit {SMEM_LIMIT})",
                base_words * 4
            ),
        ));
    }
    // A multi-CTA search of one block per query (beam_width <= 32, search width 1) shares its table
    // with nobody: it keeps it in shared memory like a single-CTA search, with no global
    // atomics and no table fill before the launch (batch-1 latency).
    let (hash_bits, table_mode) = if multi && ctas > 1 {
        let extra_entries = n_entries.saturating_sub(candidates);
        let want = 2 * (ctas * (block_list_len + degree * max_iterations) + extra_entries);
        (want.next_power_of_two().trailing_zeros().clamp(11, 20), 2)
    } else {
        // Room for the lists and about eight iterations of candidates at half fill, so that
        // the table is cleared rarely; smaller when shared memory is short.
        let need = 2 * (block_list_len + results + candidates);
        let min_bits = need.next_power_of_two().trailing_zeros().max(8);
        let roomy = (2 * (block_list_len + results + 8 * candidates))
            .next_power_of_two()
            .trailing_zeros()
            .clamp(min_bits, 13);
        match (min_bits..=roomy)
            .rev()
            .find(|&b| b <= 13 && (base_words + (1usize << b)) * 4 <= SMEM_LIMIT)
        {
            Some(bits) => (bits, 0),
            None => (min_bits, 1),
        }
    };
    let shared_words = base_words + if table_mode == 0 { 1 << hash_bits } else { 0 };
    // 64 threads keep more queries in flight per SM; 128 when the merge needs the threads.
    let block_threads = if multi {
        // Few queries in flight: one team per candidate, so that an iteration's row loads
        // are all issued at once (its latency is one memory round trip, not one per team).
        (candidates * team_size).clamp(64, BLOCK_MAX)
    } else if block_list_len + candidates <= WIDE_BLOCK_ENTRIES {
        64
    } else {
        128
    };
    Ok(CagraSearchPlan {
        mode,
        team_size,
        max_iterations,
        ctas_per_query: ctas,
        block_list_len,
        width,
        candidates,
        hash_bits,
        table_mode,
        shared_bytes: shared_words * 4,
        block_threads,
    })
}

/// CAGRA-style search on a GPU (name `cagra_gpu`) over any [`FixedDegreeGraph`]: the graph's
/// entry points (when it has some) and seeded random points start each query. The data, graph
/// and queries are uploaded for each call; [`CagraSearchSession`] keeps them on the device, and
/// [`CagraSearchDevice::search_device`] searches sets already there.
#[derive(Clone, Copy, Debug)]
pub struct CagraSearchGpu<'c> {
    ctx: &'c GpuContext,
}

impl<'c> CagraSearchGpu<'c> {
    /// The search on `ctx`.
    pub fn new(ctx: &'c GpuContext) -> Self {
        CagraSearchGpu { ctx }
    }
}

impl Searcher<FixedDegreeGraph> for CagraSearchGpu<'_> {
    type Params = CagraSearchParams;

    fn name(&self) -> &'static str {
        "cagra_gpu"
    }

    fn search<T: Element>(
        &self,
        graph: &FixedDegreeGraph,
        data: DatasetView<'_, T>,
        queries: DatasetView<'_, T>,
        metric: Metric,
        params: &CagraSearchParams,
        out: NeighborsMut<'_>,
    ) -> Result<SearchStats> {
        let k = check_search_inputs(graph, data, queries, &out, |n, dim| params.validate(n, dim))?;
        crate::plan::check_beam_width(params.beam_width, k)?;
        if queries.rows() == 0 {
            return Ok(SearchStats::default());
        }
        CagraSearchDevice::new(self.ctx).search_into(data, graph, queries, metric, params, out)
    }
}

/// The search with [`SearchPrecision::F16`] (the f16 state and kernels are in `rerank`):
/// `inputs.data` and `inputs.queries` must be f32 (else `InvalidParams` on `traversal`); `half`
/// holds (or receives) the f16 copy of the data and the buffers. See the module documentation.
pub(crate) fn search_f16<T: Element>(
    dev: &CagraSearchDevice<'_>,
    bufs: &mut CagraSearchBuffers,
    half: &mut HalfTraversal,
    inputs: DeviceSearchInputs<'_, T>,
    metric: Metric,
    params: &CagraSearchParams,
    mut out: NeighborsMut<'_>,
) -> Result<SearchStats> {
    let DeviceSearchInputs {
        data,
        graph,
        entries,
        queries,
    } = inputs;
    debug_assert_eq!(params.tuning.traversal, SearchPrecision::F16);
    rerank::check_f32::<T>()?;
    let ctx = dev.ctx;
    inputs.check_shapes()?;
    let nq = queries.rows();
    check_out_rows(&out, nq)?;
    let k = out.k();
    let m = params.rerank_len(k)?;
    // Everything else the search checks (before any device work).
    dev.plan(
        CagraSearchShape::of(&inputs, 2, m, params.filter.is_some()),
        params,
    )?;
    if nq == 0 {
        return Ok(SearchStats::default());
    }
    half.adopt(ctx);
    if half.data.is_none() {
        let copy = rerank::half_copy(ctx, data, dev.budget)?;
        half.allocations += 1;
        half.data = Some(copy);
    }
    // The f16 queries: a buffer of the largest batch so far.
    let (dim, stride) = (queries.dim(), queries.stride());
    let q16_fits = half
        .queries
        .as_ref()
        .is_some_and(|q| q.capacity() >= nq && q.dim() == dim);
    let grow = if q16_fits {
        0
    } else {
        DeviceMatrix::<half::f16>::bytes_for(nq, dim)
    } + grow_bytes::<u32>(&half.out_ids, nq * k)
        + grow_bytes::<f32>(&half.out_d, nq * k)
        + grow_bytes::<u64>(&half.overflow, 1);
    ctx.check_fits(grow, dev.budget)?;
    if !q16_fits {
        half.queries = None;
        half.queries = Some(DeviceMatrix::<half::f16>::with_capacity(ctx, nq, dim)?);
        half.allocations += 1;
    }
    let allocs = &mut half.allocations;
    let mut out_ids = take_grown(ctx, &mut half.out_ids, nq * k, allocs)?;
    let mut out_d = take_grown(ctx, &mut half.out_d, nq * k, allocs)?;
    let mut overflow = take_grown(ctx, &mut half.overflow, 1, allocs)?;
    let q16 = half.queries.as_mut().expect("made above");
    let data16 = half.data.as_ref().expect("made above");
    // The buffers go back to `half` whatever happens below.
    let result = (|| -> Result<SearchStats> {
        q16.set_rows(nq)?;
        ctx.zero(&mut overflow.view_mut())?;
        let src = queries.rows_view(0, nq)?;
        let mut dst = q16.rows_view_mut(0, nq)?;
        rerank::convert_rows(ctx, &src, nq, stride, &mut dst, &mut overflow)?;
        let mut over = [0u64; 1];
        let inputs16 = DeviceSearchInputs {
            data: data16,
            graph,
            entries,
            queries: q16,
        };
        let stats = dev.search_lists(bufs, inputs16, metric, params, m, &mut |c: ListChunk<
            '_,
        >| {
            let len = c.cnt * k;
            let lists = CandidateLists {
                queries: queries.rows_view(c.start, c.start + c.cnt)?,
                nq: c.cnt,
                cand: c.ids.slice(0..c.cnt * m),
                m,
            };
            rerank::rerank_lists(
                ctx,
                data,
                &lists,
                metric,
                k,
                &mut out_ids.slice_mut(0..len),
                &mut out_d.slice_mut(0..len),
            )?;
            if !c.last {
                download_results(ctx, &out_ids, &out_d, &mut out, c.start, c.cnt)?;
                return Ok(None);
            }
            let mut rows = out.rows_mut(c.start..c.start + c.cnt);
            let (row_ids, row_d) = rows.buffers_mut();
            // The last batch: its results, the counters and the queries' overflow count
            // in one round trip.
            let mut cnt = [0u64; 2];
            let mut copies = ctx.host_copies()?;
            copies.add(&out_ids.slice(0..len), row_ids)?;
            copies.add(&out_d.slice(0..len), row_d)?;
            copies.add(&c.counters.slice(0..2), &mut cnt)?;
            copies.add(&overflow.slice(0..1), &mut over)?;
            copies.finish()?;
            Ok(Some(SearchStats {
                queries: nq as u64,
                distance_computations: cnt[1],
                hops: cnt[0],
            }))
        })?;
        if over[0] > 0 {
            return Err(rerank::overflow_error(over[0], "queries"));
        }
        Ok(stats)
    })();
    half.out_ids = Some(out_ids);
    half.out_d = Some(out_d);
    half.overflow = Some(overflow);
    result
}
