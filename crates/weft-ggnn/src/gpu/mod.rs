//! GGNN on the GPU: [`GgnnGpu`], behind the `cuda` feature.
//!
//! The device side is [`GgnnBuild`] (module `device`, kernels in `kernels/ggnn/`): the phases of
//! [`GgnnCpu`](crate::GgnnCpu) in the same order with the same sorted best lists and bounded
//! queues and the same `hash3` sampling keys. The layer sizes and the sampled points of every
//! layer equal the CPU reference's for the same seed and parameters (distances are computed on
//! the GPU, so keys or distances that tie within rounding can order differently). The merge and
//! symmetric-link searches follow the same rules with four documented differences: a
//! per-search "seen" hash set replaces the CPU's membership test (it covers the best list, the
//! queue and the visited ring, as the CPU's, plus every id scored since its last rebuild, which
//! is then not scored again), the candidates of a popped row are scored and inserted as a batch,
//! a merge step pops two queue heads against the same bound and expands their rows as one batch
//! ([`GgnnTuning::merge_heads`]; the CPU pops the second after inserting the first's
//! candidates), and the inverse links are handed out with atomics instead of the CPU's
//! sequential `(z, i)` order. So the graph is valid and of the same quality (graph recall
//! within 0.02 of the CPU's, tested), not bit for bit the CPU's, and may differ between runs
//! where nodes fill up. `docs/ggnn.md` has the details.

use std::sync::Arc;
use std::time::Instant;

use weft_core::{BuildCtx, DatasetView, Element, GraphBuilder, Metric, NodeId, Result};
use weft_gpu::{DeviceMatrix, GpuContext, KernelModule};
use weft_graph::hier::HierGraph;

use crate::build::{FinishedLayers, check_inputs};
use crate::connect::hierarchy_entry_points;
use crate::{GgnnParams, GgnnStats};

mod device;

pub use device::{
    GgnnBuild, GgnnLayerOut, GgnnOut, GgnnPhaseTime, GgnnTuning, MAX_HEADS, SEARCH_WARPS,
    TAGS_MIN_ROW_BYTES, build_kernels,
};

/// The generated bindings of this crate's kernel module.
pub(crate) mod kernels {
    /// `kernels/ggnn`: brute force, sampling, merge and symmetric-link searches, ordering.
    #[allow(dead_code)]
    pub(crate) mod ggnn {
        include!(concat!(env!("OUT_DIR"), "/ggnn.rs"));
    }
}

/// This crate's kernel modules (for NVRTC checks and kernel reports).
pub fn kernel_modules() -> Vec<&'static KernelModule> {
    vec![&kernels::ggnn::MODULE]
}

/// The GGNN construction on one GPU (name `ggnn`, GPU back end); see the [module docs](self).
#[derive(Clone, Debug)]
pub struct GgnnGpu {
    ctx: Arc<GpuContext>,
    budget: Option<u64>,
    tuning: GgnnTuning,
}

impl GgnnGpu {
    /// GGNN on the GPU of `ctx`, within the default memory budget.
    pub fn new(ctx: Arc<GpuContext>) -> Self {
        GgnnGpu {
            ctx,
            budget: None,
            tuning: GgnnTuning::default(),
        }
    }

    /// Launch settings of the merge and symmetric-link searches (speed only; checked when a
    /// build starts, `Error::InvalidParams` when out of range).
    pub fn with_tuning(mut self, tuning: GgnnTuning) -> Self {
        self.tuning = tuning;
        self
    }

    /// Limits device memory to `bytes` (a build that does not fit fails with
    /// `Error::OutOfDeviceMemory` before allocating).
    pub fn with_budget(mut self, bytes: u64) -> Self {
        self.budget = Some(bytes);
        self
    }

    /// The GPU this builder runs on.
    pub fn context(&self) -> &Arc<GpuContext> {
        &self.ctx
    }

    fn device(&self) -> GgnnBuild<'_> {
        let b = GgnnBuild::new(&self.ctx).with_tuning(self.tuning);
        match self.budget {
            Some(bytes) => b.with_budget(bytes),
            None => b,
        }
    }

    /// Builds the hierarchy of vectors already on the device (the rows of `data` are the
    /// `data_host` view's; the host copy is used only for the input checks).
    pub fn build_device<T: Element>(
        &self,
        data: &DeviceMatrix<T>,
        data_host: DatasetView<'_, T>,
        metric: Metric,
        params: &GgnnParams,
        ctx: &BuildCtx,
    ) -> Result<(HierGraph, GgnnStats)> {
        self.run_device(data, data_host, metric, params, ctx, false)
            .map(|(g, s, _)| (g, s))
    }

    /// Like [`Self::build_device`], also timing every phase (the device is synchronised around
    /// each): the phases in order with their wall times, between the host's input check
    /// (`check`) and its assembly of the `HierGraph` (`assemble`).
    pub fn build_device_timed<T: Element>(
        &self,
        data: &DeviceMatrix<T>,
        data_host: DatasetView<'_, T>,
        metric: Metric,
        params: &GgnnParams,
        ctx: &BuildCtx,
    ) -> Result<(HierGraph, GgnnStats, Vec<GgnnPhaseTime>)> {
        self.run_device(data, data_host, metric, params, ctx, true)
    }

    fn run_device<T: Element>(
        &self,
        data: &DeviceMatrix<T>,
        data_host: DatasetView<'_, T>,
        metric: Metric,
        params: &GgnnParams,
        ctx: &BuildCtx,
        timing: bool,
    ) -> Result<(HierGraph, GgnnStats, Vec<GgnnPhaseTime>)> {
        let check_start = Instant::now();
        let z = check_inputs(data_host, params, ctx)?;
        let check_s = check_start.elapsed().as_secs_f64();
        // The spread entry points depend on the data alone: the host picks them while the
        // device runs the first phases; the entry-seeded merges wait for them before the first
        // merge into layer 0.
        let (out, spread) = std::thread::scope(|s| {
            let mut pending = (params.entry_points > 0).then(|| {
                s.spawn(|| {
                    let start = Instant::now();
                    let e = hierarchy_entry_points(data_host, metric, params, ctx, None);
                    (e, start.elapsed().as_secs_f64())
                })
            });
            let mut spread: Option<(Result<Vec<NodeId>>, f64)> = None;
            let join = |pending: &mut Option<std::thread::ScopedJoinHandle<'_, _>>,
                        spread: &mut Option<(Result<Vec<NodeId>>, f64)>| {
                if let Some(h) = pending.take() {
                    *spread = Some(h.join().expect("the entry-point thread panicked"));
                }
            };
            let mut seeds_source = || -> Result<Vec<NodeId>> {
                join(&mut pending, &mut spread);
                match spread.take() {
                    Some((Ok(e), seconds)) => {
                        let copy = e.clone();
                        spread = Some((Ok(e), seconds));
                        Ok(copy)
                    }
                    // The build fails with the picking's own error (a cancellation stays one).
                    Some((Err(e), _)) => Err(e),
                    None => Ok(Vec::new()),
                }
            };
            let seeded = params.entry_seeded_merges && params.entry_points > 0;
            let out = self.device().with_timing(timing).build(
                data,
                metric,
                &z,
                params,
                seeded.then_some(&mut seeds_source as &mut dyn FnMut() -> Result<Vec<NodeId>>),
                ctx,
            );
            join(&mut pending, &mut spread);
            (out, spread)
        });
        let out = out?;
        let (entry_points, spread_s) = match spread {
            Some((e, s)) => (Some(e?), s),
            None => (None, 0.0),
        };
        let mut phases = out.phases;
        let assemble_start = Instant::now();
        let finished = FinishedLayers {
            z,
            k: params.k_build,
            layers: out.layers.into_iter().map(|l| (l.ids, l.global)).collect(),
        };
        let (graph, repair, connect_s) =
            finished.assemble(entry_points, data_host, metric, params, ctx)?;
        let stats = GgnnStats {
            mean_nn1: out.mean_nn1,
            max_nn1: out.max_nn1,
            dropped_links: out.dropped_links,
            repair,
        };
        if timing {
            let host = |phase, seconds| GgnnPhaseTime {
                phase,
                layer: 0,
                from: 0,
                seconds,
                pops: 0,
                scored: 0,
                by_layer: Vec::new(),
            };
            phases.insert(0, host("check", check_s));
            // On the host: the spread entry points (`entry_points`, picked while the device
            // built: not on the build's critical path), the connectivity repair (`connect`),
            // then row compaction and the hierarchy's assembly (`assemble`).
            phases.push(host("entry_points", spread_s));
            phases.push(host("connect", connect_s));
            let assemble_s = assemble_start.elapsed().as_secs_f64() - connect_s;
            phases.push(host("assemble", assemble_s));
        }
        Ok((graph, stats, phases))
    }

    /// Like [`GraphBuilder::build`], with the 1-NN statistics and the dropped-link count.
    pub fn build_with_stats<T: Element>(
        &self,
        data: DatasetView<'_, T>,
        metric: Metric,
        params: &GgnnParams,
        ctx: &BuildCtx,
    ) -> Result<(HierGraph, GgnnStats)> {
        check_inputs(data, params, ctx)?;
        self.ctx.check_fits(
            DeviceMatrix::<T>::bytes_for(data.rows(), data.dim()),
            self.budget,
        )?;
        let dev = DeviceMatrix::upload(&self.ctx, data)?;
        self.build_device(&dev, data, metric, params, ctx)
    }
}

impl GraphBuilder for GgnnGpu {
    type Params = GgnnParams;
    type Output = HierGraph;

    fn name(&self) -> &'static str {
        "ggnn"
    }

    fn build<T: Element>(
        &self,
        data: DatasetView<'_, T>,
        metric: Metric,
        params: &GgnnParams,
        ctx: &BuildCtx,
    ) -> Result<HierGraph> {
        self.build_with_stats(data, metric, params, ctx)
            .map(|(g, _)| g)
    }
}
