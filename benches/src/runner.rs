//! The measuring part of the harness: for one prepared dataset and every selected algorithm of
//! the registry, build (warm-up apart, several timed runs), measure the graph, sweep the search
//! parameter at batch = all queries and batch = 1, record peak memory, and emit one
//! [`Record`] per algorithm.

use std::io::Write;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use anyhow::{Context, Result};
use serde_json::Value;
use weft::exact::recall::{SampledTruth, Ties, search_recall};
use weft::graph::stats::graph_stats;
use weft::search::SearchPrecision;
use weft::{
    AnyDataset, Backend, BuildCtx, Dataset, GraphMeta, Index, Metric, Produces, Registry,
    SearchParams, StoredGraph, index::SearchBackend,
};

use crate::datasets::Prepared;
use crate::schema::{
    AlgorithmRun, BuildTimes, DatasetInfo, Env, GraphQuality, Memory, Record, SCHEMA, SweepPoint,
    median,
};

/// Runs `$body` with `$d` bound to the typed dataset inside an [`AnyDataset`].
macro_rules! typed {
    ($data:expr, |$d:ident| $body:expr) => {
        match $data {
            AnyDataset::F32($d) => $body,
            AnyDataset::F16($d) => $body,
            AnyDataset::U8($d) => $body,
            AnyDataset::I8($d) => $body,
        }
    };
}

/// What to run and how hard.
#[derive(Clone, Debug)]
pub struct RunConfig {
    /// Suite name recorded in every line.
    pub suite: String,
    /// Algorithm names to run (`None`: every registered one except the CPU brute force
    /// `exact`, which is the reference and quadratic).
    pub algos: Option<Vec<String>>,
    /// Backends to run.
    pub backends: Vec<Backend>,
    /// Threads for builds and batch searches.
    pub threads: usize,
    /// Timed builds per algorithm (at most).
    pub build_runs: usize,
    /// A further timed build starts only while the timed builds so far took less than this
    /// (seconds; `None`: always `build_runs`). Keeps the quick suite short when an algorithm is
    /// slow; the record lists every run.
    pub build_budget_s: Option<f64>,
    /// Rows of the warm-up build (kernel compilation, page faults), reported apart.
    pub warmup_rows: usize,
    /// Beam widths swept.
    pub beams: Vec<usize>,
    /// Timed passes per sweep point at full batch (median reported).
    pub passes: usize,
    /// Queries timed one at a time (batch 1): the first ones (quick: 1,000; full: all).
    pub batch1_queries: usize,
    /// Sampled rows for graph recall.
    pub graph_sample: usize,
    /// `k` of k-NN graph builders.
    pub knn_k: usize,
    /// Parameter overrides per algorithm name (JSON objects).
    pub params: Vec<(String, Value)>,
    /// Seed of builds and samples.
    pub seed: u64,
    /// Traversal precisions of the GPU CAGRA search swept, each as its own record over the same
    /// build (`--search-precision exact,f16`; default exact). `F16` applies to GPU-built
    /// fixed-degree and k-NN graphs only.
    pub search_precisions: Vec<SearchPrecision>,
}

impl RunConfig {
    /// The defaults of a suite (`quick` or `full`).
    pub fn suite(name: &str, threads: usize) -> Self {
        let quick = name == "quick";
        RunConfig {
            suite: name.into(),
            algos: None,
            backends: vec![Backend::Cpu, Backend::Gpu],
            threads,
            build_runs: if quick { 2 } else { 3 },
            build_budget_s: quick.then_some(30.0),
            warmup_rows: 10_000,
            beams: if quick {
                vec![10, 16, 32, 64, 128, 256]
            } else {
                vec![10, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512]
            },
            passes: if quick { 1 } else { 3 },
            batch1_queries: if quick { 1000 } else { usize::MAX },
            graph_sample: 1000,
            knn_k: 32,
            params: Vec::new(),
            seed: 42,
            search_precisions: vec![SearchPrecision::Exact],
        }
    }

    /// Which registered algorithms (name, backend) this configuration runs, in registry order.
    pub fn select(&self, registry: &Registry) -> Vec<(String, Backend)> {
        let mut v = Vec::new();
        for info in registry.list() {
            if !self.backends.contains(&info.backend) {
                continue;
            }
            let chosen = match &self.algos {
                Some(names) => names.iter().any(|n| n.eq_ignore_ascii_case(info.name)),
                None => !(info.name == "exact" && info.backend == Backend::Cpu),
            };
            if chosen {
                v.push((info.name.to_string(), info.backend));
            }
        }
        v
    }
}

/// Environment of this process: CPU, host, GPU description, commit.
pub fn env(registry: &Registry, commit: &str) -> Env {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split(':').nth(1))
                .map(|s| s.trim().to_string())
        })
        .unwrap_or_else(|| "unknown CPU".into());
    Env {
        commit: commit.into(),
        timestamp: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0),
        host: std::fs::read_to_string("/proc/sys/kernel/hostname")
            .map(|s| s.trim().to_string())
            .unwrap_or_default(),
        cpu,
        cpus: std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1),
        gpu: registry.gpu().describe(),
    }
}

/// Resident set now and its high-water mark, MiB (from /proc/self/status).
fn rss_mib() -> (f64, f64) {
    let s = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |name: &str| {
        s.lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse::<f64>().ok())
            .map_or(f64::NAN, |kb| kb / 1024.0)
    };
    (field("VmRSS:"), field("VmHWM:"))
}

/// Resets the high-water mark of the resident set (Linux `clear_refs` 5); best effort.
fn reset_peak_rss() {
    let _ = std::fs::write("/proc/self/clear_refs", "5");
}

/// Samples device memory in use while alive; [`DeviceSampler::stop`] returns the peak over the
/// starting level, MiB.
struct DeviceSampler {
    stop: Arc<AtomicBool>,
    handle: Option<std::thread::JoinHandle<f64>>,
}

impl DeviceSampler {
    fn start(registry: &Registry, backend: Backend) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        #[cfg(feature = "cuda")]
        if backend == Backend::Gpu
            && let weft::GpuStatus::Available(ctx) = registry.gpu()
        {
            let ctx = Arc::clone(ctx);
            let flag = Arc::clone(&stop);
            let handle = std::thread::spawn(move || {
                let Ok((start_free, _)) = ctx.memory() else {
                    return f64::NAN;
                };
                let mut min_free = start_free;
                while !flag.load(Ordering::Relaxed) {
                    if let Ok((free, _)) = ctx.memory() {
                        min_free = min_free.min(free);
                    }
                    std::thread::sleep(std::time::Duration::from_millis(2));
                }
                (start_free - min_free) as f64 / (1u64 << 20) as f64
            });
            return DeviceSampler {
                stop,
                handle: Some(handle),
            };
        }
        let _ = (registry, backend);
        DeviceSampler { stop, handle: None }
    }

    fn stop(self) -> Option<f64> {
        self.stop.store(true, Ordering::Relaxed);
        self.handle.and_then(|h| h.join().ok())
    }
}

/// The first `rows` rows of any dataset.
fn head_any(data: &AnyDataset, rows: usize) -> Result<AnyDataset> {
    Ok(typed!(data, |d| AnyDataset::from_typed(
        crate::datasets::head(d, rows)?
    )))
}

/// One row of any dataset as a one-row dataset.
fn row_any(data: &AnyDataset, row: usize) -> Result<AnyDataset> {
    Ok(typed!(data, |d| AnyDataset::from_typed(Dataset::from_vec(
        d.row(row).to_vec(),
        1,
        d.dim()
    )?)))
}

/// Exact neighbours of a sample of base rows, computed once per dataset for graph recall.
pub struct GraphTruth {
    truth: SampledTruth,
}

impl GraphTruth {
    /// `k` exact neighbours of `sample` seeded rows of `base`.
    pub fn compute(base: &AnyDataset, metric: Metric, k: usize, sample: usize) -> Result<Self> {
        let ctx = BuildCtx::new(7);
        let k = k.min(base.rows() - 1);
        let truth = typed!(base, |d| SampledTruth::compute(
            d.view(),
            metric,
            k,
            sample,
            &ctx
        ))?;
        Ok(GraphTruth { truth })
    }

    fn quality(&self, graph: &StoredGraph, base: &AnyDataset) -> Result<GraphQuality> {
        let g = graph.as_view();
        let deg = g.max_degree();
        let k10 = 10.min(deg).min(self.truth.k());
        let kk = deg.min(self.truth.k());
        let r10 = typed!(base, |d| self.truth.recall(
            g,
            d.view(),
            k10,
            Ties::Distance
        ))?;
        let rk = typed!(base, |d| self.truth.recall(g, d.view(), kk, Ties::Distance))?;
        let stats = graph_stats(g, None)?;
        Ok(GraphQuality {
            recall_at_10: r10.mean,
            recall_k: kk,
            recall_at_k: rk.mean,
            sample: r10.rows,
            out_degree: [
                stats.out_degree.min as f64,
                stats.out_degree.mean,
                stats.out_degree.max as f64,
            ],
            in_degree: [
                stats.in_degree.min as f64,
                stats.in_degree.mean,
                stats.in_degree.max as f64,
            ],
            unreachable: Some(stats.num_nodes - stats.reachable),
            scc_count: Some(stats.scc_count),
        })
    }
}

fn dataset_info(p: &Prepared) -> DatasetInfo {
    DatasetInfo {
        name: p.meta.name.clone(),
        source: p.meta.source.clone(),
        n: p.meta.n,
        nq: p.meta.nq,
        dim: p.meta.dim,
        dtype: p.meta.dtype.clone(),
        metric: p.meta.metric.clone(),
        gt_k: p.meta.gt_k,
    }
}

/// Runs every selected algorithm on `data`, writing one JSON line per algorithm to `out` as
/// soon as it is measured; returns the records.
pub fn run_dataset(
    registry: &Registry,
    data: &Prepared,
    cfg: &RunConfig,
    env: &Env,
    out: &mut dyn Write,
) -> Result<Vec<Record>> {
    let selected = cfg.select(registry);
    if selected.is_empty() {
        eprintln!(
            "[{}] no registered algorithm matches --algo/--backend (registered: {})",
            data.meta.name,
            registry
                .list()
                .iter()
                .map(|i| format!("{}/{}", i.name, i.backend.name()))
                .collect::<Vec<_>>()
                .join(", ")
        );
        return Ok(Vec::new());
    }
    let t = Instant::now();
    let truth = GraphTruth::compute(&data.base, data.metric, 64, cfg.graph_sample)?;
    eprintln!(
        "[{}] graph-recall truth of {} sampled rows: {:.1} s",
        data.meta.name,
        cfg.graph_sample,
        t.elapsed().as_secs_f64()
    );
    let mut records = Vec::new();
    for (name, backend) in selected {
        let started = Instant::now();
        let done = match run_one(registry, data, cfg, env, &truth, &name, backend) {
            Ok(r) => r,
            Err(e) => {
                eprintln!(
                    "[{}] {name}/{}: failed: {e:#}",
                    data.meta.name,
                    backend.name()
                );
                vec![failed_record(data, cfg, env, &name, backend, &e)]
            }
        };
        eprintln!(
            "[{}] {name}/{}: done in {:.1} s",
            data.meta.name,
            backend.name(),
            started.elapsed().as_secs_f64()
        );
        for record in done {
            writeln!(out, "{}", serde_json::to_string(&record)?)?;
            out.flush()?;
            records.push(record);
        }
    }
    Ok(records)
}

/// The algorithm part of a record of weft's algorithm `name` on `backend`.
/// `search_param` names the swept list size: `beam_width`, on every back end (the CPU beam
/// search's list, the GPU CAGRA search's list, the GPU GGNN search's queue at tau 0.5). Records
/// written before the one name say `itopk` (GPU CAGRA) or `ggnn_queue` (GPU GGNN) for the same
/// value; the reports read them as they are.
fn weft_run(
    name: &str,
    backend: Backend,
    params: Value,
    cfg: &RunConfig,
    search_param: &str,
) -> AlgorithmRun {
    AlgorithmRun {
        library: "weft".into(),
        version: env!("CARGO_PKG_VERSION").into(),
        name: name.into(),
        backend: backend.name().into(),
        params,
        threads: cfg.threads,
        search_param: search_param.into(),
    }
}

fn failed_record(
    data: &Prepared,
    cfg: &RunConfig,
    env: &Env,
    name: &str,
    backend: Backend,
    e: &anyhow::Error,
) -> Record {
    Record {
        schema: SCHEMA.into(),
        suite: cfg.suite.clone(),
        env: env.clone(),
        dataset: dataset_info(data),
        algorithm: weft_run(name, backend, Value::Null, cfg, "beam_width"),
        build: None,
        memory: None,
        graph: None,
        sweep: Vec::new(),
        error: Some(format!("{e:#}")),
    }
}

/// The precisions swept for a run on `backend` over `graph`: `F16` only where the GPU CAGRA
/// search runs (GPU-built fixed-degree and k-NN graphs).
fn precisions_for(cfg: &RunConfig, backend: Backend, graph: &StoredGraph) -> Vec<SearchPrecision> {
    let gpu_cagra = backend == Backend::Gpu && !matches!(graph, StoredGraph::Hier(_));
    cfg.search_precisions
        .iter()
        .copied()
        .filter(|&p| p == SearchPrecision::Exact || gpu_cagra)
        .collect()
}

/// Builds `name` on `backend` and sweeps its search once per precision of
/// [`precisions_for`]: one record each (the same build and graph quality); a failed sweep of
/// a further precision is a record with its error.
fn run_one(
    registry: &Registry,
    data: &Prepared,
    cfg: &RunConfig,
    env: &Env,
    truth: &GraphTruth,
    name: &str,
    backend: Backend,
) -> Result<Vec<Record>> {
    let tag = format!("[{}] {name}/{}", data.meta.name, backend.name());
    let builder = registry.get(name, Some(backend))?;
    let info = builder.info();
    let overrides = cfg
        .params
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case(name))
        .map_or(Value::Null, |(_, v)| v.clone());
    let (n, dim) = (data.base.rows(), data.base.dim());
    let k = (info.produces == Produces::KnnGraph).then_some(cfg.knn_k.min(n - 1));
    let params = builder.resolve_params(&overrides, n, dim)?;
    let ctx = BuildCtx::new(cfg.seed).with_threads(Some(cfg.threads));

    // Warm-up: kernel compilation / JIT-free first touches, on a prefix, reported apart.
    let warm_rows = cfg.warmup_rows.min(n);
    let warm = head_any(&data.base, warm_rows)?;
    let warm_k = k.map(|k| k.min(warm_rows - 1));
    let warm_params = builder.resolve_params(&overrides, warm_rows, dim)?;
    let t = Instant::now();
    builder
        .build(&warm, data.metric, warm_k, &warm_params, &ctx)
        .context("warm-up build")?;
    let warmup_s = t.elapsed().as_secs_f64();
    drop(warm);
    eprintln!("{tag}: warm-up on {warm_rows} rows {warmup_s:.2} s");

    let mut runs = Vec::new();
    let mut peak_rss = 0.0f64;
    let mut device_peak: Option<f64> = None;
    let (rss_before, _) = rss_mib();
    let mut graph = None;
    for r in 0..cfg.build_runs.max(1) {
        if r > 0
            && let Some(budget) = cfg.build_budget_s
            && runs.iter().sum::<f64>() >= budget
        {
            eprintln!("{tag}: {r} timed build(s) used the {budget} s budget: no more runs");
            break;
        }
        drop(graph.take()); // free the previous graph before the next build
        reset_peak_rss();
        let sampler = DeviceSampler::start(registry, backend);
        let t = Instant::now();
        let g = builder.build(&data.base, data.metric, k, &params, &ctx)?;
        let s = t.elapsed().as_secs_f64();
        if let Some(d) = sampler.stop() {
            device_peak = Some(device_peak.map_or(d, |p: f64| p.max(d)));
        }
        peak_rss = peak_rss.max(rss_mib().1);
        eprintln!("{tag}: build {} of {}: {s:.2} s", r + 1, cfg.build_runs);
        runs.push(s);
        graph = Some(g);
    }
    let graph = graph.context("no build ran")?;
    graph.validate()?;
    let t = Instant::now();
    let quality = truth.quality(&graph, &data.base)?;
    eprintln!(
        "{tag}: graph recall@10 {:.4}, recall@{} {:.4}, unreachable {:?} ({:.1} s)",
        quality.recall_at_10,
        quality.recall_k,
        quality.recall_at_k,
        quality.unreachable,
        t.elapsed().as_secs_f64()
    );

    let meta = GraphMeta::new(data.metric).with_data(data.base.dtype(), dim);
    let index = Index::from_parts(data.base.clone(), graph, meta)?;
    let build = BuildTimes::from_runs(runs, warmup_s, warm_rows);
    let mut records = Vec::new();
    for precision in precisions_for(cfg, backend, index.graph()) {
        let f16 = precision == SearchPrecision::F16;
        let tag = if f16 {
            format!("{tag} (f16 traversal)")
        } else {
            tag.clone()
        };
        let (sweep, error) = match sweep(&index, data, cfg, &ctx, &tag, backend, precision) {
            Ok(s) => (s, None),
            // The exact sweep's failure fails the run; a further precision's is its record.
            Err(e) if f16 => {
                eprintln!("{tag}: failed: {e:#}");
                (Vec::new(), Some(format!("{e:#}")))
            }
            Err(e) => return Err(e),
        };
        let mut run_params = serde_json::json!({ "k": k, "params": params });
        if f16 {
            run_params["search_precision"] = precision.name().into();
        }
        records.push(Record {
            schema: SCHEMA.into(),
            suite: cfg.suite.clone(),
            env: env.clone(),
            dataset: dataset_info(data),
            algorithm: weft_run(
                name,
                backend,
                run_params,
                cfg,
                // Every search's list size (the GGNN GPU search's queue, at tau 0.5).
                "beam_width",
            ),
            build: Some(build.clone()),
            memory: Some(Memory {
                peak_rss_mib: peak_rss,
                rss_before_mib: rss_before,
                device_peak_mib: device_peak,
            }),
            graph: Some(quality.clone()),
            sweep,
            error,
        });
    }
    Ok(records)
}

/// Recall@1/@10/@100 of `found` against the prepared ground truth (ids).
fn recalls(
    found: &weft::Neighbors,
    data: &Prepared,
    rows: usize,
) -> Result<(f64, Option<f64>, Option<f64>)> {
    let gt_k = data.gt.cols();
    let gt = &data.gt.as_slice()[..rows * gt_k];
    let at = |k: usize| -> Result<Option<f64>> {
        if k > found.k() || k > gt_k {
            return Ok(None);
        }
        Ok(Some(search_recall(found, gt, gt_k, k)?.mean))
    };
    Ok((at(1)?.unwrap_or(f64::NAN), at(10)?, at(100)?))
}

/// The search parameters of one sweep point: the beam width `beam_width`; graphs built on the
/// GPU are searched on the GPU when one is usable (for a hierarchical GGNN graph the GGNN search
/// with tau 0.5), else with the CPU beam search. With `precision` F16 the GPU CAGRA search
/// traverses in f16 and reranks in f32 (the GPU is then required: a CPU search would not be what
/// the record says).
fn search_params(beam_width: usize, backend: Backend, precision: SearchPrecision) -> SearchParams {
    let mut p = SearchParams::with_beam_width(beam_width);
    p.backend = match backend {
        _ if precision == SearchPrecision::F16 => SearchBackend::Gpu,
        Backend::Gpu | Backend::Auto => SearchBackend::Auto,
        Backend::Cpu => SearchBackend::Cpu,
    };
    p.cagra.traversal = precision;
    p
}

/// Sweeps the beam width at batch = all queries and at batch = 1. Returns the points.
fn sweep(
    index: &Index,
    data: &Prepared,
    cfg: &RunConfig,
    ctx: &BuildCtx,
    tag: &str,
    backend: Backend,
    precision: SearchPrecision,
) -> Result<Vec<SweepPoint>> {
    let queries = &data.queries;
    let nq = queries.rows();
    let n = data.base.rows();
    let mut points = Vec::new();
    let k_for = |beam: usize| beam.min(100).min(n).min(data.gt.cols());
    // Warm pass: pages in the data and the graph (and uploads them for a GPU search).
    if let Some(&b) = cfg.beams.first() {
        ctx.install(|| {
            index.search_any(queries, k_for(b), &search_params(b, backend, precision))
        })??;
    }
    for &beam in &cfg.beams {
        let k = k_for(beam);
        let mut times = Vec::new();
        let mut last = None;
        for _ in 0..cfg.passes.max(1) {
            let out = ctx.install(|| {
                index.search_any(queries, k, &search_params(beam, backend, precision))
            })??;
            times.push(out.elapsed.as_secs_f64());
            last = Some(out);
        }
        let out = last.context("no pass")?;
        let (r1, r10, r100) = recalls(&out.neighbors, data, nq)?;
        let qps = nq as f64 / median(&times);
        eprintln!(
            "{tag}: beam width {beam} batch {nq}: {qps:.0} QPS, recall@1 {r1:.4} @10 {} @100 {}",
            r10.map_or("-".into(), |r| format!("{r:.4}")),
            r100.map_or("-".into(), |r| format!("{r:.4}"))
        );
        points.push(SweepPoint {
            batch: nq,
            param: beam as f64,
            k,
            queries: nq,
            qps,
            recall_at_1: r1,
            recall_at_10: r10,
            recall_at_100: r100,
            distances_per_query: Some(
                out.stats.distance_computations as f64 / out.stats.queries.max(1) as f64,
            ),
        });
    }
    // Batch 1: the first queries one call each, on one thread (latency-bound serving).
    let m = cfg.batch1_queries.min(nq);
    if m > 0 {
        let singles: Vec<AnyDataset> =
            (0..m).map(|q| row_any(queries, q)).collect::<Result<_>>()?;
        let one = BuildCtx::new(cfg.seed).with_threads(Some(1));
        for &beam in &cfg.beams {
            let k = k_for(beam);
            let p = search_params(beam, backend, precision);
            let mut found = weft::Neighbors::new(m, k);
            let mut dists = 0u64;
            let total = one.install(|| -> Result<f64> {
                let t = Instant::now();
                let mut ids = Vec::with_capacity(m * k);
                for q in &singles {
                    let out = index.search_any(q, k, &p)?;
                    dists += out.stats.distance_computations;
                    ids.push(out.neighbors);
                }
                let s = t.elapsed().as_secs_f64();
                let mut view = found.as_mut();
                for (q, nb) in ids.iter().enumerate() {
                    let (i, d) = view.row_mut(q);
                    i.copy_from_slice(nb.row_ids(0));
                    d.copy_from_slice(nb.row_dists(0));
                }
                Ok(s)
            })??;
            let (r1, r10, r100) = recalls(&found, data, m)?;
            points.push(SweepPoint {
                batch: 1,
                param: beam as f64,
                k,
                queries: m,
                qps: m as f64 / total,
                recall_at_1: r1,
                recall_at_10: r10,
                recall_at_100: r100,
                distances_per_query: Some(dists as f64 / m as f64),
            });
        }
        eprintln!("{tag}: batch-1 sweep on {m} queries done");
    }
    Ok(points)
}
