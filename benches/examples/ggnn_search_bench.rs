//! Recall and throughput of the GGNN CPU query over a stored GGNN graph.
//!
//! `cargo run --release -p weft-benches --example ggnn_search_bench -- BASE.fbin QUERIES.fbin
//! GT.ivecs GRAPH.wgraph [TAU,TAU,...]`: for each tau, one warm-up pass and one timed pass of
//! k = 10 over all queries (all cores), then recall@1 (true 1-NN first), recall@10 and QPS.

use std::time::Instant;

use weft_core::{Metric, Neighbors, Searcher};
use weft_graph::storage::{self, LoadOptions};
use weft_io::ReadOptions;
use weft_search::{GgnnSearch, GgnnSearchParams, GgnnSearchTuning};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 5 {
        return Err("usage: BASE QUERIES GT GRAPH [TAUS]".into());
    }
    let base = weft_io::read::<f32>(&args[1], &ReadOptions::new())?;
    let queries = weft_io::read::<f32>(&args[2], &ReadOptions::new())?;
    let gt = weft_io::read_ids(&args[3], None)?;
    let (graph, meta) = storage::load(&args[4], LoadOptions::default())?;
    let graph = graph.into_hier()?;
    let taus: Vec<f32> = args
        .get(5)
        .map(|s| s.split(',').map(|t| t.parse().unwrap()).collect())
        .unwrap_or_else(|| vec![0.0, 0.2, 0.35, 0.5, 0.65, 0.8, 1.0]);
    let metric: Metric = meta.metric;
    let k = 10;
    let nq = queries.rows();
    println!("tau,recall@1,recall@10,qps,hops_per_query,dists_per_query");
    for tau in taus {
        let p = GgnnSearchParams {
            tuning: GgnnSearchTuning {
                tau,
                ..Default::default()
            },
            ..Default::default()
        };
        let mut out = Neighbors::new(nq, k);
        GgnnSearch.search(
            &graph,
            base.view(),
            queries.view(),
            metric,
            &p,
            out.as_mut(),
        )?;
        let start = Instant::now();
        let stats = GgnnSearch.search(
            &graph,
            base.view(),
            queries.view(),
            metric,
            &p,
            out.as_mut(),
        )?;
        let secs = start.elapsed().as_secs_f64();
        let (mut r1, mut r10) = (0usize, 0usize);
        for q in 0..nq {
            let truth = &gt.row(q)[..k];
            let found = out.row_ids(q);
            r1 += usize::from(found[0] == truth[0]);
            r10 += found.iter().filter(|id| truth.contains(id)).count();
        }
        println!(
            "{tau},{:.4},{:.4},{:.0},{:.1},{:.1}",
            r1 as f64 / nq as f64,
            r10 as f64 / (nq * k) as f64,
            nq as f64 / secs,
            stats.hops as f64 / nq as f64,
            stats.distance_computations as f64 / nq as f64
        );
    }
    Ok(())
}
