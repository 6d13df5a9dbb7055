//! The CPU beam search of one graph with and without the index's copies of the data and the
//! graph in huge pages ([`Index::with_huge_page_copy`]), interleaved: batch QPS, recall@10 and
//! distances per query at a few beam widths.
//!
//! `cargo run --release -p weft-benches --example huge_page_search -- BASE QUERIES GT GRAPH [THREADS]`
//! (vector files, a ground-truth id file with at least 10 columns, a graph file written by
//! `weft build`; THREADS default 2).

use weft::exact::recall::search_recall;
use weft::graph::storage::{self, LoadOptions};
use weft::index::SearchBackend;
use weft::io::ReadOptions;
use weft::{BuildCtx, Index, SearchParams};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [base, queries, gt, graph] = match &args[..args.len().min(4)] {
        [a, b, c, d] => [a, b, c, d],
        _ => return Err("usage: huge_page_search BASE QUERIES GT GRAPH [THREADS]".into()),
    };
    let threads: usize = args.get(4).map_or(Ok(2), |t| t.parse())?;
    let data = weft::io::read_any(base, &ReadOptions::default())?;
    let queries = weft::io::read_any(queries, &ReadOptions::default())?;
    let gt = weft::io::read_ids(gt, None)?;
    let (graph, meta) = storage::load(graph, LoadOptions::default())?;
    let with_copies = Index::from_parts(data, graph, meta)?;
    let without = with_copies.clone().with_huge_page_copy(false);
    let ctx = BuildCtx::new(0).with_threads(Some(threads));
    let k = 10;
    for pass in 0..3 {
        for beam in [10usize, 16, 32] {
            for (name, index) in [("4 KiB pages", &without), ("huge pages", &with_copies)] {
                let params = SearchParams {
                    backend: SearchBackend::Cpu,
                    ..SearchParams::with_beam_width(beam)
                };
                // A warm pass (it makes the copies), then the timed one.
                ctx.install(|| index.search_any(&queries, k, &params))??;
                let out = ctx.install(|| index.search_any(&queries, k, &params))??;
                let recall = search_recall(&out.neighbors, gt.as_slice(), gt.cols(), k)?;
                let rows = out.neighbors.rows() as f64;
                println!(
                    "pass {pass} beam {beam:3} {name:11}: {:8.0} QPS, recall@10 {:.4}, {:.1} distances per query",
                    rows / out.elapsed.as_secs_f64(),
                    recall.mean,
                    out.stats.distance_computations as f64 / rows
                );
            }
        }
    }
    Ok(())
}
