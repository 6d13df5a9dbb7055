//! Batch-1 latency through `weft::Index` (issue 18 item 4): one query per call, as a serving
//! loop issues them, on a CAGRA graph built on the GPU.
//!
//! ```text
//! cargo run --release -p weft-benches --example batch1_latency -- [--preset sift] [--n 1000000]
//!     [--nq 1000] [--beam-width 16,32,64] [--warm 100]
//! ```
//!
//! Generates the weft-io preset (seed 0), builds `Algorithm::Cagra` with the GPU back end,
//! computes the exact top 10 of the `--nq` queries on the CPU, then per beam width: `--warm` untimed
//! calls, and one timed `Index::search` call per query (the query uploaded, the search, the
//! results copied back into the returned `Neighbors`). Prints one JSON line per beam width: median,
//! p99 and mean latency of the calls, and recall@10.

use std::time::Instant;

use weft::io::Preset;
use weft::{Algorithm, Backend, CagraParams, Index, SearchParams};

fn arg(args: &[String], name: &str) -> Option<String> {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .cloned()
}

fn main() -> weft::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let preset: Preset = arg(&args, "--preset")
        .unwrap_or_else(|| "sift".into())
        .parse()?;
    let num = |name: &str, default: usize| {
        arg(&args, name).map_or(default, |v| v.parse().expect("a number"))
    };
    let n = num("--n", 1_000_000);
    let nq = num("--nq", 1000);
    let warm = num("--warm", 100);
    let beam_widths: Vec<usize> = arg(&args, "--beam-width")
        .unwrap_or_else(|| "16,32,64".into())
        .split(',')
        .map(|v| v.parse().expect("a number"))
        .collect();

    let generator = preset.generator(0)?;
    let base = generator.base(n)?;
    let queries = generator.queries(nq)?;
    let t = Instant::now();
    let index = Index::builder(Algorithm::Cagra(CagraParams::default()))
        .metric(preset.metric())
        .backend(Backend::Gpu)
        .seed(0)
        .build(base)?;
    let build_s = t.elapsed().as_secs_f64();
    let t = Instant::now();
    let truth = index.search(queries.view(), 10, &SearchParams::exact())?;
    let truth_s = t.elapsed().as_secs_f64();
    println!(
        "{}",
        serde_json::json!({
            "what": "setup", "preset": preset.name(), "n": n, "queries": nq,
            "build_s": build_s, "exact_truth_s": truth_s,
        })
    );
    for beam_width in beam_widths {
        let mut params = SearchParams::with_beam_width(beam_width);
        params.backend = Backend::Gpu;
        for q in 0..warm.min(nq) {
            index.search(queries.view().slice_rows(q..q + 1)?, 10, &params)?;
        }
        let mut latency = Vec::with_capacity(nq);
        let mut hits = 0usize;
        let mut backend = "";
        for q in 0..nq {
            let one = queries.view().slice_rows(q..q + 1)?;
            let t = Instant::now();
            let out = index.search(one, 10, &params)?;
            latency.push(t.elapsed().as_secs_f64());
            backend = out.backend;
            let want = truth.neighbors.row_ids(q);
            hits += out
                .neighbors
                .row_ids(0)
                .iter()
                .filter(|x| want.contains(x))
                .count();
        }
        let mean = latency.iter().sum::<f64>() / nq as f64;
        latency.sort_by(f64::total_cmp);
        let p99 = latency[(nq * 99 / 100).min(nq - 1)];
        println!(
            "{}",
            serde_json::json!({
                "what": "batch1", "beam_width": beam_width, "backend": backend, "queries": nq,
                "recall@10": hits as f64 / (nq * 10) as f64,
                "latency_ms_median": 1e3 * latency[nq / 2], "latency_ms_p99": 1e3 * p99,
                "latency_ms_mean": 1e3 * mean,
            })
        );
    }
    Ok(())
}
