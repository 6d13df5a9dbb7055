//! `weft demo`: the embedded default job.

use std::time::Instant;

use anyhow::{Result, anyhow};
use serde_json::json;
use weft::graph::stats::graph_stats;
use weft::graph::storage::GraphKind;
use weft::io::{IdMatrix, Preset};
use weft::{AnyDataset, Index, Produces, Registry};

use super::eval::{Point, sweep, table};
use super::search::{KNN_GRAPH_NOTE, entry_points, entry_points_json, graph_kind_fields};
use super::{Report, metric_json, recall_ratio, secs, tidy_floats};
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
    /// Algorithms to run (comma-separated; default: every algorithm of this build).
    #[arg(long, value_delimiter = ',')]
    pub algos: Vec<String>,
    /// Seed.
    #[arg(long, default_value_t = 42)]
    pub seed: u64,
}

/// Generates a dataset, builds every available graph, searches and reports.
pub fn run(args: &Args, s: &Session) -> Result<Report> {
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
    let registry = Registry::available();
    let algos: Vec<_> = registry
        .list()
        .into_iter()
        .filter(|a| {
            args.algos.is_empty() || args.algos.iter().any(|n| n.eq_ignore_ascii_case(a.name))
        })
        .collect();
    if algos.is_empty() {
        return Err(anyhow!(
            "none of {:?} is an algorithm of this build (see `weft algos`)",
            args.algos
        ));
    }

    let mut results = vec![];
    let mut text = format!(
        "weft demo: {} x {} {}-like vectors, {} queries, metric {}, k = {}, {} threads, GPU: {:?}\n",
        args.n,
        base.dim(),
        preset.name(),
        args.queries,
        metric,
        args.k,
        s.threads(),
        registry.gpu()
    );
    s.stage("exact ground truth");
    let start = Instant::now();
    let (exact, gt_backend) = registry.exact_search(&base, &queries, metric, args.k, None, &ctx)?;
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
        let index = Index::build_with(
            &registry,
            base.clone(),
            metric,
            algo.name,
            Some(algo.backend),
            &serde_json::Value::Null,
            k,
            &ctx,
        )?;
        let build_seconds = start.elapsed().as_secs_f64();
        s.done();
        // Where the searches below (seed 0) start: a k-NN graph's spread entry points.
        let (entries, entry_seconds) = entry_points(&index, 0, s)?;
        let stats = graph_stats(index.graph().as_view(), Some(&entries.ids))?;
        let knn = index.graph_kind() == GraphKind::Knn;
        let truth = &gt;
        let points: Vec<Point> = if algo.name == "exact" {
            // The exact builder is the reference: search exhaustively on its own back end.
            let start = Instant::now();
            let (found, _) =
                registry.exact_search(&base, &queries, metric, args.k, Some(algo.backend), &ctx)?;
            let seconds = start.elapsed().as_secs_f64();
            let recall =
                weft::graph::recall::search_recall(&found, truth.as_slice(), truth.cols(), args.k)?;
            vec![Point {
                beam: 0,
                recall: recall_ratio(recall.mean, args.queries, args.k),
                qps: args.queries as f64 / seconds.max(1e-9),
                distances_per_query: base.rows() as f64,
            }]
        } else {
            let beams: Vec<usize> = [1, 2, 4, 8, 16].iter().map(|m| m * args.k).collect();
            s.stage(&format!("searching {}", algo.name));
            let p = sweep(&index, &queries, truth, args.k, &beams, 1, s)?;
            s.done();
            p
        };
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
            "algorithm": algo.name, "backend": algo.backend, "build_seconds": build_seconds,
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
    Ok(Report {
        json: json!({
            "preset": preset.name(), "n": args.n, "queries": args.queries, "dim": base.dim(), "metric": metric_json(metric),
            "k": args.k, "threads": s.threads(), "seed": args.seed, "gpu": registry.gpu().describe(),
            "ground_truth": { "backend": gt_backend, "seconds": gt_seconds }, "results": results,
        }),
        text,
    })
}
