//! The JSON-lines schema of the harness: one [`Record`] per (dataset, library, algorithm,
//! backend), written by the Rust runner and by the peers script (`benches/peers/ann_peers.py`)
//! alike, so the report treats every line the same way.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The value of [`Record::schema`]; bump it when a field changes meaning.
pub const SCHEMA: &str = "weft-bench/1";

/// One benchmarked (dataset, library, algorithm, backend).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Record {
    /// Always [`SCHEMA`].
    pub schema: String,
    /// The suite that produced the line (`quick`, `full`, `custom`).
    pub suite: String,
    /// Where and with what it ran.
    pub env: Env,
    /// The data.
    pub dataset: DatasetInfo,
    /// The algorithm and its complete parameters.
    pub algorithm: AlgorithmRun,
    /// Build timings; `None` when the build failed.
    pub build: Option<BuildTimes>,
    /// Peak memory of the build.
    pub memory: Option<Memory>,
    /// Graph quality; `None` where the library exposes no graph.
    pub graph: Option<GraphQuality>,
    /// The search sweep, one point per (batch, search parameter).
    pub sweep: Vec<SweepPoint>,
    /// Why the run stopped, when it failed.
    pub error: Option<String>,
}

/// Where a record was measured.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Env {
    /// `git rev-parse HEAD` of the measured tree (`unknown` where git is absent).
    pub commit: String,
    /// Seconds since the Unix epoch at the start of the run.
    pub timestamp: u64,
    /// Host name.
    pub host: String,
    /// CPU model.
    pub cpu: String,
    /// Logical CPUs of the machine.
    pub cpus: usize,
    /// The GPU description of [`weft::GpuStatus::describe`] (device, driver, kernel-load path),
    /// or `{"available": false, "reason": ...}`.
    pub gpu: Value,
}

/// The dataset of a record.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DatasetInfo {
    /// Name (`sift-like-100k`, `glove-50d-angular`, ...).
    pub name: String,
    /// Where it came from (preset, file, package).
    pub source: String,
    /// Base vectors.
    pub n: usize,
    /// Queries.
    pub nq: usize,
    /// Dimension.
    pub dim: usize,
    /// Element type (`f32`, `u8`, ...).
    pub dtype: String,
    /// Metric name (`l2`, `ip`, `cosine`).
    pub metric: String,
    /// Neighbours per query in the ground truth.
    pub gt_k: usize,
}

/// The algorithm of a record.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AlgorithmRun {
    /// `weft`, `hnswlib`, `faiss`, `pynndescent`.
    pub library: String,
    /// The library's version.
    pub version: String,
    /// Algorithm name (`nndescent`, `hnsw`, ...).
    pub name: String,
    /// `cpu` or `gpu`.
    pub backend: String,
    /// The complete build parameters.
    pub params: Value,
    /// Threads of the build and of the batch searches.
    pub threads: usize,
    /// The name of the swept search parameter (`beam_width`, `ef`, `epsilon`).
    pub search_param: String,
}

/// Build timings (seconds).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BuildTimes {
    /// Every timed build.
    pub runs_s: Vec<f64>,
    /// Median of [`BuildTimes::runs_s`].
    pub median_s: f64,
    /// Fastest run.
    pub min_s: f64,
    /// Slowest run.
    pub max_s: f64,
    /// The untimed-for-the-median warm-up (kernel compilation or JIT, page faults), on
    /// [`BuildTimes::warmup_rows`] rows.
    pub warmup_s: f64,
    /// Rows of the warm-up build.
    pub warmup_rows: usize,
}

impl BuildTimes {
    /// Median, min and max of `runs` (at least one).
    pub fn from_runs(runs: Vec<f64>, warmup_s: f64, warmup_rows: usize) -> Self {
        let (min_s, max_s) = runs
            .iter()
            .fold((f64::INFINITY, 0.0f64), |(a, b), &t| (a.min(t), b.max(t)));
        BuildTimes {
            median_s: median(&runs),
            runs_s: runs,
            min_s,
            max_s,
            warmup_s,
            warmup_rows,
        }
    }
}

/// Peak memory of a build (MiB).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Memory {
    /// Peak resident set of the process during the build (VmHWM after a reset, or ru_maxrss).
    pub peak_rss_mib: f64,
    /// Resident set before the build (data and ground truth loaded).
    pub rss_before_mib: f64,
    /// Peak device memory in use during the build, sampled every few milliseconds, minus what
    /// was in use before; `None` on the CPU.
    pub device_peak_mib: Option<f64>,
}

/// Graph quality measures.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GraphQuality {
    /// Recall@10 of the first 10 out-neighbours against the exact 10-NN, on a sample.
    pub recall_at_10: f64,
    /// The `k` of [`GraphQuality::recall_at_k`] (the graph degree, capped).
    pub recall_k: usize,
    /// Recall@k of the first k out-neighbours.
    pub recall_at_k: f64,
    /// Sampled rows.
    pub sample: usize,
    /// Out-degree min / mean / max.
    pub out_degree: [f64; 3],
    /// In-degree min / mean / max.
    pub in_degree: [f64; 3],
    /// Vertices not reachable from the entry points (vertex 0 where the graph has none).
    pub unreachable: Option<usize>,
    /// Number of strongly connected components (`None` where not measured).
    pub scc_count: Option<usize>,
}

/// One point of the search sweep.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SweepPoint {
    /// Queries per search call: the whole query set (up to 10,000) or 1.
    pub batch: usize,
    /// Value of the swept search parameter.
    pub param: f64,
    /// Neighbours asked per query.
    pub k: usize,
    /// Queries timed.
    pub queries: usize,
    /// Queries per second (median of the timed passes).
    pub qps: f64,
    /// Recall@1 against the ground truth.
    pub recall_at_1: f64,
    /// Recall@10 (`None` when k < 10).
    pub recall_at_10: Option<f64>,
    /// Recall@100 (`None` when k < 100).
    pub recall_at_100: Option<f64>,
    /// Distance evaluations per query, where the library counts them.
    pub distances_per_query: Option<f64>,
}

/// The median of `v` (mean of the middle two for even lengths; 0 for an empty slice).
pub fn median(v: &[f64]) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    let m = s.len() / 2;
    if s.len() % 2 == 1 {
        s[m]
    } else {
        0.5 * (s[m - 1] + s[m])
    }
}

/// Parses JSON lines, skipping blank lines; fails on a line of another schema.
pub fn parse_lines(text: &str) -> anyhow::Result<Vec<Record>> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let r: Record = serde_json::from_str(line)
            .map_err(|e| anyhow::anyhow!("line {}: not a {SCHEMA} record: {e}", i + 1))?;
        if r.schema != SCHEMA {
            anyhow::bail!("line {}: schema `{}`, expected `{SCHEMA}`", i + 1, r.schema);
        }
        out.push(r);
    }
    Ok(out)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A complete record for tests.
    pub(crate) fn sample(library: &str, name: &str, points: &[(f64, f64)]) -> Record {
        Record {
            schema: SCHEMA.into(),
            suite: "quick".into(),
            env: Env {
                commit: "abc".into(),
                timestamp: 1,
                host: "h".into(),
                cpu: "cpu".into(),
                cpus: 2,
                gpu: serde_json::json!({"available": false, "reason": "none"}),
            },
            dataset: DatasetInfo {
                name: "tiny".into(),
                source: "preset sift".into(),
                n: 1000,
                nq: 100,
                dim: 8,
                dtype: "f32".into(),
                metric: "l2".into(),
                gt_k: 100,
            },
            algorithm: AlgorithmRun {
                library: library.into(),
                version: "0".into(),
                name: name.into(),
                backend: "cpu".into(),
                params: serde_json::json!({"degree": 32}),
                threads: 2,
                search_param: "beam_width".into(),
            },
            build: Some(BuildTimes::from_runs(vec![2.0, 1.0, 3.0], 0.5, 100)),
            memory: Some(Memory {
                peak_rss_mib: 10.0,
                rss_before_mib: 5.0,
                device_peak_mib: None,
            }),
            graph: None,
            sweep: points
                .iter()
                .map(|&(r, q)| SweepPoint {
                    batch: 100,
                    param: 10.0,
                    k: 10,
                    queries: 100,
                    qps: q,
                    recall_at_1: r,
                    recall_at_10: Some(r),
                    recall_at_100: None,
                    distances_per_query: None,
                })
                .collect(),
            error: None,
        }
    }

    #[test]
    fn record_round_trips_as_one_line() {
        let r = sample("weft", "nndescent", &[(0.9, 1000.0)]);
        let line = serde_json::to_string(&r).unwrap();
        assert!(!line.contains('\n'));
        let back = parse_lines(&format!("{line}\n\n{line}\n")).unwrap();
        assert_eq!(back, vec![r.clone(), r]);
        let b = back[0].build.as_ref().unwrap();
        assert_eq!((b.median_s, b.min_s, b.max_s), (2.0, 1.0, 3.0));
    }

    #[test]
    fn schema_fields_are_the_documented_ones() {
        let v = serde_json::to_value(sample("weft", "x", &[(0.5, 1.0)])).unwrap();
        for key in [
            "schema",
            "suite",
            "env",
            "dataset",
            "algorithm",
            "build",
            "memory",
            "graph",
            "sweep",
            "error",
        ] {
            assert!(v.get(key).is_some(), "missing {key}");
        }
        for key in ["commit", "gpu", "cpu", "cpus"] {
            assert!(v["env"].get(key).is_some(), "missing env.{key}");
        }
        for key in ["params", "threads", "library", "version", "backend"] {
            assert!(v["algorithm"].get(key).is_some(), "missing algorithm.{key}");
        }
    }

    #[test]
    fn a_peers_line_parses_and_other_schemas_are_refused() {
        // The shape benches/peers/ann_peers.py writes (null graph and memory fields allowed).
        let line = r#"{"schema":"weft-bench/1","suite":"quick","env":{"commit":"c","timestamp":0,"host":"h","cpu":"c","cpus":2,"gpu":{"available":false}},"dataset":{"name":"d","source":"s","n":10,"nq":2,"dim":4,"dtype":"f32","metric":"l2","gt_k":100},"algorithm":{"library":"hnswlib","version":"0.8.0","name":"hnsw","backend":"cpu","params":{"M":16},"threads":2,"search_param":"ef"},"build":{"runs_s":[1.0],"median_s":1.0,"min_s":1.0,"max_s":1.0,"warmup_s":0.0,"warmup_rows":0},"memory":null,"graph":null,"sweep":[{"batch":2,"param":10,"k":10,"queries":2,"qps":5.0,"recall_at_1":1.0,"recall_at_10":0.5,"recall_at_100":null,"distances_per_query":null}],"error":null}"#;
        let r = parse_lines(line).unwrap();
        assert_eq!(r[0].algorithm.library, "hnswlib");
        assert_eq!(r[0].sweep[0].recall_at_10, Some(0.5));
        let other = line.replace("weft-bench/1", "weft-bench/0");
        assert!(parse_lines(&other).is_err());
        assert!(parse_lines("{\"schema\": 1}").is_err());
    }

    #[test]
    fn a_cuvs_peer_line_parses() {
        // The shape benches/peers/cuvs_peer.py writes (a line of the H100 run at 9d5e91f, one
        // sweep point kept): GPU described, device peak memory not sampled.
        let line = r#"{"schema": "weft-bench/1", "suite": "quick", "env": {"commit": "9d5e91f1fa939273a2e7ebf01812615315dbd590", "timestamp": 1795719176, "host": "vm", "cpu": "Intel(R) Xeon(R) Processor", "cpus": 16, "gpu": {"available": true, "device": {"name": "NVIDIA H100 80GB HBM3", "compute_capability": [9, 0], "driver_version": 13000, "memory_mib": 81079}, "kernel_mode": "cuVS wheels (precompiled)", "cubins": ["libcuvs"]}}, "dataset": {"name": "sift-like-100k", "source": "weft-io synthetic preset `sift`, seed 0", "n": 100000, "nq": 10000, "dim": 128, "dtype": "f32", "metric": "l2", "gt_k": 100}, "algorithm": {"library": "cuvs", "version": "26.10.0", "name": "nndescent", "backend": "gpu", "params": {"graph_degree": 64, "intermediate_graph_degree": 128, "max_iterations": 20, "termination_threshold": 9.999999747378752e-05, "metric": "sqeuclidean", "input": "host", "rmm_pool": true}, "threads": 1, "search_param": "itopk"}, "build": {"runs_s": [0.8943726910000009, 0.848432895999963], "median_s": 0.871402793499982, "min_s": 0.848432895999963, "max_s": 0.8943726910000009, "warmup_s": 0.2837295609999728, "warmup_rows": 10000}, "memory": {"peak_rss_mib": 735.53125, "rss_before_mib": 459.73046875, "device_peak_mib": null}, "graph": {"recall_at_10": 1.0, "recall_k": 64, "recall_at_k": 0.977484375, "sample": 1000, "out_degree": [64.0, 64.0, 64.0], "in_degree": [0.0, 64.0, 864.0], "unreachable": 89, "scc_count": null}, "sweep": [{"batch": 10000, "param": 32.0, "k": 32, "queries": 10000, "qps": 2512263.6, "recall_at_1": 0.9359, "recall_at_10": 0.92536, "recall_at_100": null, "distances_per_query": null}], "error": null}"#;
        let r = parse_lines(line).unwrap();
        assert_eq!(crate::report::label(&r[0]), "cuvs nndescent (gpu)");
        assert_eq!(r[0].env.gpu["device"]["name"], "NVIDIA H100 80GB HBM3");
        assert_eq!(r[0].sweep[0].recall_at_10, Some(0.92536));
        assert_eq!(r[0].memory.as_ref().unwrap().device_peak_mib, None);
    }

    #[test]
    fn the_cuvs_peer_self_check_writes_lines_this_schema_reads() {
        // cuvs_peer.py --self-check runs its record path with a numpy stand-in (no GPU). It
        // needs a Python with numpy: WEFT_PEERS_PYTHON (`cargo xtask test` provides one), the
        // peers' virtual environment, or python3.
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
        let venv = root.join("../target/peers-venv/bin/python");
        let python = std::env::var("WEFT_PEERS_PYTHON").unwrap_or_else(|_| {
            if venv.exists() {
                venv.display().to_string()
            } else {
                "python3".into()
            }
        });
        let has_numpy = std::process::Command::new(&python)
            .args(["-c", "import numpy"])
            .output()
            .is_ok_and(|o| o.status.success());
        assert!(
            has_numpy,
            "no Python with numpy ({python}): run the tests with `cargo xtask test`, which \
             provides one, or set WEFT_PEERS_PYTHON"
        );
        let out = std::process::Command::new(&python)
            .arg(root.join("peers/cuvs_peer.py"))
            .arg("--self-check")
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let records = parse_lines(&String::from_utf8_lossy(&out.stdout)).unwrap();
        let names: Vec<_> = records.iter().map(crate::report::label).collect();
        // Both element types of `--dtype f32,f16`: the f32 run, then the same build searched
        // over f16 copies of the data and queries.
        assert_eq!(
            names,
            [
                "cuvs nndescent (gpu)",
                "cuvs nndescent (gpu, f16 data)",
                "cuvs cagra (gpu)",
                "cuvs cagra (gpu, f16 data)"
            ]
        );
        for r in &records {
            assert_eq!(r.algorithm.search_param, "itopk");
            assert!(r.build.is_some() && r.graph.is_some() && r.error.is_none());
            assert!(r.sweep.iter().any(|p| p.batch == 1));
            assert!(r.sweep.iter().any(|p| p.batch == r.dataset.nq));
        }
    }

    #[test]
    fn median_of_even_and_odd() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), 2.5);
        assert_eq!(median(&[]), 0.0);
    }
}
