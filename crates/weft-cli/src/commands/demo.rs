//! `weft demo`: the embedded default job.

use std::time::Instant;

use anyhow::{Result, anyhow};
use serde_json::json;
use weft::graph::stats::graph_stats;
use weft::graph::storage::GraphKind;
use weft::io::{IdMatrix, Preset};
use weft::{AlgorithmInfo, AnyDataset, Backend, Index, Produces, SearchParams};

use super::eval::{EvalQueries, Point, sweep_with, table};
use super::search::{KNN_GRAPH_NOTE, entry_points, entry_points_json, graph_kind_fields};
use super::{Report, metric_json, recall_ratio, require_gpu, secs, tidy_floats};
use crate::progress::Session;

/// Arguments of `weft demo`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Dataset preset: sift, deep, gist, glove or clustered.
    #[arg(long, default_value = "sift")]
    pub preset: String,
    /// Base vectors.
    #[arg(long, short, default_value_t = 20_000)]
    pub n: usize,
    /// Queries.
    #[arg(long, default_value_t = 1_000)]
    pub queries: usize,
    /// The k of recall@k.
    #[arg(long, short, default_value_t = 10)]
    pub k: usize,
    /// Neighbours per vertex for k-NN graph builders.
    #[arg(long, default_value_t = 32)]
    pub graph_k: usize,
    /// Algorithms to run (comma-separated; default: every algorithm of the chosen back end).
    /// On the GPU path an algorithm without a GPU back end (rnndescent) runs on the CPU.
    #[arg(long, value_delimiter = ',')]
    pub algos: Vec<String>,
    /// Where to build and search: auto (the GPU when one is usable, else the CPU), gpu, cpu,
    /// or both (the GPU path, then the same algorithms on the CPU for comparison).
    #[arg(long, value_enum, default_value_t = DemoBackend::Auto)]
    pub backend: DemoBackend,
    /// Also build and search on the CPU, for comparison with the GPU (the same as `--backend
    /// both`; nothing to compare without a GPU).
    #[arg(long)]
    pub compare_cpu: bool,
    /// Seed.
    #[arg(long, default_value_t = 42)]
    pub seed: u64,
}

/// `weft demo --backend`.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum DemoBackend {
    /// The GPU when one is usable, else the CPU.
    Auto,
    /// The GPU (an error without a usable GPU).
    Gpu,
    /// The CPU, even with a GPU present.
    Cpu,
    /// The GPU, then the CPU for comparison (an error without a usable GPU).
    Both,
}

/// The back ends the demo builds and searches on, in order: the main path first.
pub fn demo_backends(choice: DemoBackend, compare_cpu: bool, gpu: bool) -> Vec<Backend> {
    match (choice, gpu) {
        (DemoBackend::Cpu, _) | (DemoBackend::Auto, false) => vec![Backend::Cpu],
        (DemoBackend::Both, _) => vec![Backend::Gpu, Backend::Cpu],
        (DemoBackend::Gpu | DemoBackend::Auto, _) if compare_cpu => {
            vec![Backend::Gpu, Backend::Cpu]
        }
        (DemoBackend::Gpu | DemoBackend::Auto, _) => vec![Backend::Gpu],
    }
}

/// The registry entries the demo runs: for each algorithm (registry order; those of `names`
/// when given) and each back end of `backends`, the entry on that back end, else, for the main
/// (first) back end only, its entry on the other one (rnndescent has no GPU back end). A name
/// that no entry has is an error.
pub fn demo_algorithms(
    list: &[AlgorithmInfo],
    names: &[String],
    backends: &[Backend],
) -> Result<Vec<AlgorithmInfo>> {
    for n in names {
        if !list.iter().any(|a| a.name.eq_ignore_ascii_case(n)) {
            return Err(anyhow!(
                "`{n}` is not an algorithm of this build (see `weft algos`)"
            ));
        }
    }
    let mut order: Vec<&'static str> = vec![];
    for a in list {
        let wanted = names.is_empty() || names.iter().any(|n| n.eq_ignore_ascii_case(a.name));
        if wanted && !order.contains(&a.name) {
            order.push(a.name);
        }
    }
    let main = backends[0];
    let mut out = vec![];
    for name in order {
        let on = |b: Backend| list.iter().find(|a| a.name == name && a.backend == b);
        if names.is_empty() && on(main).is_none() {
            // Without --algos, each path shows its own algorithms.
            continue;
        }
        for (i, &b) in backends.iter().enumerate() {
            let entry = match on(b) {
                Some(a) => Some(a),
                None if i == 0 => list.iter().find(|a| a.name == name),
                None => None,
            };
            if let Some(a) = entry
                && !out
                    .iter()
                    .any(|o: &AlgorithmInfo| (o.name, o.backend) == (a.name, a.backend))
            {
                out.push(a.clone());
            }
        }
    }
    if out.is_empty() {
        return Err(anyhow!(
            "none of {names:?} runs on the chosen back end (see `weft algos`)"
        ));
    }
    Ok(out)
}

/// Generates a dataset, builds the graphs of the chosen back end (the GPU's when one is usable),
/// searches each where it was built, and reports build time, graph statistics, recall and QPS.
pub fn run(args: &Args, s: &Session) -> Result<Report> {
    let started = Instant::now();
    let preset = Preset::from_name(&args.preset)
        .ok_or_else(|| anyhow!("unknown preset `{}`", args.preset))?;
    let metric = preset.metric();
    s.stage("generating data");
    let generator = preset.generator(args.seed)?;
    let base = generator.base(args.n)?;
    let queries = AnyDataset::from(generator.queries(args.queries)?);
    s.done();
    let base = AnyDataset::from(base);

    let ctx = s.ctx(args.seed);
    let registry = s.build_registry("weft demo")?;
    if matches!(args.backend, DemoBackend::Gpu | DemoBackend::Both) {
        require_gpu(&registry)?;
    }
    let backends = demo_backends(
        args.backend,
        args.compare_cpu,
        registry.gpu().is_available(),
    );
    let algos = demo_algorithms(&registry.list(), &args.algos, &backends)?;

    let mut results = vec![];
    let path = backends
        .iter()
        .map(|b| b.name())
        .collect::<Vec<_>>()
        .join(" + ");
    let mut text = format!(
        "weft demo: {} x {} {}-like vectors, {} queries, metric {}, k = {}, {} threads, GPU: {:?}\n\
         builds and searches on the {path}{}\n",
        args.n,
        base.dim(),
        preset.name(),
        args.queries,
        metric,
        args.k,
        s.threads(),
        registry.gpu(),
        if backends == [Backend::Gpu] {
            " (--compare-cpu adds the CPU)"
        } else {
            ""
        }
    );
    s.stage("exact ground truth");
    let start = Instant::now();
    let (exact, gt_backend) =
        registry.exact_search(&base, &queries, metric, args.k, Some(backends[0]), &ctx)?;
    s.done();
    let gt_seconds = start.elapsed().as_secs_f64();
    text += &format!(
        "ground truth: exact search on the {} in {}\n",
        gt_backend.name(),
        secs(gt_seconds)
    );
    let gt = IdMatrix::new(exact.ids, args.queries, args.k)?;
    for algo in algos {
        let k = matches!(algo.produces, Produces::KnnGraph).then_some(args.graph_k);
        s.stage(&format!("building {} ({})", algo.name, algo.backend.name()));
        let start = Instant::now();
        let request = weft::BuildRequest {
            algorithm: algo.name,
            backend: Some(algo.backend),
            params: &serde_json::Value::Null,
            k,
        };
        let index = Index::build_with(&registry, base.clone(), metric, request, &ctx)?;
        let build_seconds = start.elapsed().as_secs_f64();
        s.done();
        // Where the searches below (seed 0) start: a k-NN graph's spread entry points.
        let (entries, entry_seconds) = entry_points(&index, 0, s)?;
        let stats = graph_stats(index.graph().as_view(), Some(&entries.ids))?;
        let knn = index.graph_kind() == GraphKind::Knn;
        // A k-NN graph's own quality: recall@k of its rows against exact neighbours, on a
        // sample (the exact builder's is 1 by construction).
        let graph_recall = if knn && algo.name != "exact" {
            s.stage(&format!("graph recall of {}", algo.name));
            let r = knn_graph_recall(&index, &base, metric, args.k.min(args.graph_k), &ctx)?;
            s.done();
            Some(r)
        } else {
            None
        };
        let truth = &gt;
        let points: Vec<Point> = if algo.name == "exact" {
            // The exact builder is the reference: search exhaustively on its own back end.
            let start = Instant::now();
            let (found, _) =
                registry.exact_search(&base, &queries, metric, args.k, Some(algo.backend), &ctx)?;
            let seconds = start.elapsed().as_secs_f64();
            let recall =
                weft::exact::recall::search_recall(&found, truth.as_slice(), truth.cols(), args.k)?;
            vec![Point {
                beam_width: 0,
                recall: recall_ratio(recall.mean, args.queries, args.k),
                qps: args.queries as f64 / seconds.max(1e-9),
                distances_per_query: base.rows() as f64,
                backend: algo.backend.name(),
            }]
        } else {
            let beams: Vec<usize> = [1, 2, 4, 8, 16].iter().map(|m| m * args.k).collect();
            s.stage(&format!(
                "searching {} ({})",
                algo.name,
                algo.backend.name()
            ));
            // Each graph is searched where it was built: on the GPU path by the GPU search.
            let params = SearchParams {
                backend: algo.backend,
                ..SearchParams::default()
            };
            let eval = EvalQueries {
                queries: &queries,
                gt: truth,
                k: args.k,
            };
            let p = sweep_with(&index, eval, &beams, 1, &params, s)?;
            s.done();
            p
        };
        let search_backend = points.first().map_or(algo.backend.name(), |p| p.backend);
        text += &format!(
            "\n{} ({}){}: built in {}, degree {} (mean {:.1}), {:.4} reachable{}\n",
            algo.name,
            algo.backend.name(),
            if knn {
                ", k-NN graph, not a search graph"
            } else {
                ""
            },
            secs(build_seconds),
            stats.max_degree,
            stats.out_degree.mean,
            stats.reachable_fraction,
            if knn {
                format!(" from {} spread entry points", entries.ids.len())
            } else {
                String::new()
            }
        );
        if let Some(r) = &graph_recall {
            text += &format!(
                "  graph recall@{}: {:.4} (its rows against exact neighbours, {} sampled rows)\n",
                r.k, r.mean, r.rows
            );
        }
        if knn && algo.name != "exact" {
            text += &format!(
                "  searched from {} entry points spread over the data; no entry points stored, no connectivity repair\n",
                entries.ids.len()
            );
        }
        if algo.name == "exact" {
            text += &format!(
                "  exact search: recall@{} {:.4}, {:.0} queries/s\n",
                args.k, points[0].recall, points[0].qps
            );
        } else {
            text += &table(&points, args.k);
        }
        let mut row = json!({
            "algorithm": algo.name, "backend": algo.backend, "search_backend": search_backend, "build_seconds": build_seconds,
            "graph_recall": graph_recall.map(|r| json!({"k": r.k, "mean": r.mean, "min": r.min, "rows": r.rows})),
            "params": tidy_floats(index.meta().algorithm_params().unwrap_or_default()), "stats": stats, "search": points,
            // The exact builder's row is searched exhaustively, not from entry points.
            "entry_points": if algo.name == "exact" {
                serde_json::Value::Null
            } else {
                entry_points_json(&entries, entry_seconds)
            },
        });
        let obj = row.as_object_mut().expect("an object");
        obj.extend(graph_kind_fields(index.graph_kind()));
        if knn {
            obj.insert("note".into(), KNN_GRAPH_NOTE.into());
        }
        results.push(row);
    }
    // How the kernels reached the GPU: a build with cubins compiles nothing.
    let kernels = registry.gpu().kernel_load_paths();
    if !kernels.is_empty() {
        text += &format!(
            "\nkernels: {}\n",
            kernels
                .iter()
                .map(|(m, p)| format!("{m} {p}"))
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    let total = started.elapsed().as_secs_f64();
    text += &format!("\ndemo done in {}\n", secs(total));
    Ok(Report {
        json: json!({
            "seconds": total,
            "kernels": kernels.iter().map(|(m, p)| json!({"module": m, "path": p})).collect::<Vec<_>>(),
            "preset": preset.name(), "n": args.n, "queries": args.queries, "dim": base.dim(), "metric": metric_json(metric),
            "k": args.k, "threads": s.threads(), "seed": args.seed, "gpu": registry.gpu().describe(),
            "backend": backends[0], "backends": backends,
            "ground_truth": { "backend": gt_backend, "seconds": gt_seconds }, "results": results,
        }),
        text,
    })
}

/// Rows of a k-NN graph whose recall the demo measures.
const GRAPH_RECALL_SAMPLE: usize = 1000;

/// Recall@k of the k-NN graph of `index` on a seeded sample of its rows, against their exact
/// neighbours in `base` (ties at the k-th distance count).
fn knn_graph_recall(
    index: &Index,
    base: &AnyDataset,
    metric: weft::Metric,
    k: usize,
    ctx: &weft::BuildCtx,
) -> Result<weft::exact::recall::Recall> {
    let g = index.graph().as_view();
    let k = k.min(g.max_degree()).max(1);
    Ok(match base {
        AnyDataset::F32(x) => sampled(g, x.view(), metric, k, ctx)?,
        AnyDataset::F16(x) => sampled(g, x.view(), metric, k, ctx)?,
        AnyDataset::U8(x) => sampled(g, x.view(), metric, k, ctx)?,
        AnyDataset::I8(x) => sampled(g, x.view(), metric, k, ctx)?,
    })
}

/// [`weft::exact::recall::sampled_graph_recall`] on [`GRAPH_RECALL_SAMPLE`] rows, ties at the
/// k-th distance counted.
fn sampled<T: weft::Element>(
    g: &dyn weft::graph::GraphView,
    base: weft::DatasetView<'_, T>,
    metric: weft::Metric,
    k: usize,
    ctx: &weft::BuildCtx,
) -> weft::Result<weft::exact::recall::Recall> {
    use weft::exact::recall::{Ties, sampled_graph_recall};
    sampled_graph_recall(g, base, metric, k, GRAPH_RECALL_SAMPLE, Ties::Distance, ctx)
}

#[cfg(test)]
mod tests {
    use super::*;
    use weft::Produces;

    fn info(name: &'static str, backend: Backend) -> AlgorithmInfo {
        AlgorithmInfo {
            name,
            backend,
            produces: Produces::SearchGraph,
            description: "",
            default_params: serde_json::Value::Null,
        }
    }

    fn names(v: &[AlgorithmInfo]) -> Vec<String> {
        v.iter()
            .map(|a| format!("{}/{}", a.name, a.backend.name()))
            .collect()
    }

    #[test]
    fn the_gpu_path_is_the_default_where_a_gpu_is_usable() {
        use DemoBackend::*;
        assert_eq!(demo_backends(Auto, false, true), [Backend::Gpu]);
        assert_eq!(demo_backends(Auto, false, false), [Backend::Cpu]);
        assert_eq!(
            demo_backends(Auto, true, true),
            [Backend::Gpu, Backend::Cpu]
        );
        // Nothing to compare with on a machine without a GPU.
        assert_eq!(demo_backends(Auto, true, false), [Backend::Cpu]);
        assert_eq!(
            demo_backends(Both, false, true),
            [Backend::Gpu, Backend::Cpu]
        );
        assert_eq!(demo_backends(Gpu, false, true), [Backend::Gpu]);
        assert_eq!(demo_backends(Cpu, true, true), [Backend::Cpu]);
    }

    #[test]
    fn each_path_runs_its_own_algorithms() {
        let list = [
            info("exact", Backend::Cpu),
            info("nndescent", Backend::Cpu),
            info("rnndescent", Backend::Cpu),
            info("exact", Backend::Gpu),
            info("nndescent", Backend::Gpu),
            info("grnnd", Backend::Gpu),
        ];
        let gpu = demo_algorithms(&list, &[], &[Backend::Gpu]).unwrap();
        assert_eq!(names(&gpu), ["exact/gpu", "nndescent/gpu", "grnnd/gpu"]);
        let cpu = demo_algorithms(&list, &[], &[Backend::Cpu]).unwrap();
        assert_eq!(
            names(&cpu),
            ["exact/cpu", "nndescent/cpu", "rnndescent/cpu"]
        );
        // The comparison: each GPU algorithm, then the same on the CPU where it has one.
        let both = demo_algorithms(&list, &[], &[Backend::Gpu, Backend::Cpu]).unwrap();
        assert_eq!(
            names(&both),
            [
                "exact/gpu",
                "exact/cpu",
                "nndescent/gpu",
                "nndescent/cpu",
                "grnnd/gpu"
            ]
        );
        // A named algorithm without a GPU back end runs on the CPU, once.
        let asked = ["RNNDescent".to_string(), "nndescent".to_string()];
        let got = demo_algorithms(&list, &asked, &[Backend::Gpu, Backend::Cpu]).unwrap();
        assert_eq!(
            names(&got),
            ["nndescent/gpu", "nndescent/cpu", "rnndescent/cpu"]
        );
        let err = demo_algorithms(&list, &["hnsw".to_string()], &[Backend::Gpu]).unwrap_err();
        assert!(err.to_string().contains("`hnsw`"), "{err}");
    }
}
