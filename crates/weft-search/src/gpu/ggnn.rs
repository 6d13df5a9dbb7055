//! The GGNN query on the GPU: [`GgnnSearchDevice`] (the device side of
//! `weft_search::GgnnSearchGpu`).
//!
//! One thread block per query (`kernels/ggnn_search/`): the query in shared memory, a sorted
//! best list and a sorted bounded priority queue in shared memory, a visited hash table in
//! shared memory, distances by teams of lanes with 16-byte loads, and all the neighbours of an
//! expanded vertex scored and merged into both lists at once. The stop rule is the CPU
//! search's (`weft_search::GgnnSearch`): the queue's head is expanded while `d < d_best_k + xi`
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
//! With lists large enough that nothing falls off and enough iterations, both searches expand
//! every vertex whose distance passes the bound and return the same ids up to distance ties
//! (the oracle test, `crates/weft-gpu/tests/ggnn_search.rs`).

use cudarc::driver::PushKernelArg;
use weft_core::{
    DatasetView, Element, Error, FixedDegreeGraph, Metric, Neighbors, NodeId, Result, SearchStats,
};

use crate::cagra::DeviceFixedGraph;
use crate::context::GpuContext;
use crate::launch::{cfg as launch_cfg, launch, need, u32_of};
use crate::matrix::DeviceMatrix;
use crate::search_common::{
    check_device_shapes, check_entries, check_graph_rows, check_host_shapes, check_query_dim,
    download_results, download_stats, fmt_session, grow_bytes, take_grown,
    upload_entries_zero_counters, upload_resident, upload_search, work_buffers,
};

/// The largest graph degree (candidates per expanded vertex).
pub const MAX_DEGREE: usize = 1024;
/// Merge elements one thread holds (the kernel's `MAX_PER_THREAD`): best + queue + candidates
/// must not exceed this times the block size.
const MERGE_PER_THREAD: usize = 8;
/// Shared memory a block may use (the launch wrapper's limit).
const SMEM_LIMIT: usize = 48 * 1024;
/// The largest visited table (2^13 slots, 32 KiB).
const MAX_TABLE_BITS: u32 = 13;
/// Random entry points drawn per query when the graph has none (the kernel's
/// `RANDOM_ENTRIES`, the CPU search's count).
pub const RANDOM_ENTRIES: usize = 32;

/// Parameters of the GPU GGNN query: `weft_search::GgnnSearchParams` plus the GPU's own knobs.
#[derive(Clone, Debug, PartialEq)]
pub struct GgnnSearchConfig {
    /// Slack factor `tau` (finite, `>= 0`).
    pub tau: f32,
    /// Best-list size; `max(best, k)` is used (at least 1).
    pub best: usize,
    /// Priority-queue size (at least 1).
    pub prioq: usize,
    /// Ring of the last expanded vertices (0 allowed).
    pub visited: usize,
    /// Most vertices expanded per query (at least 1).
    pub max_iterations: usize,
    /// The largest 1-NN distance of the data (real, not squared), capping the slack.
    pub max_nn1: Option<f32>,
    /// Seed of the random entry points used when the graph has none.
    pub seed: u64,
    /// Threads per query block: 32, 64 or 128; 0 = automatic ([`GgnnSearchPlan`]).
    pub block_threads: usize,
    /// Lanes per distance: 2, 4, 8, 16 or 32 (at most the block size); 0 = automatic.
    pub team_size: usize,
    /// Prefetch the rows of a row's candidates beyond the first round of teams into L2 before
    /// the distances (default true; results are the same either way).
    pub prefetch_rows: bool,
}

impl Default for GgnnSearchConfig {
    fn default() -> Self {
        GgnnSearchConfig {
            tau: 0.5,
            best: 10,
            prioq: 54,
            visited: 384,
            max_iterations: 400,
            max_nn1: None,
            seed: 0,
            block_threads: 0,
            team_size: 0,
            prefetch_rows: true,
        }
    }
}

/// The launch plan of one search, resolved from a [`GgnnSearchConfig`] and the shapes.
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

/// The automatic team size for rows of `dim` elements of `elem_bytes` bytes: one lane per four
/// 16-byte loads of the padded row, a power of two between 2 and 32 (8 for 128 f32).
pub fn auto_team_size(dim: usize, elem_bytes: usize) -> usize {
    let vecs = crate::matrix::padded_stride(dim) * elem_bytes / 16;
    vecs.div_ceil(4).next_power_of_two().clamp(2, 32)
}

/// Checks `cfg` for `n` points of `dim` elements of `elem_bytes` bytes, a graph of `degree`
/// and `k` results, and resolves the launch plan.
pub fn plan(
    n: usize,
    dim: usize,
    elem_bytes: usize,
    degree: usize,
    k: usize,
    cfg: &GgnnSearchConfig,
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
    if !(cfg.tau.is_finite() && cfg.tau >= 0.0) {
        return Err(Error::invalid_param(
            "tau",
            format!("{} is not a finite slack >= 0", cfg.tau),
        ));
    }
    if cfg.best == 0 {
        return Err(Error::invalid_param("best", "must be at least 1"));
    }
    if cfg.prioq == 0 {
        return Err(Error::invalid_param("prioq", "must be at least 1"));
    }
    if cfg.max_iterations == 0 || cfg.max_iterations > u32::MAX as usize {
        return Err(Error::invalid_param(
            "max_iterations",
            format!("{} must be between 1 and 2^32 - 1", cfg.max_iterations),
        ));
    }
    if let Some(m) = cfg.max_nn1
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
    if !matches!(cfg.block_threads, 0 | 32 | 64 | 128) {
        return Err(Error::invalid_param(
            "block_threads",
            format!("{}: use 0 (automatic), 32, 64 or 128", cfg.block_threads),
        ));
    }
    if !matches!(cfg.team_size, 0 | 2 | 4 | 8 | 16 | 32) {
        return Err(Error::invalid_param(
            "team_size",
            format!(
                "{} lanes per distance: use 0 (automatic), 2, 4, 8, 16 or 32",
                cfg.team_size
            ),
        ));
    }
    let best_cap = cfg.best.max(k);
    let cand_cap = degree.max(1).div_ceil(32).max(1) * 32;
    let merge = best_cap + cfg.prioq + cand_cap;
    let block_threads = if cfg.block_threads != 0 {
        cfg.block_threads
    } else {
        // One warp keeps the most queries in flight; wide rows and large lists take more.
        let row_bytes = crate::matrix::padded_stride(dim) * elem_bytes;
        let base = if row_bytes > 1024 { 64 } else { 32 };
        [base, 64, 128]
            .into_iter()
            .find(|&b| b >= base && merge <= MERGE_PER_THREAD * b)
            .unwrap_or(128)
    };
    if merge > MERGE_PER_THREAD * block_threads {
        return Err(Error::invalid_param(
            "prioq",
            format!(
                "best {best_cap} + prioq {} + {cand_cap} candidates exceed the {} entries a block \
                 of {block_threads} threads merges (at most {} threads per block)",
                cfg.prioq,
                MERGE_PER_THREAD * block_threads,
                128
            ),
        ));
    }
    let team_size = if cfg.team_size == 0 {
        auto_team_size(dim, elem_bytes).min(block_threads)
    } else {
        cfg.team_size
    };
    if team_size > block_threads {
        return Err(Error::invalid_param(
            "team_size",
            format!("{team_size} lanes exceed the block of {block_threads} threads"),
        ));
    }
    // The table is reset before a row could fill it past half, and refilled with the lists
    // and the ring: half of it must hold those and one row.
    let keep = best_cap + cfg.prioq + cfg.visited + cand_cap;
    let hash_bits = (2 * keep).next_power_of_two().trailing_zeros().max(6);
    if hash_bits > MAX_TABLE_BITS {
        return Err(Error::invalid_param(
            "visited",
            format!(
                "best {best_cap} + prioq {} + visited {} + {cand_cap} candidates need a visited \
                 table of 2^{hash_bits} slots; the GPU search holds at most 2^{MAX_TABLE_BITS}",
                cfg.prioq, cfg.visited
            ),
        ));
    }
    let stride = crate::matrix::padded_stride(dim);
    let words =
        stride + 2 * best_cap + 2 * cfg.prioq + 3 * cand_cap + cfg.visited + (1 << hash_bits);
    let shared_bytes = words * 4;
    if shared_bytes > SMEM_LIMIT {
        return Err(Error::invalid_param(
            "visited",
            format!(
                "dimension {dim} with best {best_cap}, prioq {}, visited {} and {cand_cap} \
                 candidates needs {shared_bytes} bytes of shared memory per block (limit \
                 {SMEM_LIMIT})",
                cfg.prioq, cfg.visited
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
    /// from 32 random points per query drawn as the CPU search draws them). Data, graph and
    /// queries are uploaded for this call after checking that they fit.
    #[allow(clippy::too_many_arguments)]
    pub fn search<T: Element>(
        &self,
        data: DatasetView<'_, T>,
        graph: &FixedDegreeGraph,
        entries: &[NodeId],
        queries: DatasetView<'_, T>,
        metric: Metric,
        k: usize,
        cfg: &GgnnSearchConfig,
    ) -> Result<(Neighbors, SearchStats)> {
        check_host_shapes(data, graph, queries)?;
        plan(
            data.rows(),
            data.dim(),
            std::mem::size_of::<T>(),
            graph.degree(),
            k,
            cfg,
        )?;
        check_entries(entries, data.rows())?;
        if queries.rows() == 0 {
            return Ok((Neighbors::new(0, k), SearchStats::default()));
        }
        let results = queries.rows() as u64 * k as u64 * 8;
        let (d, q, g) = upload_search(self.ctx, data, graph, queries, results, self.budget)?;
        self.search_device(&d, &g, entries, &q, metric, k, cfg)
    }

    /// Searches data already on the device through a device graph; the results come back to
    /// the host. Allocates its work buffers for this call only; repeated searches should keep
    /// a [`GgnnSearchBuffers`] and call [`GgnnSearchDevice::search_device_with`].
    #[allow(clippy::too_many_arguments)]
    pub fn search_device<T: Element>(
        &self,
        data: &DeviceMatrix<T>,
        graph: &DeviceFixedGraph,
        entries: &[NodeId],
        queries: &DeviceMatrix<T>,
        metric: Metric,
        k: usize,
        cfg: &GgnnSearchConfig,
    ) -> Result<(Neighbors, SearchStats)> {
        let mut bufs = GgnnSearchBuffers::new();
        self.search_device_with(&mut bufs, data, graph, entries, queries, metric, k, cfg)
    }

    /// [`GgnnSearchDevice::search_device`] with the work buffers (results, entry points,
    /// counters) kept in `bufs` across calls: they grow when a call needs more (checked against
    /// the budget first) and are never shrunk.
    #[allow(clippy::too_many_arguments)]
    pub fn search_device_with<T: Element>(
        &self,
        bufs: &mut GgnnSearchBuffers,
        data: &DeviceMatrix<T>,
        graph: &DeviceFixedGraph,
        entries: &[NodeId],
        queries: &DeviceMatrix<T>,
        metric: Metric,
        k: usize,
        cfg: &GgnnSearchConfig,
    ) -> Result<(Neighbors, SearchStats)> {
        let ctx = self.ctx;
        let n = data.rows();
        check_device_shapes(data, graph, queries)?;
        let p = plan(
            n,
            data.dim(),
            std::mem::size_of::<T>(),
            graph.degree(),
            k,
            cfg,
        )?;
        check_entries(entries, n)?;
        let nq = queries.rows();
        let mut out = Neighbors::new(nq, k);
        if nq == 0 {
            return Ok((out, SearchStats::default()));
        }
        let chunk = nq.min(1 << 20);
        bufs.adopt(ctx);
        let grow = grow_bytes::<u32>(&bufs.out_ids, chunk * k)
            + grow_bytes::<f32>(&bufs.out_d, chunk * k)
            + grow_bytes::<u32>(&bufs.entries, entries.len())
            + grow_bytes::<u64>(&bufs.counters, 2);
        ctx.check_fits(grow, self.budget)?;
        let allocs = &mut bufs.allocations;
        let mut out_ids = take_grown(ctx, &mut bufs.out_ids, chunk * k, allocs)?;
        let mut out_d = take_grown(ctx, &mut bufs.out_d, chunk * k, allocs)?;
        let mut entry_buf = take_grown(ctx, &mut bufs.entries, entries.len(), allocs)?;
        let mut counters = take_grown(ctx, &mut bufs.counters, 2, allocs)?;
        let result = (|| -> Result<(Neighbors, SearchStats)> {
            upload_entries_zero_counters(ctx, entries, &mut entry_buf, &mut counters)?;
            let stride = u32_of(data.stride(), "row stride")?;
            let n32 = u32_of(n, "points")?;
            let degree = u32_of(graph.degree(), "degree")?;
            need(graph.ids().len(), n as u64 * degree as u64, "graph ids")?;
            let metric_code = metric.code() as i32;
            let best_cap = u32_of(p.best_cap, "best")?;
            let prioq = u32_of(cfg.prioq, "prioq")?;
            let ring = u32_of(cfg.visited, "visited")?;
            let max_iter = u32_of(cfg.max_iterations, "max_iterations")?;
            let guard = cfg.max_nn1.unwrap_or(f32::INFINITY);
            let team = p.team_size as u32;
            let n_entries = u32_of(entries.len(), "entry points")?;
            let cand_cap = p.cand_cap as u32;
            let k32 = u32_of(k, "k")?;
            let prefetch = u32::from(cfg.prefetch_rows);
            let name = format!("ggnn_search_{}", T::DTYPE.name());
            let f = ctx.function("ggnn_search", &name)?;
            let mut start = 0usize;
            while start < nq {
                let cnt = chunk.min(nq - start);
                let cnt32 = cnt as u32;
                let q_base = u32_of(start, "query index")?;
                let qv = queries.rows_view(start, start + cnt)?;
                let dv = data.rows_view(0, n)?;
                {
                    let mut a = ctx.stream().launch_builder(&f);
                    a.arg(&dv)
                        .arg(&n32)
                        .arg(&stride)
                        .arg(graph.ids())
                        .arg(&degree)
                        .arg(&qv)
                        .arg(&cnt32)
                        .arg(&q_base)
                        .arg(&metric_code)
                        .arg(&best_cap)
                        .arg(&prioq)
                        .arg(&ring)
                        .arg(&max_iter)
                        .arg(&cfg.tau)
                        .arg(&guard)
                        .arg(&team)
                        .arg(&cfg.seed)
                        .arg(&entry_buf)
                        .arg(&n_entries)
                        .arg(&cand_cap)
                        .arg(&p.hash_bits)
                        .arg(&k32)
                        .arg(&prefetch)
                        .arg(&mut out_ids)
                        .arg(&mut out_d)
                        .arg(&mut counters);
                    launch(
                        ctx,
                        &name,
                        a,
                        launch_cfg((cnt32, 1, 1), p.block_threads as u32, p.shared_bytes as u32),
                    )?;
                }
                download_results(ctx, &out_ids, &out_d, &mut out, start, cnt, k)?;
                start += cnt;
            }
            Ok((out, download_stats(ctx, &counters, nq)?))
        })();
        bufs.out_ids = Some(out_ids);
        bufs.out_d = Some(out_d);
        bufs.entries = Some(entry_buf);
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

    /// Searches host queries: they are copied into the session's query buffer (grown when the
    /// batch is larger than any before), then as [`GgnnSearchDevice::search_device_with`].
    pub fn search(
        &mut self,
        queries: DatasetView<'_, T>,
        metric: Metric,
        k: usize,
        cfg: &GgnnSearchConfig,
    ) -> Result<(Neighbors, SearchStats)> {
        check_query_dim(self.data.dim(), queries.dim())?;
        // Check what needs no device memory before uploading.
        plan(
            self.data.rows(),
            self.data.dim(),
            std::mem::size_of::<T>(),
            self.graph.degree(),
            k,
            cfg,
        )?;
        if queries.rows() == 0 {
            return Ok((Neighbors::new(0, k), SearchStats::default()));
        }
        let q = DeviceMatrix::upload_reusing(
            &mut self.queries,
            &self.ctx,
            queries,
            None,
            &mut self.bufs.allocations,
        )?;
        GgnnSearchDevice::new(&self.ctx).search_device_with(
            &mut self.bufs,
            &self.data,
            &self.graph,
            &self.entries,
            q,
            metric,
            k,
            cfg,
        )
    }
}
