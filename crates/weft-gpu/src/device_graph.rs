//! Graphs left on the device between stages without a host round trip:
//!
//! - [`DeviceKnnGraph`]: a k-NN graph (GNND builds it, CAGRA optimisation reads it). Layout:
//!   `n` rows of `k` entries, row-major; `ids[v * k + j]` and `dists[v * k + j]` are the `j`-th
//!   neighbour of `v` and its distance, ascending by distance, padding ([`INVALID`], infinity)
//!   last: the layout of [`KnnGraph`].
//! - [`DeviceFixedGraph`]: a search graph of fixed out-degree (GRNND and CAGRA build it, the
//!   searches read it): `n` rows of `degree` ids, short rows padded with [`INVALID`] at the end
//!   (the layout of [`FixedDegreeGraph`]).

use weft_core::FixedDegreeGraph;
use weft_core::{Error, INVALID, KnnGraph, NodeId, Result};

use crate::context::GpuContext;
use crate::memory::DeviceBuffer;

/// A k-NN graph in device memory (see the module documentation for the layout).
pub struct DeviceKnnGraph {
    n: usize,
    k: usize,
    ids: DeviceBuffer<NodeId>,
    dists: DeviceBuffer<f32>,
}

impl std::fmt::Debug for DeviceKnnGraph {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeviceKnnGraph")
            .field("n", &self.n)
            .field("k", &self.k)
            .finish()
    }
}

impl DeviceKnnGraph {
    /// Device bytes a graph of `n` x `k` takes.
    pub fn bytes_for(n: usize, k: usize) -> u64 {
        n as u64 * k as u64 * 8
    }

    /// Wraps device buffers of at least `n * k` elements each, in the layout of the module
    /// documentation.
    pub fn from_parts(
        n: usize,
        k: usize,
        ids: DeviceBuffer<NodeId>,
        dists: DeviceBuffer<f32>,
    ) -> Result<Self> {
        let len = n
            .checked_mul(k)
            .ok_or_else(|| Error::InvalidInput("graph size overflows".into()))?;
        if ids.len() < len || dists.len() < len {
            return Err(Error::InvalidInput(format!(
                "device graph {n} x {k}: buffers of {} ids and {} distances",
                ids.len(),
                dists.len()
            )));
        }
        Ok(DeviceKnnGraph { n, k, ids, dists })
    }

    /// Copies a host graph to the device.
    pub fn upload(ctx: &GpuContext, graph: &KnnGraph) -> Result<Self> {
        let len = graph.n() * graph.k();
        let mut ids = ctx.alloc_zeros::<NodeId>(len)?;
        let mut dists = ctx.alloc_zeros::<f32>(len)?;
        if len > 0 {
            // Plain (pageable) copies: one transfer each, synchronised before the host data can
            // go away.
            ctx.copy_to_device(graph.ids(), &mut ids.slice_mut(0..len))?;
            ctx.copy_to_device(graph.dists(), &mut dists.slice_mut(0..len))?;
        }
        Self::from_parts(graph.n(), graph.k(), ids, dists)
    }

    /// Copies the graph back to the host (the rows as they are; see [`KnnGraph::validate`]).
    pub fn download(&self, ctx: &GpuContext) -> Result<KnnGraph> {
        let len = self.n * self.k;
        let mut ids = vec![0 as NodeId; len];
        let mut dists = vec![0f32; len];
        if len > 0 {
            ctx.copy_to_host(&self.ids.slice(0..len), &mut ids[..])?;
            ctx.copy_to_host(&self.dists.slice(0..len), &mut dists[..])?;
        }
        for (d, i) in dists.iter_mut().zip(&ids) {
            if *i == INVALID {
                *d = f32::INFINITY;
            }
        }
        KnnGraph::from_parts(self.n, self.k, ids, dists)
    }

    /// Number of vertices.
    pub fn n(&self) -> usize {
        self.n
    }

    /// Entries per row.
    pub fn k(&self) -> usize {
        self.k
    }

    /// The neighbour ids (at least `n * k`, row-major), for the stages that read the graph on
    /// the device.
    pub fn ids(&self) -> &DeviceBuffer<NodeId> {
        &self.ids
    }

    /// The distances (at least `n * k`, row-major), for the stages that read the graph on the
    /// device.
    pub fn dists(&self) -> &DeviceBuffer<f32> {
        &self.dists
    }
}

/// A search graph of fixed out-degree in device memory (see the module documentation).
pub struct DeviceFixedGraph {
    n: usize,
    degree: usize,
    ids: DeviceBuffer<NodeId>,
}

impl std::fmt::Debug for DeviceFixedGraph {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeviceFixedGraph")
            .field("n", &self.n)
            .field("degree", &self.degree)
            .finish()
    }
}

impl DeviceFixedGraph {
    /// Number of vertices.
    pub fn n(&self) -> usize {
        self.n
    }

    /// Slots per row.
    pub fn degree(&self) -> usize {
        self.degree
    }

    /// Copies a host graph to the device (its entry points stay on the host).
    pub fn upload(ctx: &GpuContext, graph: &FixedDegreeGraph) -> Result<Self> {
        Ok(DeviceFixedGraph {
            n: graph.n(),
            degree: graph.degree(),
            ids: ctx.upload(graph.ids())?,
        })
    }

    /// The ids (at least `n * degree`, row-major), for the kernels that read the graph.
    pub fn ids(&self) -> &DeviceBuffer<NodeId> {
        &self.ids
    }

    /// Wraps device rows built by a stage: at least `n * degree` ids.
    pub fn from_parts(n: usize, degree: usize, ids: DeviceBuffer<NodeId>) -> Result<Self> {
        crate::launch::need(ids.len(), n as u64 * degree as u64, "device graph ids")?;
        Ok(DeviceFixedGraph { n, degree, ids })
    }

    /// Copies the graph to the host (no entry points).
    pub fn download(&self, ctx: &GpuContext) -> Result<FixedDegreeGraph> {
        let ids = ctx.download(&self.ids, self.n * self.degree)?;
        FixedDegreeGraph::new(self.n, self.degree, ids)
    }
}
