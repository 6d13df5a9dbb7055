//! Exact (brute-force) k-NN on the GPU: [`ExactGpu`].
//!
//! Queries are uploaded once; the base set streams through the device in chunks. For each chunk
//! and each batch of queries, `exact_distances_<dtype>` fills a (queries x base rows) distance
//! buffer by tiles, and `exact_select_f32` folds each query's row into that query's running
//! sorted list of the best `K` (a power of two >= k) pairs. Chunk and batch sizes are chosen so
//! that everything fits the memory budget; when even the smallest plan does not fit, the search
//! fails with [`Error::OutOfDeviceMemory`] before allocating.
//!
//! L2 distances are computed by expansion (`|q|^2 + |b|^2 - 2 q.b`, clamped at 0), as GPU
//! brute-force searches usually do: near-duplicates get distances within float rounding of
//! the norms (about 1e-7 relative to `|q|^2 + |b|^2`) rather than exact zeros.
//!
//! Inputs are not scanned for NaN or infinite values (that would cost a pass over the data):
//! a NaN distance is never selected, so rows that see only NaN come back padded with
//! [`INVALID`] / infinity. Validate with `DatasetView::check_finite` where that matters.

use weft_core::error::{check_graph_k, check_k};
use weft_core::{
    BuildCtx, DatasetView, Element, Error, INVALID, KnnGraph, KnnGraphBuilder, Metric, Neighbors,
    NeighborsMut, NoParams, Result, SearchStats, Searcher,
};

use weft_gpu::{DeviceMatrix, GpuContext};

use super::launch::{self, DistanceTile, Select};

/// The largest `k` the GPU selection supports.
pub const MAX_K: usize = 1024;

/// Brute-force k-NN on one GPU.
#[derive(Clone, Copy, Debug)]
pub struct ExactGpu<'c> {
    ctx: &'c GpuContext,
    budget: Option<u64>,
    max_dist_bytes: u64,
}

/// How a search was split up, for reports and tests.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ExactPlan {
    /// Base rows per chunk.
    pub base_chunk: usize,
    /// Queries per batch.
    pub query_batch: usize,
    /// Neighbour-list length per query on the device (power of two >= k).
    pub list: usize,
    /// Device bytes the plan allocates.
    pub bytes: u64,
}

impl<'c> ExactGpu<'c> {
    /// Brute force on `ctx`, within the default memory budget.
    pub fn new(ctx: &'c GpuContext) -> Self {
        ExactGpu {
            ctx,
            budget: None,
            max_dist_bytes: 1 << 30,
        }
    }

    /// Limits device memory to `bytes` (still capped by free memory).
    pub fn with_budget(mut self, bytes: u64) -> Self {
        self.budget = Some(bytes);
        self
    }

    /// Caps the distance buffer at `bytes` (default 1 GiB); smaller values mean more launches.
    pub fn with_max_distance_buffer(mut self, bytes: u64) -> Self {
        self.max_dist_bytes = bytes.max(4);
        self
    }

    /// Plans a search of `nq` queries over `nb` base rows of `dim` elements of `T`, both on the
    /// host.
    pub fn plan<T: Element>(
        &self,
        nq: usize,
        nb: usize,
        dim: usize,
        k: usize,
    ) -> Result<ExactPlan> {
        self.plan_for::<T>(nq, nb, dim, k, false, false)
    }

    /// Plans a search; `*_resident`: that set is already a [`DeviceMatrix`] (no copy needed).
    fn plan_for<T: Element>(
        &self,
        nq: usize,
        nb: usize,
        dim: usize,
        k: usize,
        queries_resident: bool,
        base_resident: bool,
    ) -> Result<ExactPlan> {
        let list = k.next_power_of_two().max(32);
        let budget = match self.budget {
            Some(b) => b.min(self.ctx.memory()?.0),
            None => self.ctx.default_budget()?,
        };
        let row_bytes = if base_resident {
            0
        } else {
            DeviceMatrix::<T>::bytes_for(1, dim)
        };
        let query_bytes = if queries_resident {
            0
        } else {
            DeviceMatrix::<T>::bytes_for(nq, dim)
        };
        // Held for the whole search: queries, their norms and their lists.
        let fixed = query_bytes + nq as u64 * 4 + nq as u64 * list as u64 * 8;
        let per_base_row = row_bytes + 4;
        // The smallest useful base chunk, and a query batch whose buffer holds it.
        let min_bc = nb.clamp(1, 128);
        let mut qb = nq
            .clamp(1, 8192)
            .min((self.max_dist_bytes / (4 * min_bc as u64)).max(1) as usize);
        loop {
            let avail = budget.saturating_sub(fixed);
            let per_col = per_base_row + qb as u64 * 4;
            let by_buf = (self.max_dist_bytes / (qb as u64 * 4)).max(1);
            let bc = (avail / per_col).min(by_buf).min(nb as u64) as usize;
            if bc >= min_bc {
                return Ok(ExactPlan {
                    base_chunk: bc,
                    query_batch: qb,
                    list,
                    bytes: fixed + bc.next_multiple_of(4) as u64 * per_col,
                });
            }
            if qb == 1 {
                return Err(Error::OutOfDeviceMemory {
                    needed: fixed + min_bc as u64 * (per_base_row + 4),
                    free: budget,
                });
            }
            qb /= 2;
        }
    }

    /// The `k` nearest base rows of each query, ascending by distance (ties by id).
    pub fn search<T: Element>(
        &self,
        base: DatasetView<'_, T>,
        queries: DatasetView<'_, T>,
        metric: Metric,
        k: usize,
    ) -> Result<Neighbors> {
        check_k(k, base.rows())?;
        let mut out = Neighbors::new(queries.rows(), k);
        self.search_into(base, queries, metric, out.as_mut())?;
        Ok(out)
    }

    /// Like [`ExactGpu::search`], writing `out.k()` neighbours per query into `out`.
    pub fn search_into<T: Element>(
        &self,
        base: DatasetView<'_, T>,
        queries: DatasetView<'_, T>,
        metric: Metric,
        mut out: NeighborsMut<'_>,
    ) -> Result<SearchStats> {
        let k = out.k();
        base.check_same_dim(&queries, "base vs queries")?;
        check_k(k, base.rows())?;
        if out.rows() != queries.rows() {
            return Err(Error::dim_mismatch(
                "output rows vs queries",
                queries.rows(),
                out.rows(),
            ));
        }
        self.run(
            ExactJob {
                base: Rows::Host(base),
                queries: Rows::Host(queries),
                metric,
                k,
                exclude_self: false,
            },
            None,
            &mut out,
        )?;
        Ok(SearchStats {
            queries: queries.rows() as u64,
            distance_computations: queries.rows() as u64 * base.rows() as u64,
            hops: 0,
        })
    }

    /// The exact k-NN graph of `data` (each row excludes the point itself).
    pub fn knn_graph<T: Element>(
        &self,
        data: DatasetView<'_, T>,
        metric: Metric,
        k: usize,
        ctx: &BuildCtx,
    ) -> Result<KnnGraph> {
        check_graph_k(k, data.rows())?;
        let mut nb = Neighbors::new(data.rows(), k);
        self.run(
            ExactJob {
                base: Rows::Host(data),
                queries: Rows::Host(data),
                metric,
                k,
                exclude_self: true,
            },
            Some(ctx),
            &mut nb.as_mut(),
        )?;
        KnnGraph::from_parts(data.rows(), k, nb.ids, nb.dists)
    }

    /// Like [`ExactGpu::search`] for sets already on the device (nothing is copied to the
    /// device; the results come back to the host).
    pub fn search_device<T: Element>(
        &self,
        base: &DeviceMatrix<T>,
        queries: &DeviceMatrix<T>,
        metric: Metric,
        k: usize,
    ) -> Result<Neighbors> {
        if base.dim() != queries.dim() {
            return Err(Error::dim_mismatch(
                "base vs queries",
                base.dim(),
                queries.dim(),
            ));
        }
        check_k(k, base.rows())?;
        let mut out = Neighbors::new(queries.rows(), k);
        self.run(
            ExactJob {
                base: Rows::Device(base),
                queries: Rows::Device(queries),
                metric,
                k,
                exclude_self: false,
            },
            None,
            &mut out.as_mut(),
        )?;
        Ok(out)
    }

    /// Like [`ExactGpu::knn_graph`] for a set already on the device.
    pub fn knn_graph_device<T: Element>(
        &self,
        data: &DeviceMatrix<T>,
        metric: Metric,
        k: usize,
        ctx: &BuildCtx,
    ) -> Result<KnnGraph> {
        check_graph_k(k, data.rows())?;
        let mut nb = Neighbors::new(data.rows(), k);
        self.run(
            ExactJob {
                base: Rows::Device(data),
                queries: Rows::Device(data),
                metric,
                k,
                exclude_self: true,
            },
            Some(ctx),
            &mut nb.as_mut(),
        )?;
        KnnGraph::from_parts(data.rows(), k, nb.ids, nb.dists)
    }

    fn run<T: Element>(
        &self,
        job: ExactJob<'_, T>,
        build: Option<&BuildCtx>,
        out: &mut NeighborsMut<'_>,
    ) -> Result<()> {
        let ExactJob {
            base,
            queries,
            metric,
            k,
            exclude_self,
        } = job;
        if k > MAX_K {
            return Err(Error::invalid_param(
                "k",
                format!("k = {k} exceeds the GPU maximum of {MAX_K}"),
            ));
        }
        let (nq, nb, dim) = (queries.rows(), base.rows(), base.dim());
        if queries.dim() != dim {
            return Err(Error::dim_mismatch("base vs queries", dim, queries.dim()));
        }
        if nb >= INVALID as usize || nq >= INVALID as usize {
            return Err(Error::InvalidInput(format!(
                "{nb} base rows / {nq} queries exceed the id range"
            )));
        }
        if nq == 0 {
            return Ok(());
        }
        let ctx = self.ctx;
        let plan = self.plan_for::<T>(
            nq,
            nb,
            dim,
            k,
            matches!(queries, Rows::Device(_)),
            matches!(base, Rows::Device(_)),
        )?;
        ctx.check_fits(plan.bytes, self.budget)?;
        let list = plan.list;

        let q_owned;
        let qm = match queries {
            Rows::Host(v) => {
                q_owned = DeviceMatrix::upload(ctx, v)?;
                &q_owned
            }
            Rows::Device(m) => m,
        };
        let stride = qm.stride() as u32;
        let mut qnorm = ctx.alloc_zeros::<f32>(nq)?;
        launch::exact_norms::<T>(
            ctx,
            &qm.rows_view(0, nq)?,
            nq as u32,
            stride,
            &mut qnorm.slice_mut(0..nq),
        )?;
        let mut top_d = ctx.upload(&vec![f32::INFINITY; nq * list])?;
        let mut top_i = ctx.upload(&vec![INVALID; nq * list])?;
        let mut bm = match base {
            Rows::Host(_) => Some(DeviceMatrix::<T>::with_capacity(ctx, plan.base_chunk, dim)?),
            Rows::Device(_) => None,
        };
        let mut bnorm = ctx.alloc_zeros::<f32>(plan.base_chunk)?;
        let ldd = plan.base_chunk.next_multiple_of(4);
        let mut dist = ctx.alloc_zeros::<f32>(plan.query_batch * ldd)?;

        let mut b0 = 0;
        while b0 < nb {
            if let Some(b) = build {
                b.check_cancelled()?;
            }
            let bc = plan.base_chunk.min(nb - b0);
            let bview = match (base, bm.as_mut()) {
                (Rows::Host(v), Some(m)) => {
                    m.upload_rows(ctx, v.slice_rows(b0..b0 + bc)?)?;
                    m.rows_view(0, bc)?
                }
                (Rows::Device(m), _) => m.rows_view(b0, b0 + bc)?,
                (Rows::Host(_), None) => {
                    return Err(Error::Gpu("internal: no base staging buffer".into()));
                }
            };
            if metric != Metric::InnerProduct {
                launch::exact_norms::<T>(
                    ctx,
                    &bview,
                    bc as u32,
                    stride,
                    &mut bnorm.slice_mut(0..bc),
                )?;
            }
            let mut q0 = 0;
            while q0 < nq {
                let qc = plan.query_batch.min(nq - q0);
                let tile = DistanceTile {
                    q: &qm.rows_view(q0, q0 + qc)?,
                    nq: qc as u32,
                    b: &bview,
                    nb: bc as u32,
                    stride,
                    qnorm: &qnorm.slice(q0..q0 + qc),
                    bnorm: &bnorm.slice(0..bc),
                    metric,
                };
                launch::exact_distances::<T>(
                    ctx,
                    &tile,
                    &mut dist.slice_mut(0..qc * ldd),
                    ldd as u32,
                )?;
                let sel = Select {
                    nq: qc as u32,
                    ldd: ldd as u32,
                    ncols: bc as u32,
                    base_offset: b0 as u32,
                    query_offset: q0 as u32,
                    exclude_self,
                    k: k as u32,
                    list: list as u32,
                };
                launch::exact_select(
                    ctx,
                    &sel,
                    &dist.slice(0..qc * ldd),
                    &mut top_d.slice_mut(q0 * list..(q0 + qc) * list),
                    &mut top_i.slice_mut(q0 * list..(q0 + qc) * list),
                )?;
                q0 += qc;
            }
            // Kernel faults surface here, chunk by chunk, rather than at the very end.
            ctx.synchronize()?;
            if let Some(b) = build {
                b.progress().advance(bc as u64);
            }
            b0 += bc;
        }
        let d = ctx.download(&top_d, nq * list)?;
        let ids = ctx.download(&top_i, nq * list)?;
        for q in 0..nq {
            let (oi, od) = out.row_mut(q);
            oi.copy_from_slice(&ids[q * list..q * list + k]);
            od.copy_from_slice(&d[q * list..q * list + k]);
            for (i, dd) in oi.iter_mut().zip(od.iter_mut()) {
                if *i == INVALID {
                    *dd = f32::INFINITY;
                }
            }
        }
        Ok(())
    }
}

/// One exact k-NN problem: the base and query sets, the metric, how many neighbours per query,
/// and whether each query is the base row of its index and must not be its own neighbour (the
/// k-NN graph).
#[derive(Clone, Copy)]
struct ExactJob<'a, T: Element> {
    base: Rows<'a, T>,
    queries: Rows<'a, T>,
    metric: Metric,
    k: usize,
    exclude_self: bool,
}

/// Where a vector set is: borrowed on the host (streamed in chunks) or already on the device.
#[derive(Clone, Copy)]
enum Rows<'a, T: Element> {
    Host(DatasetView<'a, T>),
    Device(&'a DeviceMatrix<T>),
}

impl<T: Element> Rows<'_, T> {
    fn rows(&self) -> usize {
        match self {
            Rows::Host(v) => v.rows(),
            Rows::Device(m) => m.rows(),
        }
    }

    fn dim(&self) -> usize {
        match self {
            Rows::Host(v) => v.dim(),
            Rows::Device(m) => m.dim(),
        }
    }
}

impl KnnGraphBuilder for ExactGpu<'_> {
    type Params = NoParams;

    fn name(&self) -> &'static str {
        "exact-gpu"
    }

    fn build<T: Element>(
        &self,
        data: DatasetView<'_, T>,
        metric: Metric,
        k: usize,
        _params: &NoParams,
        ctx: &BuildCtx,
    ) -> Result<KnnGraph> {
        ctx.progress().begin("exact-gpu", Some(data.rows() as u64));
        let g = self.knn_graph(data, metric, k, ctx);
        ctx.progress().end();
        g
    }
}

/// Brute-force search on the GPU as a [`Searcher`] (name `exact-gpu`): ignores the graph and
/// scans every base vector, like [`crate::ExactSearcher`] on the CPU.
impl<G: ?Sized> Searcher<G> for ExactGpu<'_> {
    type Params = NoParams;

    fn name(&self) -> &'static str {
        "exact-gpu"
    }

    fn search<T: Element>(
        &self,
        _graph: &G,
        data: DatasetView<'_, T>,
        queries: DatasetView<'_, T>,
        metric: Metric,
        _params: &NoParams,
        out: NeighborsMut<'_>,
    ) -> Result<SearchStats> {
        self.search_into(data, queries, metric, out)
    }
}
