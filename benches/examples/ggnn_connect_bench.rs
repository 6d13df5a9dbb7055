//! Connectivity of GGNN hierarchies on strongly clustered data (issue 16), on the CPU: what the
//! paper's top-layer entry points strand, what the spread entry points and the connectivity
//! repair cost, and the GGNN CPU search's recall before and after.
//!
//! `cargo run --release -p weft-benches --example ggnn_connect_bench -- [--n 100000] [--dim 128]
//! [--clusters 100] [--queries 1000] [--seed 5] [--taus 0.5,1] [--few 16] [--preset NAME]`
//!
//! Data: `weft_testkit::graph::gaussian_mixture` (centres N(0, 3^2) per coordinate, unit
//! spread: at d = 128 two centres lie about 48 apart and two points of a cluster about 16,
//! so the exact k-NN graph is one component per cluster), or with `--preset` a weft-io
//! synthetic preset (`sift`, `glove`, ...; seed `--seed`, its metric; `--dim` and
//! `--clusters` ignored). Steps: build with the paper's
//! entry points and no repair (`repair = false, entry_points = 0`); search; then
//! `weft_ggnn::connect_hierarchy` with the defaults (256 spread entry points, repair), timed
//! (entry points alone, then everything); search again; then the repair from `--few` spread
//! entry points (fewer than the clusters, so that layer 0 needs bridges), timed.

use std::time::Instant;

use weft_core::{BuildCtx, GraphBuilder, Metric, Neighbors, Searcher};
use weft_ggnn::{GgnnCpu, GgnnParams, connect_hierarchy, layer_entry_points};
use weft_graph::hier::HierGraph;
use weft_graph::stats::Reachability;
use weft_search::{GgnnSearch, GgnnSearchParams, GgnnSearchTuning};
use weft_testkit::graph::{gaussian_mixture, ground_truth, recall_at_k};

fn arg<T: std::str::FromStr>(args: &[String], name: &str, default: T) -> T {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn unreachable_per_layer(g: &HierGraph) -> Vec<usize> {
    (0..g.num_layers())
        .map(|l| {
            let graph = g.layer_graph(l).expect("layer");
            let r = Reachability::new(graph, &layer_entry_points(g, l)).expect("reachability");
            graph.n() - r.num_reachable()
        })
        .collect()
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let n: usize = arg(&args, "--n", 100_000);
    let dim: usize = arg(&args, "--dim", 128);
    let clusters: usize = arg(&args, "--clusters", 100);
    let nq: usize = arg(&args, "--queries", 1000);
    let seed: u64 = arg(&args, "--seed", 5);
    let few: usize = arg(&args, "--few", 16);
    let taus: Vec<f32> = arg(&args, "--taus", "0.5,1".to_string())
        .split(',')
        .map(|t| t.parse().expect("tau"))
        .collect();
    let preset: String = arg(&args, "--preset", String::new());
    let (base, queries, metric) = if preset.is_empty() {
        let (b, q) = gaussian_mixture::<f32>(n, nq, dim, clusters, seed);
        (b, q, Metric::L2Squared)
    } else {
        let p = weft_io::synthetic::Preset::from_name(&preset).ok_or("unknown preset")?;
        let g = p.generator(seed)?;
        (g.base(n)?, g.queries(nq)?, p.metric())
    };
    let dim = base.dim();
    let truth = ground_truth(base.view(), queries.view(), metric, 10)?;
    let search = |g: &HierGraph, what: &str| -> Result<(), Box<dyn std::error::Error>> {
        for &tau in &taus {
            let p = GgnnSearchParams {
                tuning: GgnnSearchTuning {
                    tau,
                    ..Default::default()
                },
                ..Default::default()
            };
            let mut out = Neighbors::new(nq, 10);
            let t = Instant::now();
            GgnnSearch.search(g, base.view(), queries.view(), metric, &p, out.as_mut())?;
            println!(
                "{what}: tau {tau}: recall@10 {:.4} ({:.0} QPS)",
                recall_at_k(&out, &truth, 10),
                nq as f64 / t.elapsed().as_secs_f64()
            );
        }
        Ok(())
    };
    println!(
        "{n} x {dim} ({}), {nq} queries, {metric}, {} threads",
        if preset.is_empty() {
            format!("mixture of {clusters} clusters")
        } else {
            preset.clone()
        },
        rayon::current_num_threads()
    );

    let paper = GgnnParams {
        repair: false,
        entry_points: 0,
        ..Default::default()
    };
    let ctx = BuildCtx::new(seed);
    let t = Instant::now();
    let g = GgnnCpu.build(base.view(), metric, &paper, &ctx)?;
    println!(
        "build (repair off, top-layer entry points): {:.2} s; layers {:?}",
        t.elapsed().as_secs_f64(),
        (0..g.num_layers())
            .map(|l| g.layer_len(l))
            .collect::<Vec<_>>()
    );
    println!(
        "paper's entry points ({}): unreachable per layer {:?}",
        g.entry_points().len(),
        unreachable_per_layer(&g)
    );
    search(&g, "paper's entry points")?;

    let defaults = GgnnParams::default();
    let t = Instant::now();
    let spread = weft_graph::connect::spread_entry_points(
        base.view(),
        metric,
        defaults.entry_points,
        ctx.seed(),
    )?;
    println!(
        "spread_entry_points({}): {:.3} s",
        spread.len(),
        t.elapsed().as_secs_f64()
    );
    let t = Instant::now();
    let (fixed, report) = connect_hierarchy(&g, base.view(), metric, &defaults, &ctx)?;
    println!(
        "connect_hierarchy (defaults: entry points + repair of every layer, copies included): \
         {:.3} s, {report:?}",
        t.elapsed().as_secs_f64()
    );
    println!(
        "unreachable per layer after: {:?}",
        unreachable_per_layer(&fixed)
    );
    search(&fixed, "spread entry points + repair")?;

    let p = GgnnParams {
        entry_points: few,
        ..Default::default()
    };
    let t = Instant::now();
    let (few_g, report) = connect_hierarchy(&g, base.view(), metric, &p, &ctx)?;
    println!(
        "connect_hierarchy from {few} spread entry points: {:.3} s, {report:?}",
        t.elapsed().as_secs_f64()
    );
    println!(
        "unreachable per layer after: {:?}",
        unreachable_per_layer(&few_g)
    );
    search(&few_g, &format!("{few} entry points + repair"))?;
    Ok(())
}
