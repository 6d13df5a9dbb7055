//! [`IndexBuilder`]: a typed index build, with no JSON and no algorithm strings.

use std::sync::Arc;

use ndarray::ArrayView2;
use weft_core::{BuildCtx, CancelToken, DatasetView, Element, Error, Metric, Progress, Result};

use crate::algorithm::Algorithm;
use crate::index::Index;
use crate::input::IndexData;
use crate::registry::{Backend, GpuStatus, Registry};

/// How to build an [`Index`]: the algorithm with its typed parameters, the metric, where it
/// runs, the seed, the threads and a cancellation token. Made by [`Index::builder`]; one builder
/// can build several indexes.
///
/// Defaults: [`Metric::L2Squared`], [`Backend::Auto`], seed 0, rayon's global thread pool, no
/// cancellation, no progress reports, the GPU found by [`GpuStatus::probe`].
///
/// ```no_run
/// use weft::{Algorithm, Backend, CagraParams, Index, Metric, SearchParams};
/// # fn main() -> weft::Result<()> {
/// let base = weft::io::read::<f32>("base.fbin", &weft::io::ReadOptions::new())?;
/// let index = Index::builder(Algorithm::Cagra(CagraParams::default()))
///     .metric(Metric::L2Squared)
///     .backend(Backend::Auto)
///     .threads(2)
///     .seed(42)
///     .build(base)?;
/// # Ok(()) }
/// ```
///
/// The build goes through the [`Registry`] entry of [`Algorithm::name`] with the parameters of
/// [`Algorithm::params_json`] and [`Algorithm::k`]: the same graph, for the same seed, as
/// [`Index::build_with`] given that JSON.
#[derive(Clone)]
#[must_use]
pub struct IndexBuilder {
    algorithm: Algorithm,
    metric: Metric,
    backend: Backend,
    seed: u64,
    threads: Option<usize>,
    cancel: CancelToken,
    progress: Option<Arc<dyn Progress>>,
    gpu: Option<GpuStatus>,
    device: Option<usize>,
}

impl std::fmt::Debug for IndexBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IndexBuilder")
            .field("algorithm", &self.algorithm)
            .field("metric", &self.metric)
            .field("backend", &self.backend)
            .field("seed", &self.seed)
            .field("threads", &self.threads)
            .field("cancelled", &self.cancel.is_cancelled())
            .field("progress", &self.progress.is_some())
            .field("gpu", &self.gpu)
            .field("device", &self.device)
            .finish()
    }
}

impl Index {
    /// A typed build of `algorithm`: set the metric, backend, seed, threads, ... on the
    /// [`IndexBuilder`], then [`IndexBuilder::build`] the data.
    pub fn builder(algorithm: Algorithm) -> IndexBuilder {
        IndexBuilder::new(algorithm)
    }
}

impl IndexBuilder {
    /// A build of `algorithm` with the defaults listed on [`IndexBuilder`].
    pub fn new(algorithm: Algorithm) -> Self {
        IndexBuilder {
            algorithm,
            metric: Metric::default(),
            backend: Backend::Auto,
            seed: 0,
            threads: None,
            cancel: CancelToken::new(),
            progress: None,
            gpu: None,
            device: None,
        }
    }

    /// The distance the graph is built for (and the index searched with).
    pub fn metric(mut self, metric: Metric) -> Self {
        self.metric = metric;
        self
    }

    /// Where the build runs (see [`Backend`]: `Cpu` and `Gpu` are requirements, `Auto` the GPU
    /// when usable and the algorithm has a GPU back end).
    pub fn backend(mut self, backend: Backend) -> Self {
        self.backend = backend;
        self
    }

    /// The seed: the same seed and parameters give the same graph on the CPU.
    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = seed;
        self
    }

    /// Builds on a pool of `threads` threads (at least 1; checked by the build) instead of
    /// rayon's global pool.
    pub fn threads(mut self, threads: usize) -> Self {
        self.threads = Some(threads);
        self
    }

    /// A token to cancel the build with: a cancelled build returns [`Error::Cancelled`].
    pub fn cancel(mut self, token: CancelToken) -> Self {
        self.cancel = token;
        self
    }

    /// Reports the build's progress to `progress`.
    pub fn progress(mut self, progress: Arc<dyn Progress>) -> Self {
        self.progress = Some(progress);
        self
    }

    /// Builds with this GPU status instead of probing for a GPU (e.g. to share one probe, or
    /// [`GpuStatus::Unavailable`] to keep [`Backend::Auto`] on the CPU).
    pub fn gpu(mut self, gpu: GpuStatus) -> Self {
        self.gpu = Some(gpu);
        self
    }

    /// Builds on CUDA device `ordinal` (default: the default device, `$WEFT_GPU_DEVICE` or
    /// else 0); the index's GPU searches then run there too ([`Index::device`]). A device that
    /// cannot be used (missing, no driver) fails the build with an [`Error::Unsupported`] that
    /// names it, whatever the backend: a device asked for is never replaced by the CPU.
    /// [`IndexBuilder::gpu`], when given, takes precedence.
    pub fn device(mut self, ordinal: usize) -> Self {
        self.device = Some(ordinal);
        self
    }

    /// This build on CUDA device `ordinal` (as [`IndexBuilder::device`]), even when a GPU was
    /// given with [`IndexBuilder::gpu`]: what a sharded build does for each device.
    pub(crate) fn on_device(mut self, ordinal: usize) -> Self {
        self.gpu = None;
        self.device = Some(ordinal);
        self
    }

    /// The algorithm and its parameters.
    pub fn algorithm(&self) -> &Algorithm {
        &self.algorithm
    }

    /// The context the build runs with: seed, threads, cancellation, progress.
    pub fn build_ctx(&self) -> BuildCtx {
        let ctx = BuildCtx::new(self.seed)
            .with_threads(self.threads)
            .with_cancel(self.cancel.clone());
        match &self.progress {
            Some(p) => ctx.with_progress(Arc::clone(p)),
            None => ctx,
        }
    }

    /// Builds the index of `data`: any [`IndexData`], i.e. an [`AnyDataset`](weft_io::AnyDataset), a
    /// [`weft_core::Dataset`] (both moved into the index), or borrowed vectors, copied: a
    /// [`DatasetView`], a 2-D `ndarray` array ([`ArrayView2`], `&Array2`, any memory layout) or
    /// a flat row-major slice with its dimension, `(&[T], dim)`.
    pub fn build(&self, data: impl IndexData) -> Result<Index> {
        if self.threads == Some(0) {
            return Err(Error::invalid_param(
                "threads",
                "the thread count must be at least 1",
            ));
        }
        let params = self.algorithm.params_json()?;
        let gpu = match &self.gpu {
            Some(gpu) => gpu.clone(),
            None => GpuStatus::require(self.device)?,
        };
        let registry = Registry::with_gpu(gpu);
        let request = crate::BuildRequest {
            algorithm: self.algorithm.name(),
            backend: Some(self.backend),
            params: &params,
            k: self.algorithm.k(),
        };
        Index::build_with(&registry, data, self.metric, request, &self.build_ctx())
    }

    /// Builds from a borrowed view (the vectors are copied into the index):
    /// [`IndexBuilder::build`], which takes views too.
    pub fn build_from_view<T: Element>(&self, data: DatasetView<'_, T>) -> Result<Index> {
        self.build(data)
    }

    /// Builds from a 2-D `ndarray` array (rows are vectors; any memory layout; copied):
    /// [`IndexBuilder::build`], which takes arrays too.
    pub fn build_from_array<T: Element>(&self, data: ArrayView2<'_, T>) -> Result<Index> {
        self.build(data)
    }
}
