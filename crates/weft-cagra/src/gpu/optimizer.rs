//! CAGRA graph optimisation on the GPU: [`CagraOptimizer`].
//!
//! It turns a k-NN graph (on the host, or on the device as a [`DeviceKnnGraph`]) into a search
//! graph of fixed out-degree with the kernels of `kernels/cagra/`: fused detour counting and
//! rank pruning (one block per node, a shared-memory hash table from neighbour id to rank),
//! the reverse graph by counting, prefix sum and scatter followed by an order-free selection
//! of each node's `degree` best reverse edges, and the merge (one warp per node). The output
//! equals [`CagraCpu`](crate::CagraCpu)'s bit for bit; the [crate documentation](crate)
//! describes the algorithm and its tie rules. The k-NN rows are validated on the device as
//! they are read (ids in range, no self-loop, no duplicate, padding only at the end);
//! distances are not read, so the caller guarantees that rows are sorted by distance.

use weft_core::{Error, FixedDegreeGraph, INVALID, KnnGraph, NodeId, Result};
use weft_gpu::launch::{need, u32_of};
use weft_gpu::{DeviceBuffer, DeviceFixedGraph, DeviceKnnGraph, GpuContext, Launch};

use super::kernels::cagra;
use crate::Stages;

/// The largest k-NN degree the pruning kernel supports (its shared memory holds the row, the
/// counts and a hash table of twice as many slots).
pub const MAX_KNN_DEGREE: usize = 1024;
/// Threads per block of `cagra_prune`.
const PRUNE_THREADS: u32 = 128;
/// Warps per block of `cagra_rev_select` and `cagra_merge`.
const WARPS: u32 = 8;
/// Entries per block of `cagra_scan_blocks` (the kernel's `SCAN_TILE`).
const SCAN_TILE: u32 = 4096;
/// Threads of `cagra_scan_blocks` and `cagra_scan_sums` (the kernel's `SCAN_THREADS`).
const SCAN_THREADS: u32 = 1024;
/// Blocks of the grid-stride edge kernels.
const EDGE_BLOCKS: u32 = 4096;

/// CAGRA graph optimisation on one GPU (see the module documentation).
#[derive(Clone, Copy, Debug)]
pub struct CagraOptimizer<'c> {
    ctx: &'c GpuContext,
    budget: Option<u64>,
}

/// Device buffers of one run, kept for [`CagraOptimizer::optimize_stages`].
struct Run {
    out: DeviceBuffer<NodeId>,
    pruned: DeviceBuffer<NodeId>,
    rev: DeviceBuffer<NodeId>,
    rev_cnt: DeviceBuffer<u32>,
    detours: DeviceBuffer<u32>,
}

impl<'c> CagraOptimizer<'c> {
    /// The optimiser on `ctx`, within the default memory budget.
    pub fn new(ctx: &'c GpuContext) -> Self {
        CagraOptimizer { ctx, budget: None }
    }

    /// Limits device memory to `bytes` (still capped by free memory).
    pub fn with_budget(mut self, bytes: u64) -> Self {
        self.budget = Some(bytes);
        self
    }

    /// Device bytes an optimisation of `n` vertices to `degree` allocates at most, besides the
    /// k-NN ids (`n * k * 4` bytes more when they come from the host).
    pub fn bytes_for(n: usize, degree: usize) -> u64 {
        let (n, d) = (n as u64, degree as u64);
        let tiles = (n + 1).div_ceil(SCAN_TILE as u64);
        // pruned, reverse, output: n*d ids each; reverse keys: n*d u64; in-degrees, reverse
        // counts: n each; offsets n+1; tile sums; the detour placeholder and the error flag.
        3 * n * d * 4 + n * d * 8 + 2 * n * 4 + (n + 1) * 4 + tiles * 4 + 8
    }

    /// Optimises a host k-NN graph (rows sorted by distance) into out-degree `degree`.
    pub fn optimize(&self, knn: &KnnGraph, degree: usize) -> Result<FixedDegreeGraph> {
        self.check(knn.n(), knn.k(), degree)?;
        self.ctx.check_fits(
            Self::bytes_for(knn.n(), degree) + knn.ids().len() as u64 * 4,
            self.budget,
        )?;
        let ids = self.ctx.upload(knn.ids())?;
        let run = self.run(&ids, knn.n(), knn.k(), degree, false)?;
        drop(ids);
        DeviceFixedGraph::from_parts(knn.n(), degree, run.out)?.download(self.ctx)
    }

    /// Optimises a k-NN graph already on the device (rows sorted by distance); the result stays
    /// on the device.
    pub fn optimize_device(&self, knn: &DeviceKnnGraph, degree: usize) -> Result<DeviceFixedGraph> {
        self.check(knn.n(), knn.k(), degree)?;
        self.ctx
            .check_fits(Self::bytes_for(knn.n(), degree), self.budget)?;
        let run = self.run(knn.ids(), knn.n(), knn.k(), degree, false)?;
        DeviceFixedGraph::from_parts(knn.n(), degree, run.out)
    }

    /// Like [`CagraOptimizer::optimize`], bringing every intermediate result back (for tests).
    pub fn optimize_stages(&self, knn: &KnnGraph, degree: usize) -> Result<Stages> {
        let (n, k) = (knn.n(), knn.k());
        self.check(n, k, degree)?;
        self.ctx.check_fits(
            Self::bytes_for(n, degree) + 2 * knn.ids().len() as u64 * 4,
            self.budget,
        )?;
        let ids = self.ctx.upload(knn.ids())?;
        let run = self.run(&ids, n, k, degree, true)?;
        let reverse_counts = self.ctx.download(&run.rev_cnt, n)?;
        let mut reverse = self.ctx.download(&run.rev, n * degree)?;
        for (v, row) in reverse.chunks_mut(degree).enumerate() {
            row[reverse_counts[v] as usize..].fill(INVALID);
        }
        Ok(Stages {
            detours: self.ctx.download(&run.detours, n * k)?,
            pruned: self.ctx.download(&run.pruned, n * degree)?,
            reverse,
            reverse_counts,
            graph: self.ctx.download(&run.out, n * degree)?,
        })
    }

    fn check(&self, n: usize, k: usize, degree: usize) -> Result<()> {
        if n == 0 {
            return Err(Error::InvalidInput("the k-NN graph is empty".into()));
        }
        if degree == 0 || degree > k {
            return Err(Error::invalid_param(
                "degree",
                format!("output degree {degree} must be between 1 and the k-NN graph's degree {k}"),
            ));
        }
        if k > MAX_KNN_DEGREE {
            return Err(Error::invalid_param(
                "intermediate_degree",
                format!("k-NN degree {k} exceeds the GPU maximum of {MAX_KNN_DEGREE}"),
            ));
        }
        if n >= INVALID as usize || (n as u64) * (degree as u64) >= u32::MAX as u64 {
            return Err(Error::InvalidInput(format!(
                "{n} vertices x degree {degree} exceed the GPU optimiser's 32-bit edge offsets"
            )));
        }
        Ok(())
    }

    /// Runs every kernel on the k-NN ids `knn` (`n * k`); `keep_detours`: also fill the
    /// detour counts.
    fn run(
        &self,
        knn: &DeviceBuffer<NodeId>,
        n: usize,
        k: usize,
        degree: usize,
        keep_detours: bool,
    ) -> Result<Run> {
        let ctx = self.ctx;
        need(knn.len(), n as u64 * k as u64, "cagra k-NN ids")?;
        let (n32, k32, d32) = (
            u32_of(n, "vertices")?,
            u32_of(k, "k-NN degree")?,
            u32_of(degree, "degree")?,
        );
        let edges = n as u64 * degree as u64;
        let mut pruned = ctx.alloc_zeros::<NodeId>(n * degree)?;
        let mut detours = ctx.alloc_zeros::<u32>(if keep_detours { n * k } else { 1 })?;
        let mut error = ctx.alloc_zeros::<u32>(1)?;

        // 1. Detour counting and pruning.
        let bits = (2 * k).next_power_of_two().max(2).trailing_zeros();
        let smem = ((2u32 << bits) + 2 * k32) * 4;
        // SAFETY: each pointer's length was checked above (`need`) for these sizes.
        unsafe {
            cagra::cagra_prune(
                ctx,
                Launch::new((n32, 1, 1), PRUNE_THREADS, smem),
                &cagra::CagraPruneArgs {
                    knn: knn.input(),
                    n: n32,
                    k: k32,
                    degree: d32,
                    bits,
                    pruned: pruned.output(),
                    detours: detours.output(),
                    write_detours: keep_detours as u32,
                    error: error.output(),
                },
            )
        }?;
        if ctx.download(&error, 1)?[0] != 0 {
            return Err(Error::InvalidGraph(
                "the k-NN graph has a row with an id out of range, a self-loop, a duplicate or \
                 an id after padding"
                    .into(),
            ));
        }

        // 2. In-degrees.
        let mut indeg = ctx.alloc_zeros::<u32>(n)?;
        let edge_grid = (edges.div_ceil(256).min(EDGE_BLOCKS as u64) as u32).max(1);
        // SAFETY: each pointer's length was checked above (`need`) for these sizes.
        unsafe {
            cagra::cagra_rev_count(
                ctx,
                Launch::blocks(edge_grid, 256),
                &cagra::CagraRevCountArgs {
                    pruned: pruned.input(),
                    edges,
                    indeg: indeg.output(),
                },
            )
        }?;

        // 3. Offsets: exclusive prefix sum over n + 1 entries.
        let len = n32 + 1;
        let tiles = len.div_ceil(SCAN_TILE);
        let mut offsets = ctx.alloc_zeros::<u32>(len as usize)?;
        let mut sums = ctx.alloc_zeros::<u32>(tiles as usize)?;
        // SAFETY: each pointer's length was checked above (`need`) for these sizes.
        unsafe {
            cagra::cagra_scan_blocks(
                ctx,
                Launch::blocks(tiles, SCAN_THREADS),
                &cagra::CagraScanBlocksArgs {
                    r#in: indeg.input(),
                    n: n32,
                    len,
                    out: offsets.output(),
                    sums: sums.output(),
                },
            )
        }?;
        // SAFETY: each pointer's length was checked above (`need`) for these sizes.
        unsafe {
            cagra::cagra_scan_sums(
                ctx,
                Launch::blocks(1, SCAN_THREADS),
                &cagra::CagraScanSumsArgs {
                    sums: sums.output(),
                    count: tiles,
                },
            )
        }?;
        // SAFETY: each pointer's length was checked above (`need`) for these sizes.
        unsafe {
            cagra::cagra_scan_add(
                ctx,
                Launch::blocks(len.div_ceil(256), 256),
                &cagra::CagraScanAddArgs {
                    out: offsets.output(),
                    len,
                    sums: sums.input(),
                },
            )
        }?;
        drop(sums);

        // 4. Scatter the reverse keys (reusing the in-degree buffer, zeroed, as fill counters).
        ctx.zero(&mut indeg.view_mut())?;
        let mut keys = ctx.alloc_zeros::<u64>(edges as usize)?;
        // SAFETY: each pointer's length was checked above (`need`) for these sizes.
        unsafe {
            cagra::cagra_rev_scatter(
                ctx,
                Launch::blocks(edge_grid, 256),
                &cagra::CagraRevScatterArgs {
                    pruned: pruned.input(),
                    edges,
                    degree: d32,
                    offsets: offsets.input(),
                    fill: indeg.output(),
                    keys: keys.output(),
                },
            )
        }?;
        drop(indeg);

        // 5. Each node's `degree` best reverse edges, in order.
        let mut rev = ctx.alloc_zeros::<NodeId>(n * degree)?;
        let mut rev_cnt = ctx.alloc_zeros::<u32>(n)?;
        let warp_grid = n32.div_ceil(WARPS);
        // SAFETY: each pointer's length was checked above (`need`) for these sizes.
        unsafe {
            cagra::cagra_rev_select(
                ctx,
                Launch::blocks(warp_grid, WARPS * 32),
                &cagra::CagraRevSelectArgs {
                    keys: keys.input(),
                    offsets: offsets.input(),
                    n: n32,
                    degree: d32,
                    rev: rev.output(),
                    rev_cnt: rev_cnt.output(),
                },
            )
        }?;
        drop(keys);
        drop(offsets);

        // 6. Merge.
        let mut out = ctx.alloc_zeros::<NodeId>(n * degree)?;
        // SAFETY: each pointer's length was checked above (`need`) for these sizes.
        unsafe {
            cagra::cagra_merge(
                ctx,
                Launch::blocks(warp_grid, WARPS * 32),
                &cagra::CagraMergeArgs {
                    pruned: pruned.input(),
                    rev: rev.input(),
                    rev_cnt: rev_cnt.input(),
                    n: n32,
                    degree: d32,
                    out: out.output(),
                },
            )
        }?;
        ctx.synchronize()?;
        Ok(Run {
            out,
            pruned,
            rev,
            rev_cnt,
            detours,
        })
    }
}
