//! What the CAGRA and GGNN searches on the GPU share ([`super::cagra`], [`super::ggnn`]): the argument checks, the uploads that precede a search, the work
//! buffers kept across searches (grown, never shrunk, dropped when handed to another stream),
//! the copying of results and counters back to the host, and a session's debug output.

use weft_core::{
    DatasetView, Element, Error, FixedDegreeGraph, Neighbors, NeighborsMut, NodeId, Result,
    SearchStats,
};
use weft_gpu::{DeviceBuffer, DeviceCopy, DeviceFixedGraph, DeviceMatrix, GpuContext};

/// The graph must have one vertex per data row.
pub(crate) fn check_graph_rows(graph_n: usize, rows: usize) -> Result<()> {
    if graph_n != rows {
        return Err(Error::dim_mismatch(
            "graph vertices vs data rows",
            rows,
            graph_n,
        ));
    }
    Ok(())
}

/// Queries must have the data's dimension.
pub(crate) fn check_query_dim(data_dim: usize, query_dim: usize) -> Result<()> {
    if query_dim != data_dim {
        return Err(Error::dim_mismatch(
            "base vs query dimension",
            data_dim,
            query_dim,
        ));
    }
    Ok(())
}

/// Entry points must be vertices.
pub(crate) fn check_entries(entries: &[NodeId], n: usize) -> Result<()> {
    if let Some(&e) = entries.iter().find(|&&e| e as usize >= n) {
        return Err(Error::InvalidGraph(format!(
            "entry point {e} is out of range (n = {n})"
        )));
    }
    Ok(())
}

/// The shapes of a search of host data through a host graph: queries of the data's dimension,
/// one graph vertex per data row.
pub(crate) fn check_host_shapes<T: Element>(
    data: DatasetView<'_, T>,
    graph: &FixedDegreeGraph,
    queries: DatasetView<'_, T>,
) -> Result<()> {
    data.check_same_dim(&queries, "base vs query dimension")?;
    check_graph_rows(graph.n(), data.rows())
}

/// What a search on the device reads: the data, its graph (one vertex per data row), the
/// entry points every query starts from (may be empty; see each search for what it does then)
/// and the queries (of the data's dimension).
#[derive(Clone, Copy, Debug)]
pub struct DeviceSearchInputs<'a, T: Element> {
    /// The data rows.
    pub data: &'a DeviceMatrix<T>,
    /// The graph over the data's rows.
    pub graph: &'a DeviceFixedGraph,
    /// The entry points.
    pub entries: &'a [NodeId],
    /// The queries.
    pub queries: &'a DeviceMatrix<T>,
}

impl<T: Element> DeviceSearchInputs<'_, T> {
    /// The shapes: queries of the data's dimension, one graph vertex per data row.
    pub(crate) fn check_shapes(&self) -> Result<()> {
        check_query_dim(self.data.dim(), self.queries.dim())?;
        check_graph_rows(self.graph.n(), self.data.rows())
    }
}

/// Bytes that `data` and `graph` take on the device.
fn resident_bytes<T: Element>(data: DatasetView<'_, T>, graph: &FixedDegreeGraph) -> u64 {
    DeviceMatrix::<T>::bytes_for(data.rows(), data.dim()) + graph.ids().len() as u64 * 4
}

/// `data` and `graph` uploaded to `ctx` after checking that they fit in `budget` (`None`: free
/// memory).
pub(crate) fn upload_resident<T: Element>(
    ctx: &GpuContext,
    data: DatasetView<'_, T>,
    graph: &FixedDegreeGraph,
    budget: Option<u64>,
) -> Result<(DeviceMatrix<T>, DeviceFixedGraph)> {
    ctx.check_fits(resident_bytes(data, graph), budget)?;
    let d = DeviceMatrix::upload(ctx, data)?;
    let g = DeviceFixedGraph::upload(ctx, graph)?;
    Ok((d, g))
}

/// Data, queries and graph uploaded to `ctx` for one search, after checking that they and
/// `extra` more bytes fit in `budget` (`None`: free memory).
pub(crate) fn upload_search<T: Element>(
    ctx: &GpuContext,
    data: DatasetView<'_, T>,
    graph: &FixedDegreeGraph,
    queries: DatasetView<'_, T>,
    extra: u64,
    budget: Option<u64>,
) -> Result<(DeviceMatrix<T>, DeviceMatrix<T>, DeviceFixedGraph)> {
    let upload = DeviceMatrix::<T>::bytes_for(data.rows(), data.dim())
        + DeviceMatrix::<T>::bytes_for(queries.rows(), data.dim())
        + graph.ids().len() as u64 * 4
        + extra;
    ctx.check_fits(upload, budget)?;
    let d = DeviceMatrix::upload(ctx, data)?;
    let q = DeviceMatrix::upload(ctx, queries)?;
    let g = DeviceFixedGraph::upload(ctx, graph)?;
    Ok((d, q, g))
}

/// Defines a search's work buffers: a struct of the named `Option<DeviceBuffer<_>>` slots, plus
/// the stream they were made on and the count of device allocations made, with `new`,
/// `bytes`, `allocations`, a `Debug` showing the bytes and allocations, and `adopt` (drops the
/// buffers when handed to another stream than the context's, keeping the count).
macro_rules! work_buffers {
    (
        $(#[$meta:meta])*
        pub struct $name:ident { $($field:ident: $elem:ty,)* }
    ) => {
        $(#[$meta])*
        #[derive(Default)]
        pub struct $name {
            /// The stream the buffers belong to (its address; 0 before the first search).
            owner: usize,
            $($field: Option<weft_gpu::DeviceBuffer<$elem>>,)*
            allocations: u64,
            /// The entry points the `entries` buffer holds (copied by an earlier search), so
            /// that a steady state of searches does not copy them again.
            entries_held: Vec<weft_core::NodeId>,
        }

        impl std::fmt::Debug for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.debug_struct(stringify!($name))
                    .field("bytes", &self.bytes())
                    .field("allocations", &self.allocations)
                    .finish()
            }
        }

        impl $crate::gpu::common::WorkBuffers for $name {
            fn allocations_mut(&mut self) -> &mut u64 {
                &mut self.allocations
            }
        }

        impl $name {
            /// Empty buffers (nothing allocated until the first search).
            pub fn new() -> Self {
                Self::default()
            }

            /// Device bytes held now.
            pub fn bytes(&self) -> u64 {
                [$($crate::gpu::common::slot_bytes(&self.$field)),*]
                    .into_iter()
                    .sum()
            }

            /// Device allocations made so far (a steady state makes none).
            pub fn allocations(&self) -> u64 {
                self.allocations
            }

            /// Drops buffers of another context's stream.
            fn adopt(&mut self, ctx: &weft_gpu::GpuContext) {
                let owner = ctx.stream_id();
                if self.owner != owner {
                    let allocations = self.allocations;
                    *self = $name {
                        owner,
                        allocations,
                        ..Default::default()
                    };
                }
            }
        }
    };
}
pub(crate) use work_buffers;

/// A search's work buffers (made by `work_buffers!`).
pub(crate) trait WorkBuffers {
    /// The count of device allocations made for them, for the query buffer's to join.
    fn allocations_mut(&mut self) -> &mut u64;
}

/// What a resident search session lends its `search_into` of host queries: its context and
/// budget, the data's dimension, its query buffer and its work buffers.
pub(crate) struct SessionQueries<'s, T: Element, B> {
    /// The session's context.
    ctx: &'s GpuContext,
    /// The session's memory budget (`None`: free memory).
    budget: Option<u64>,
    /// The dimension of the resident data.
    data_dim: usize,
    /// The query buffer, grown when a batch is larger than any before.
    slot: &'s mut Option<DeviceMatrix<T>>,
    /// The work buffers.
    bufs: &'s mut B,
}

impl<'s, T: Element, B: WorkBuffers> SessionQueries<'s, T, B> {
    /// A session's context, budget, data dimension, query buffer and work buffers.
    pub(crate) fn new(
        ctx: &'s GpuContext,
        budget: Option<u64>,
        data_dim: usize,
        slot: &'s mut Option<DeviceMatrix<T>>,
        bufs: &'s mut B,
    ) -> Self {
        SessionQueries {
            ctx,
            budget,
            data_dim,
            slot,
            bufs,
        }
    }

    /// Searches host `queries` into `out` (`out.k()` results for each of the `out.rows()`
    /// queries): checks the queries' dimension and `out`'s rows, then `check(k)` (the search's
    /// own checks that need no device memory), all before any upload; no queries give empty
    /// statistics; else the queries are copied into the query buffer and `search` runs on them
    /// with the work buffers, writing the results straight into `out`.
    pub(crate) fn search(
        self,
        queries: DatasetView<'_, T>,
        out: NeighborsMut<'_>,
        check: impl FnOnce(usize) -> Result<()>,
        search: impl FnOnce(&mut B, &DeviceMatrix<T>, NeighborsMut<'_>) -> Result<SearchStats>,
    ) -> Result<SearchStats> {
        check_query_dim(self.data_dim, queries.dim())?;
        check_out_rows(&out, queries.rows())?;
        check(out.k())?;
        if queries.rows() == 0 {
            return Ok(SearchStats::default());
        }
        let q = DeviceMatrix::upload_reusing(
            self.slot,
            self.ctx,
            queries,
            self.budget,
            self.bufs.allocations_mut(),
        )?;
        search(self.bufs, q, out)
    }
}

/// Device bytes the buffer in `slot` holds.
pub(crate) fn slot_bytes<T: DeviceCopy>(slot: &Option<DeviceBuffer<T>>) -> u64 {
    slot.as_ref().map_or(0, DeviceBuffer::bytes)
}

/// Bytes a buffer must newly allocate to hold `len` (at least 1) elements.
pub(crate) fn grow_bytes<T: DeviceCopy>(slot: &Option<DeviceBuffer<T>>, len: usize) -> u64 {
    let len = len.max(1);
    match slot {
        Some(s) if s.len() >= len => 0,
        _ => len as u64 * std::mem::size_of::<T>() as u64,
    }
}

/// The buffer in `slot`, taken out, replaced by a larger one when it holds fewer than `len`
/// (at least 1) elements.
pub(crate) fn take_grown<T: DeviceCopy>(
    ctx: &GpuContext,
    slot: &mut Option<DeviceBuffer<T>>,
    len: usize,
    allocations: &mut u64,
) -> Result<DeviceBuffer<T>> {
    let len = len.max(1);
    match slot.take() {
        Some(s) if s.len() >= len => Ok(s),
        old => {
            drop(old);
            *allocations += 1;
            ctx.alloc_zeros::<T>(len)
        }
    }
}

/// Copies `entries` (when there are any) to the front of `entry_buf`, unless `held` says the
/// buffer already holds them (`fresh`: the buffer was just allocated, so it holds nothing), and
/// zeroes `counters`. `held` records what the buffer holds afterwards.
pub(crate) fn upload_entries_zero_counters(
    ctx: &GpuContext,
    entries: &[NodeId],
    entry_buf: &mut DeviceBuffer<u32>,
    fresh: bool,
    held: &mut Vec<NodeId>,
    counters: &mut DeviceBuffer<u64>,
) -> Result<()> {
    if fresh {
        held.clear();
    }
    if !entries.is_empty() && held.as_slice() != entries {
        // Forgotten first: a copy that fails midway leaves the buffer's contents unknown.
        held.clear();
        ctx.copy_to_device(entries, &mut entry_buf.slice_mut(0..entries.len()))?;
        held.extend_from_slice(entries);
    }
    ctx.zero(&mut counters.view_mut())
}

/// Copies the `cnt * k` results of queries `start..start + cnt` from the device straight into
/// their rows of `out` (`k = out.k()`).
pub(crate) fn download_results(
    ctx: &GpuContext,
    ids: &DeviceBuffer<u32>,
    dists: &DeviceBuffer<f32>,
    out: &mut NeighborsMut<'_>,
    start: usize,
    cnt: usize,
) -> Result<()> {
    let len = cnt * out.k();
    let mut rows = out.rows_mut(start..start + cnt);
    let (row_ids, row_dists) = rows.buffers_mut();
    ctx.copy_to_host(&ids.slice(0..len), row_ids)?;
    ctx.copy_to_host(&dists.slice(0..len), row_dists)
}

/// One batch of a search's results on the device: `k` (id, distance) pairs for each of the
/// queries `start..start + cnt`, in the first `cnt * k` entries of `ids` and `dists`, with the
/// search counters of all batches so far.
pub(crate) struct ListChunk<'a> {
    /// The ids, `[query][k]`.
    pub(crate) ids: &'a DeviceBuffer<u32>,
    /// The distances, `[query][k]`.
    pub(crate) dists: &'a DeviceBuffer<f32>,
    /// The batch's first query.
    pub(crate) start: usize,
    /// The batch's queries.
    pub(crate) cnt: usize,
    /// The search counters (hops, distance computations) of all batches so far.
    pub(crate) counters: &'a DeviceBuffer<u64>,
    /// Whether this is the last batch.
    pub(crate) last: bool,
}

/// The last batch's [`download_results`] together with the search counters of its `nq`
/// queries (see [`download_stats`]): small results (under the pinned-transfer threshold, e.g.
/// batch 1) are queued with the counters and waited for once, one round trip instead of three.
pub(crate) fn download_last_results(
    ctx: &GpuContext,
    chunk: &ListChunk<'_>,
    out: &mut NeighborsMut<'_>,
    nq: usize,
) -> Result<SearchStats> {
    let ListChunk {
        ids,
        dists,
        start,
        cnt,
        counters,
        ..
    } = *chunk;
    let len = cnt * out.k();
    if len * 4 >= weft_gpu::context::PINNED_TRANSFER_THRESHOLD {
        download_results(ctx, ids, dists, out, start, cnt)?;
        return download_stats(ctx, counters, nq);
    }
    let mut rows = out.rows_mut(start..start + cnt);
    let (row_ids, row_dists) = rows.buffers_mut();
    let mut c = [0u64; 2];
    let mut copies = ctx.host_copies()?;
    copies.add(&ids.slice(0..len), row_ids)?;
    copies.add(&dists.slice(0..len), row_dists)?;
    copies.add(&counters.slice(0..2), &mut c)?;
    copies.finish()?;
    Ok(SearchStats {
        queries: nq as u64,
        distance_computations: c[1],
        hops: c[0],
    })
}

/// Result buffers for `rows` queries of `k` neighbours each; `k = 0` is an invalid parameter.
pub(crate) fn result_buffers(rows: usize, k: usize) -> Result<Neighbors> {
    if k == 0 {
        return Err(Error::invalid_param("k", "k must be at least 1"));
    }
    Ok(Neighbors::new(rows, k))
}

/// The output buffers must hold one row per query.
pub(crate) fn check_out_rows(out: &NeighborsMut<'_>, nq: usize) -> Result<()> {
    if out.rows() != nq {
        return Err(Error::dim_mismatch(
            "result rows vs queries",
            nq,
            out.rows(),
        ));
    }
    Ok(())
}

/// The statistics of `nq` queries from the search counters (hops, distance computations).
pub(crate) fn download_stats(
    ctx: &GpuContext,
    counters: &DeviceBuffer<u64>,
    nq: usize,
) -> Result<SearchStats> {
    let c = ctx.download(counters, 2)?;
    Ok(SearchStats {
        queries: nq as u64,
        distance_computations: c[1],
        hops: c[0],
    })
}

/// A resident search session's debug output: its data, graph degree, entry points, query
/// buffer capacity and work buffers.
pub(crate) fn fmt_session<T: Element>(
    f: &mut std::fmt::Formatter<'_>,
    name: &str,
    data: &DeviceMatrix<T>,
    graph: &DeviceFixedGraph,
    entries: &[NodeId],
    queries: &Option<DeviceMatrix<T>>,
    bufs: &dyn std::fmt::Debug,
) -> std::fmt::Result {
    f.debug_struct(name)
        .field("data", data)
        .field("degree", &graph.degree())
        .field("entries", &entries.len())
        .field(
            "query_capacity",
            &queries.as_ref().map_or(0, |q| q.capacity()),
        )
        .field("buffers", bufs)
        .finish()
}
