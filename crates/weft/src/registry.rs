//! The registry of algorithms by name, type-erased for the CLI and the benchmarks.
//!
//! Each entry adapts one typed builder ([`KnnGraphBuilder`] or [`GraphBuilder`]) to
//! [`DynBuilder`]: JSON parameters in (merged over the algorithm's defaults; unknown keys are an
//! error), any element type, a [`StoredGraph`] out. An algorithm that is not implemented is not
//! in the registry: asking for it gives a clear [`Error::Unsupported`].

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use weft_core::{BuildCtx, Error, GraphBuilder, KnnGraphBuilder, Metric, Params, Result};
use weft_graph::storage::StoredGraph;
use weft_io::AnyDataset;

/// Where a build or a search runs: the one vocabulary of the library, the command line
/// (`--backend auto|cpu|gpu`) and [`crate::SearchParams::backend`].
///
/// [`Backend::Auto`], the default everywhere, picks the GPU when this build has GPU support (the
/// `cuda` feature) and a GPU is usable, else the CPU; a build of an algorithm with one back end
/// only (e.g. `rnndescent` on the CPU, `grnnd` on the GPU) uses that one. [`Backend::Cpu`] and
/// [`Backend::Gpu`] are requirements: an error when they cannot run, never a silent fallback.
/// Where something *did* run ([`AlgorithmInfo::backend`], the backend a search reports) is
/// always `Cpu` or `Gpu`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Backend {
    /// The GPU when one is usable and the work has a GPU back end, else the CPU.
    #[default]
    Auto,
    /// On the CPU (rayon).
    Cpu,
    /// On an NVIDIA GPU.
    Gpu,
}

impl Backend {
    /// `auto`, `cpu` or `gpu`.
    pub fn name(self) -> &'static str {
        match self {
            Backend::Auto => "auto",
            Backend::Cpu => "cpu",
            Backend::Gpu => "gpu",
        }
    }

    /// The back end required, `None` for [`Backend::Auto`] (the registry's choice).
    pub fn required(self) -> Option<Backend> {
        match self {
            Backend::Auto => None,
            b => Some(b),
        }
    }
}

/// What an algorithm builds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Produces {
    /// A k-NN graph; the build takes `k`.
    KnnGraph,
    /// A search graph; its degree is a parameter.
    SearchGraph,
}

/// A description of one registered algorithm.
#[derive(Clone, Debug, Serialize)]
pub struct AlgorithmInfo {
    /// The name used on the command line (`nndescent`, ...).
    pub name: &'static str,
    /// Where it runs: [`Backend::Cpu`] or [`Backend::Gpu`], never [`Backend::Auto`].
    pub backend: Backend,
    /// What it builds.
    pub produces: Produces,
    /// One line for `--help` and reports.
    pub description: &'static str,
    /// Its parameters with their default values.
    pub default_params: Value,
}

/// A builder behind a name: JSON parameters, any element type.
pub trait DynBuilder: Send + Sync {
    /// Name, backend, output and defaults.
    fn info(&self) -> AlgorithmInfo;

    /// Parses `overrides` over the defaults and checks them against a `rows` x `dim` dataset,
    /// returning the complete parameter object that a build would use.
    fn resolve_params(&self, overrides: &Value, rows: usize, dim: usize) -> Result<Value>;

    /// Builds the graph of `data`. `k` is required by k-NN graph builders and refused by the others.
    fn build(
        &self,
        data: &AnyDataset,
        metric: Metric,
        k: Option<usize>,
        params: &Value,
        ctx: &BuildCtx,
    ) -> Result<StoredGraph>;
}

/// Runs `$body` with `$view` bound to the typed view of an [`AnyDataset`].
macro_rules! with_view {
    ($data:expr, |$view:ident| $body:expr) => {
        match $data {
            AnyDataset::F32(d) => {
                let $view = d.view();
                $body
            }
            AnyDataset::F16(d) => {
                let $view = d.view();
                $body
            }
            AnyDataset::U8(d) => {
                let $view = d.view();
                $body
            }
            AnyDataset::I8(d) => {
                let $view = d.view();
                $body
            }
        }
    };
}
pub(crate) use with_view;

/// Merges `overrides` (a JSON object, or null) over the defaults of `P`, refusing unknown keys.
pub fn parse_params<P: Params + Serialize + DeserializeOwned>(
    algorithm: &str,
    overrides: &Value,
) -> Result<P> {
    let mut merged = serde_json::to_value(P::default())
        .map_err(|e| Error::invalid_param("params", e.to_string()))?;
    match (overrides, &mut merged) {
        (Value::Null, _) => {}
        (Value::Object(o), Value::Object(m)) => {
            for (key, value) in o {
                if !m.contains_key(key) {
                    let known: Vec<&String> = m.keys().collect();
                    return Err(Error::invalid_param(
                        key.clone(),
                        format!(
                            "`{algorithm}` has no parameter `{key}` (its parameters: {known:?})"
                        ),
                    ));
                }
                m.insert(key.clone(), value.clone());
            }
        }
        (Value::Object(o), _) if o.is_empty() => {}
        (other, _) => {
            return Err(Error::invalid_param(
                "params",
                format!("parameters must be a JSON object, got {other}"),
            ));
        }
    }
    serde_json::from_value(merged).map_err(|e| {
        // Name the parameter at fault: the first override that fails on its own over the
        // defaults (serde's message names the type's accepted values: a unit enum's variants,
        // a custom type's own description).
        let culprit = overrides.as_object().and_then(|o| {
            o.iter().find_map(|(key, value)| {
                let mut one = serde_json::to_value(P::default()).ok()?;
                one.as_object_mut()?.insert(key.clone(), value.clone());
                serde_json::from_value::<P>(one)
                    .err()
                    .map(|e| (key.clone(), e))
            })
        });
        match culprit {
            Some((key, e)) => Error::invalid_param(key, format!("`{algorithm}`: {e}")),
            None => Error::invalid_param("params", format!("`{algorithm}`: {e}")),
        }
    })
}

/// A [`KnnGraphBuilder`] in the registry.
pub struct KnnEntry<B> {
    builder: B,
    backend: Backend,
    description: &'static str,
}

impl<B: KnnGraphBuilder> KnnEntry<B> {
    /// Registers `builder`.
    pub fn new(builder: B, backend: Backend, description: &'static str) -> Self {
        KnnEntry {
            builder,
            backend,
            description,
        }
    }
}

impl<B> DynBuilder for KnnEntry<B>
where
    B: KnnGraphBuilder + Send + Sync,
{
    fn info(&self) -> AlgorithmInfo {
        AlgorithmInfo {
            name: self.builder.name(),
            backend: self.backend,
            produces: Produces::KnnGraph,
            description: self.description,
            default_params: serde_json::to_value(B::Params::default()).unwrap_or(Value::Null),
        }
    }

    fn resolve_params(&self, overrides: &Value, rows: usize, dim: usize) -> Result<Value> {
        let p: B::Params = parse_params(self.builder.name(), overrides)?;
        p.validate(rows, dim)?;
        serde_json::to_value(p).map_err(|e| Error::invalid_param("params", e.to_string()))
    }

    fn build(
        &self,
        data: &AnyDataset,
        metric: Metric,
        k: Option<usize>,
        params: &Value,
        ctx: &BuildCtx,
    ) -> Result<StoredGraph> {
        let k = k.ok_or_else(|| {
            Error::invalid_param(
                "k",
                format!("`{}` builds a k-NN graph and needs k", self.builder.name()),
            )
        })?;
        let p: B::Params = parse_params(self.builder.name(), params)?;
        let graph = with_view!(data, |view| self.builder.build(view, metric, k, &p, ctx))?;
        Ok(StoredGraph::Knn(graph))
    }
}

/// A [`GraphBuilder`] in the registry.
pub struct GraphEntry<B> {
    builder: B,
    backend: Backend,
    description: &'static str,
}

impl<B: GraphBuilder> GraphEntry<B> {
    /// Registers `builder`.
    pub fn new(builder: B, backend: Backend, description: &'static str) -> Self {
        GraphEntry {
            builder,
            backend,
            description,
        }
    }
}

/// Graph types a [`GraphBuilder`] in the registry may produce.
pub trait IntoStored {
    /// Wraps the graph for storage and search.
    fn into_stored(self) -> StoredGraph;
}

impl IntoStored for weft_core::FixedDegreeGraph {
    fn into_stored(self) -> StoredGraph {
        StoredGraph::Fixed(self)
    }
}

impl IntoStored for weft_core::KnnGraph {
    fn into_stored(self) -> StoredGraph {
        StoredGraph::Knn(self)
    }
}

impl IntoStored for weft_graph::hier::HierGraph {
    fn into_stored(self) -> StoredGraph {
        StoredGraph::Hier(self)
    }
}

impl<B> DynBuilder for GraphEntry<B>
where
    B: GraphBuilder + Send + Sync,
    B::Output: IntoStored,
{
    fn info(&self) -> AlgorithmInfo {
        AlgorithmInfo {
            name: self.builder.name(),
            backend: self.backend,
            produces: Produces::SearchGraph,
            description: self.description,
            default_params: serde_json::to_value(B::Params::default()).unwrap_or(Value::Null),
        }
    }

    fn resolve_params(&self, overrides: &Value, rows: usize, dim: usize) -> Result<Value> {
        let p: B::Params = parse_params(self.builder.name(), overrides)?;
        p.validate(rows, dim)?;
        serde_json::to_value(p).map_err(|e| Error::invalid_param("params", e.to_string()))
    }

    fn build(
        &self,
        data: &AnyDataset,
        metric: Metric,
        k: Option<usize>,
        params: &Value,
        ctx: &BuildCtx,
    ) -> Result<StoredGraph> {
        if k.is_some() {
            return Err(Error::invalid_param(
                "k",
                format!(
                    "`{}` builds a search graph: set its degree through the parameters, not k",
                    self.builder.name()
                ),
            ));
        }
        let p: B::Params = parse_params(self.builder.name(), params)?;
        let graph = with_view!(data, |view| self.builder.build(view, metric, &p, ctx))?;
        Ok(graph.into_stored())
    }
}

/// Algorithms of the weft project that this build does not provide yet, with the reason. They
/// are named only so the error can say so; they are never in the registry. (Empty since GRNND
/// was registered; kept for the next planned algorithm.)
pub const PLANNED: &[(&str, &str)] = &[];

/// Algorithms that run only on the GPU, with a short description: registered only when a GPU
/// is available; without one, asking for them is an `Error::Unsupported` that gives the reason.
pub const GPU_ONLY: &[(&str, &str)] = &[("grnnd", "GRNND (GPU RNN-Descent)")];

/// The algorithms available in this build, by name and backend, and the GPU they run on.
pub struct Registry {
    entries: Vec<Box<dyn DynBuilder>>,
    gpu: GpuStatus,
}

/// Whether this process has a usable GPU, and which.
#[derive(Clone)]
pub enum GpuStatus {
    /// A device was found; the GPU back ends run on it.
    #[cfg(feature = "cuda")]
    Available(std::sync::Arc<weft_gpu::GpuContext>),
    /// No device: the reason (no driver, no device, built without the `cuda` feature, ...).
    Unavailable(String),
}

impl GpuStatus {
    /// Looks for the default GPU (never panics; without the `cuda` feature, says so): device
    /// `$WEFT_GPU_DEVICE` when that is set, else device 0. [`GpuStatus::probe_device`] names
    /// the device.
    pub fn probe() -> Self {
        #[cfg(feature = "cuda")]
        {
            Self::from_probe(weft_gpu::probe())
        }
        #[cfg(not(feature = "cuda"))]
        {
            GpuStatus::Unavailable("built without the `cuda` feature".into())
        }
    }

    /// Looks for CUDA device `ordinal` (never panics): a device that does not exist is
    /// unavailable, with a reason that names it and the number of devices visible.
    pub fn probe_device(ordinal: usize) -> Self {
        #[cfg(feature = "cuda")]
        {
            Self::from_probe(weft_gpu::probe_device(ordinal))
        }
        #[cfg(not(feature = "cuda"))]
        {
            let _ = ordinal;
            GpuStatus::Unavailable("built without the `cuda` feature".into())
        }
    }

    /// The number of CUDA devices this process sees (what `--gpus all` and `devices="all"`
    /// expand to); an [`Error::Unsupported`] saying why when none can be counted (no driver,
    /// a build without the `cuda` feature).
    pub fn device_count() -> Result<usize> {
        #[cfg(feature = "cuda")]
        {
            weft_gpu::device_count()
        }
        #[cfg(not(feature = "cuda"))]
        {
            Err(Error::Unsupported(
                "this build of weft has no GPU support (cargo feature `cuda`)".into(),
            ))
        }
    }

    /// Looks for device `ordinal` when given, else for the default device ([`GpuStatus::probe`]).
    pub fn probe_device_or_default(ordinal: Option<usize>) -> Self {
        match ordinal {
            Some(d) => Self::probe_device(d),
            None => Self::probe(),
        }
    }

    /// The GPU status for work that asked for device `ordinal` (`None`: the default device,
    /// which may be unavailable: the work then runs on the CPU). A device asked for is used or
    /// this fails with an [`Error::Unsupported`] that names it: never the CPU instead. The one
    /// rule of every surface (the builder, the CLI's `--gpu`, Python's `device=`).
    pub fn require(ordinal: Option<usize>) -> Result<Self> {
        match (ordinal, Self::probe_device_or_default(ordinal)) {
            (Some(d), GpuStatus::Unavailable(reason)) => Err(Error::Unsupported(format!(
                "GPU {d} was asked for and cannot be used: {reason}"
            ))),
            (_, status) => Ok(status),
        }
    }

    #[cfg(feature = "cuda")]
    fn from_probe(probed: Result<weft_gpu::GpuContext>) -> Self {
        match probed {
            Ok(ctx) => GpuStatus::Available(std::sync::Arc::new(ctx)),
            Err(e) => GpuStatus::Unavailable(e.to_string()),
        }
    }

    /// The CUDA device number of the GPU, when one is available.
    pub fn device(&self) -> Option<usize> {
        match self {
            #[cfg(feature = "cuda")]
            GpuStatus::Available(ctx) => Some(ctx.info().ordinal),
            GpuStatus::Unavailable(_) => None,
        }
    }

    /// Whether a GPU is usable.
    pub fn is_available(&self) -> bool {
        !matches!(self, GpuStatus::Unavailable(_))
    }

    /// How each kernel module used so far reached the GPU, as `(module, path)` with the path's
    /// words (`cubin sm_90 (nvcc at build time)`, `NVRTC sm_90`, `NVRTC sm_90 (disk cache)`);
    /// empty without a GPU. What a first use compiled shows here.
    pub fn kernel_load_paths(&self) -> Vec<(&'static str, String)> {
        match self {
            #[cfg(feature = "cuda")]
            GpuStatus::Available(ctx) => ctx
                .kernel_load_paths()
                .into_iter()
                .map(|(m, p)| (m, p.to_string()))
                .collect(),
            GpuStatus::Unavailable(_) => Vec::new(),
        }
    }

    /// A JSON description for reports: device, memory, driver and kernel delivery, or the reason.
    pub fn describe(&self) -> Value {
        match self {
            #[cfg(feature = "cuda")]
            GpuStatus::Available(ctx) => {
                let (free, total) = ctx.memory().unwrap_or((0, 0));
                serde_json::json!({
                    "available": true,
                    "device": ctx.info(),
                    "free_memory": free,
                    "total_memory": total,
                    "kernel_mode": format!("{:?}", ctx.kernel_mode()),
                    "cubins": crate::kernel_modules()
                        .iter()
                        .map(|m| (m.name, m.cubin_archs()))
                        .collect::<Vec<_>>(),
                    "nvrtc_cache": weft_gpu::loader::cache_dir(),
                })
            }
            GpuStatus::Unavailable(reason) => {
                serde_json::json!({ "available": false, "reason": reason })
            }
        }
    }
}

impl std::fmt::Debug for GpuStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            #[cfg(feature = "cuda")]
            GpuStatus::Available(ctx) => write!(f, "GPU {}", ctx.info().name),
            GpuStatus::Unavailable(r) => write!(f, "no GPU ({r})"),
        }
    }
}

/// The exact k-NN graph on the GPU, registered as `exact` with the GPU back end.
#[cfg(feature = "cuda")]
struct ExactGpuEntry {
    ctx: std::sync::Arc<weft_gpu::GpuContext>,
}

#[cfg(feature = "cuda")]
impl DynBuilder for ExactGpuEntry {
    fn info(&self) -> AlgorithmInfo {
        AlgorithmInfo {
            name: "exact",
            backend: Backend::Gpu,
            produces: Produces::KnnGraph,
            description: "exact k-NN graph by tiled brute force on the GPU (ground truth)",
            default_params: serde_json::json!({}),
        }
    }

    fn resolve_params(&self, overrides: &Value, rows: usize, dim: usize) -> Result<Value> {
        let p: weft_core::NoParams = parse_params("exact", overrides)?;
        p.validate(rows, dim)?;
        Ok(serde_json::json!({}))
    }

    fn build(
        &self,
        data: &AnyDataset,
        metric: Metric,
        k: Option<usize>,
        _params: &Value,
        ctx: &BuildCtx,
    ) -> Result<StoredGraph> {
        let k =
            k.ok_or_else(|| Error::invalid_param("k", "`exact` builds a k-NN graph and needs k"))?;
        let exact = weft_exact::ExactGpu::new(&self.ctx);
        let graph = with_view!(data, |view| exact.build(
            view,
            metric,
            k,
            &weft_core::NoParams {},
            ctx
        ))?;
        Ok(StoredGraph::Knn(graph))
    }
}

impl Default for Registry {
    fn default() -> Self {
        Self::available()
    }
}

impl Registry {
    /// An empty registry with no GPU (add entries with [`Registry::register`]).
    pub fn empty() -> Self {
        Registry {
            entries: Vec::new(),
            gpu: GpuStatus::Unavailable("not probed".into()),
        }
    }

    /// Every algorithm implemented in this build; the GPU back ends when a GPU is present.
    pub fn available() -> Self {
        Self::with_gpu(GpuStatus::probe())
    }

    /// Every CPU algorithm, and the GPU back ends when `gpu` is available.
    pub fn with_gpu(gpu: GpuStatus) -> Self {
        let mut r = Registry::empty();
        #[cfg(feature = "cuda")]
        if let GpuStatus::Available(ctx) = &gpu {
            r.register(ExactGpuEntry {
                ctx: std::sync::Arc::clone(ctx),
            });
            r.register(KnnEntry::new(
                weft_nndescent::NnDescentGpu::new(std::sync::Arc::clone(ctx)),
                Backend::Gpu,
                "GNND: NN-Descent redesigned for the GPU (Wang, Zhao & Zeng 2021) k-NN graph",
            ));
            r.register(GraphEntry::new(
                weft_cagra::CagraPipelineGpu::new(
                    std::sync::Arc::clone(ctx),
                    weft_nndescent::NnDescentGpu::new(std::sync::Arc::clone(ctx)),
                ),
                Backend::Gpu,
                "CAGRA: GNND (or exact) k-NN graph and rank-based optimisation on the GPU",
            ));
            r.register(GraphEntry::new(
                weft_grnnd::GrnndGpu::new(std::sync::Arc::clone(ctx)),
                Backend::Gpu,
                "GRNND: RNN-Descent redesigned for the GPU (Li et al. 2025) search graph",
            ));
            r.register(GraphEntry::new(
                weft_ggnn::GgnnGpu::new(std::sync::Arc::clone(ctx)),
                Backend::Gpu,
                "GGNN (Groh et al. 2023) hierarchical graph built on the GPU",
            ));
        }
        r.gpu = gpu;
        r.register(KnnEntry::new(
            weft_exact::ExactKnn,
            Backend::Cpu,
            "exact k-NN graph by blocked brute force (ground truth)",
        ));
        r.register(KnnEntry::new(
            weft_nndescent::NnDescentCpu,
            Backend::Cpu,
            "NN-Descent (Dong et al. 2011) k-NN graph",
        ));
        r.register(GraphEntry::new(
            weft_rnndescent::RnnDescentCpu,
            Backend::Cpu,
            "RNN-Descent (Ono & Matsui 2023) search graph",
        ));
        r.register(GraphEntry::new(
            weft_cagra::CagraPipeline::new(
                weft_nndescent::NnDescentCpu,
                weft_nndescent::NnDescentParams::default(),
            ),
            Backend::Cpu,
            "CAGRA (Ootomo et al. 2024): NN-Descent k-NN graph, rank-based optimisation",
        ));
        r.register(GraphEntry::new(
            weft_ggnn::GgnnCpu,
            Backend::Cpu,
            "GGNN (Groh et al. 2023) hierarchical graph, CPU reference",
        ));
        r
    }

    /// The GPU this registry's GPU back ends run on, or why there is none.
    pub fn gpu(&self) -> &GpuStatus {
        &self.gpu
    }

    /// Exact k-NN of every query among `base` (same element type): on the GPU when there is one
    /// (unless `backend` says otherwise; `None` is [`Backend::Auto`]), else on the CPU. Returns
    /// the backend that ran.
    pub fn exact_search(
        &self,
        base: &AnyDataset,
        queries: &AnyDataset,
        metric: Metric,
        k: usize,
        backend: Option<Backend>,
        ctx: &BuildCtx,
    ) -> Result<(weft_core::Neighbors, Backend)> {
        if base.dtype() != queries.dtype() {
            return Err(Error::InvalidInput(format!(
                "base vectors are {} but queries are {}",
                base.dtype(),
                queries.dtype()
            )));
        }
        if base.dim() != queries.dim() {
            return Err(Error::dim_mismatch(
                "queries vs base vectors",
                base.dim(),
                queries.dim(),
            ));
        }
        let use_gpu = match backend.and_then(Backend::required) {
            Some(Backend::Gpu) => {
                if !self.gpu.is_available() {
                    return Err(Error::Unsupported(format!(
                        "no GPU back end: {:?}",
                        self.gpu
                    )));
                }
                true
            }
            Some(_) => false,
            None => self.gpu.is_available(),
        };
        macro_rules! pair {
            ($f:expr) => {
                match (base, queries) {
                    (AnyDataset::F32(b), AnyDataset::F32(q)) => $f(b.view(), q.view()),
                    (AnyDataset::F16(b), AnyDataset::F16(q)) => $f(b.view(), q.view()),
                    (AnyDataset::U8(b), AnyDataset::U8(q)) => $f(b.view(), q.view()),
                    (AnyDataset::I8(b), AnyDataset::I8(q)) => $f(b.view(), q.view()),
                    _ => unreachable!("element types compared above"),
                }
            };
        }
        if use_gpu {
            #[cfg(feature = "cuda")]
            if let GpuStatus::Available(gpu) = &self.gpu {
                let exact = weft_exact::ExactGpu::new(gpu);
                let found = pair!(|b, q| exact.search(b, q, metric, k))?;
                return Ok((found, Backend::Gpu));
            }
        }
        let found = pair!(|b, q| weft_exact::exact_search(b, q, metric, k, ctx))?;
        Ok((found, Backend::Cpu))
    }

    /// Adds an algorithm (a later entry with the same name and backend replaces the earlier).
    pub fn register(&mut self, entry: impl DynBuilder + 'static) {
        let info = entry.info();
        self.entries.retain(|e| {
            let i = e.info();
            (i.name, i.backend) != (info.name, info.backend)
        });
        self.entries.push(Box::new(entry));
    }

    /// Descriptions of every registered algorithm.
    pub fn list(&self) -> Vec<AlgorithmInfo> {
        self.entries.iter().map(|e| e.info()).collect()
    }

    /// The algorithm `name` on `backend` (`None` or [`Backend::Auto`]: the GPU one when
    /// registered, else the CPU one).
    pub fn get(&self, name: &str, backend: Option<Backend>) -> Result<&dyn DynBuilder> {
        let backend = backend.and_then(Backend::required);
        let name = name.to_ascii_lowercase();
        let find = |b: Backend| {
            self.entries
                .iter()
                .find(|e| {
                    let i = e.info();
                    i.name == name && i.backend == b
                })
                .map(|e| e.as_ref())
        };
        let found = match backend {
            Some(b) => find(b),
            None => find(Backend::Gpu).or_else(|| find(Backend::Cpu)),
        };
        if let Some(f) = found {
            return Ok(f);
        }
        if let Some((_, why)) = PLANNED.iter().find(|(n, _)| *n == name) {
            return Err(Error::Unsupported(format!("algorithm `{name}`: {why}")));
        }
        if let (Some((_, what)), GpuStatus::Unavailable(reason)) =
            (GPU_ONLY.iter().find(|(n, _)| *n == name), &self.gpu)
        {
            return Err(Error::Unsupported(format!(
                "algorithm `{name}` ({what}) runs only on the GPU, and there is none: {reason}"
            )));
        }
        let mut names: Vec<String> = self
            .list()
            .iter()
            .map(|i| format!("{} ({})", i.name, i.backend.name()))
            .collect();
        names.dedup();
        match backend {
            Some(b) if self.list().iter().any(|i| i.name == name) => {
                Err(Error::Unsupported(format!(
                    "algorithm `{name}` has no {} back end in this build (available: {})",
                    b.name(),
                    names.join(", ")
                )))
            }
            _ => Err(Error::invalid_param(
                "algorithm",
                format!(
                    "unknown algorithm `{name}` (available: {})",
                    names.join(", ")
                ),
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_and_gpu_only_algorithms_are_clear_errors() {
        let r = Registry::available();
        // GPU-only without a GPU: Unsupported with the reason; with one: registered.
        let no_gpu = Registry::with_gpu(GpuStatus::Unavailable("no device here".into()));
        match no_gpu.get("grnnd", None) {
            Err(Error::Unsupported(m)) => assert!(
                m.contains("only on the GPU") && m.contains("no device here"),
                "{m}"
            ),
            other => panic!("grnnd without a GPU: {:?}", other.map(|e| e.info().name)),
        }
        assert!(matches!(
            no_gpu.get("grnnd", Some(Backend::Cpu)),
            Err(Error::Unsupported(_))
        ));
        #[cfg(feature = "cuda")]
        if r.gpu().is_available() {
            assert_eq!(r.get("grnnd", None).unwrap().info().backend, Backend::Gpu);
        }
        assert_eq!(r.get("ggnn", None).unwrap().info().name, "ggnn");
        assert!(matches!(
            r.get("nope", None),
            Err(Error::InvalidParams { .. })
        ));
        // The GPU back end of an algorithm with both: Unsupported without a GPU, registered
        // with one.
        assert!(matches!(
            no_gpu.get("exact", Some(Backend::Gpu)),
            Err(Error::Unsupported(_))
        ));
        match r.get("exact", Some(Backend::Gpu)) {
            Ok(b) => assert!(r.gpu().is_available() && b.info().backend == Backend::Gpu),
            Err(Error::Unsupported(_)) => assert!(!r.gpu().is_available()),
            Err(e) => panic!("exact on the GPU: {e}"),
        }
        assert_eq!(
            r.get("exact", Some(Backend::Cpu)).unwrap().info().name,
            "exact"
        );
    }

    #[test]
    fn unknown_parameter_is_refused() {
        let r = Registry::available();
        let e = r.get("nndescent", None).unwrap();
        let err = e
            .resolve_params(&serde_json::json!({"no_such_knob": 1}), 100, 8)
            .unwrap_err();
        assert!(matches!(err, Error::InvalidParams { .. }), "{err}");
        let ok = e.resolve_params(&Value::Null, 100, 8).unwrap();
        assert!(ok.is_object());
    }
}
