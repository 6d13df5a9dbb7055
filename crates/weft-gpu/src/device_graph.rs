//! [`DeviceKnnGraph`]: a k-NN graph left on the device between stages (GNND builds it, CAGRA
//! optimisation and search read it) without a host round trip.
//!
//! Layout: `n` rows of `k` entries, row-major; `ids[v * k + j]` and `dists[v * k + j]` are the
//! `j`-th neighbour of `v` and its distance, ascending by distance, padding ([`INVALID`],
//! infinity) last: the layout of [`KnnGraph`].

use cudarc::driver::CudaSlice;
use weft_core::{Error, INVALID, KnnGraph, NodeId, Result};

use crate::context::{GpuContext, gpu_err};

/// A k-NN graph in device memory (see the module documentation for the layout).
pub struct DeviceKnnGraph {
    n: usize,
    k: usize,
    ids: CudaSlice<NodeId>,
    dists: CudaSlice<f32>,
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

    /// Wraps device buffers of at least `n * k` elements each.
    pub(crate) fn from_parts(
        n: usize,
        k: usize,
        ids: CudaSlice<NodeId>,
        dists: CudaSlice<f32>,
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
            ctx.stream()
                .memcpy_htod(graph.ids(), &mut ids.slice_mut(0..len))
                .map_err(gpu_err("copy graph ids to the device"))?;
            ctx.stream()
                .memcpy_htod(graph.dists(), &mut dists.slice_mut(0..len))
                .map_err(gpu_err("copy graph distances to the device"))?;
            ctx.synchronize()?;
        }
        Self::from_parts(graph.n(), graph.k(), ids, dists)
    }

    /// Copies the graph back to the host (the rows as they are; see [`KnnGraph::validate`]).
    pub fn download(&self, ctx: &GpuContext) -> Result<KnnGraph> {
        let len = self.n * self.k;
        let mut ids = vec![0 as NodeId; len];
        let mut dists = vec![0f32; len];
        if len > 0 {
            ctx.stream()
                .memcpy_dtoh(&self.ids.slice(0..len), &mut ids[..])
                .map_err(gpu_err("copy graph ids from the device"))?;
            ctx.stream()
                .memcpy_dtoh(&self.dists.slice(0..len), &mut dists[..])
                .map_err(gpu_err("copy graph distances from the device"))?;
            ctx.synchronize()?;
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

    /// The neighbour ids (`n * k`, row-major), for the stages that read the graph on the device.
    #[allow(dead_code)]
    pub(crate) fn ids(&self) -> &CudaSlice<NodeId> {
        &self.ids
    }

    /// The distances (`n * k`, row-major), for the stages that read the graph on the device.
    #[allow(dead_code)]
    pub(crate) fn dists(&self) -> &CudaSlice<f32> {
        &self.dists
    }
}
