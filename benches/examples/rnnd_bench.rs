//! Builds an RNN-Descent graph over an `.fbin` base set and sweeps the beam size of
//! [`weft_search::BeamSearch`] over an `.fbin` query set, printing one JSON object: build time
//! and, per L, recall@10 against an `.ibin` ground truth and queries per second.
//!
//! ```text
//! cargo run --release -p weft-benches --example rnnd_bench -- \
//!     --base base.fbin --query query.fbin --gt gt.ibin [--threads 2] [--s 20] [--r 64] \
//!     [--t1 3] [--t2 10] [--degree 32] [--truncate true] [--final-reverse false] [--fill 0.5] \
//!     [--ls 10,16,24,32,48,64,96,128] [--reps 3] [--seed 1] [--random-entries 0]
//! ```
//!
//! `.fbin`: u32 rows, u32 dim, then rows * dim little-endian f32; `.ibin` the same with i32.

use std::time::Instant;

use weft_core::{BuildCtx, DatasetView, Metric, Neighbors, Searcher};
use weft_rnndescent::{RnnDescentCpu, RnnDescentParams};
use weft_search::{BeamSearch, BeamSearchParams, EntryPoints};

/// Reads a `.fbin`/`.ibin` file: (rows, dim, raw 4-byte words).
fn read_bin(path: &str) -> (usize, usize, Vec<u32>) {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("cannot read {path}: {e}"));
    assert!(bytes.len() >= 8, "{path}: no header");
    let word = |i: usize| u32::from_le_bytes(bytes[4 * i..4 * i + 4].try_into().unwrap());
    let (rows, dim) = (word(0) as usize, word(1) as usize);
    assert_eq!(
        bytes.len(),
        8 + 4 * rows * dim,
        "{path}: size does not match header"
    );
    (rows, dim, (0..rows * dim).map(|i| word(2 + i)).collect())
}

/// CPU seconds (user + system, all threads) this process has used, from `/proc/self/stat`
/// (Linux; 0 elsewhere). Less sensitive than wall time to other processes on a busy machine.
fn cpu_seconds() -> f64 {
    let Ok(stat) = std::fs::read_to_string("/proc/self/stat") else {
        return 0.0;
    };
    // Fields after the parenthesised command name; utime and stime are fields 14 and 15.
    let rest = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    // Field 14 is index 11 after the state field (field 3 is index 0); clock ticks are 1/100 s.
    (ticks(11) + ticks(12)) / 100.0
}

fn arg<T: std::str::FromStr>(args: &[String], name: &str, default: T) -> T {
    match args.iter().position(|a| a == name) {
        Some(i) => args
            .get(i + 1)
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("bad value for {name}")),
        None => default,
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let base_path: String = arg(&args, "--base", String::new());
    let query_path: String = arg(&args, "--query", String::new());
    let gt_path: String = arg(&args, "--gt", String::new());
    let threads: usize = arg(&args, "--threads", 2);
    let reps: usize = arg(&args, "--reps", 3);
    let seed: u64 = arg(&args, "--seed", 1);
    let ls: String = arg(&args, "--ls", "10,16,24,32,48,64,96,128".to_string());
    let d = RnnDescentParams::default();
    let params = RnnDescentParams {
        s: arg(&args, "--s", d.s),
        r: arg(&args, "--r", d.r),
        t1: arg(&args, "--t1", d.t1),
        t2: arg(&args, "--t2", d.t2),
        degree: arg(&args, "--degree", d.degree),
        truncate_updates: arg(&args, "--truncate", d.truncate_updates),
        final_reverse_edges: arg(&args, "--final-reverse", d.final_reverse_edges),
        fill_fraction: arg(&args, "--fill", d.fill_fraction),
        ..d
    };
    let k = 10;
    let entries: usize = arg(&args, "--random-entries", 0);

    let (n, dim, base) = read_bin(&base_path);
    let base: Vec<f32> = base.into_iter().map(f32::from_bits).collect();
    let (nq, qdim, queries) = read_bin(&query_path);
    assert_eq!(qdim, dim, "query dimension");
    let queries: Vec<f32> = queries.into_iter().map(f32::from_bits).collect();
    let (gq, gk, gt) = read_bin(&gt_path);
    assert!(gq == nq && gk >= k, "ground truth shape");
    let base = DatasetView::new(&base, n, dim).unwrap();
    let queries = DatasetView::new(&queries, nq, dim).unwrap();

    let ctx = BuildCtx::new(seed).with_threads(Some(threads));
    let t = Instant::now();
    let c = cpu_seconds();
    let (graph, build_stats) = RnnDescentCpu
        .build_with_stats(base, Metric::L2Squared, &params, &ctx)
        .expect("build");
    let build_s = t.elapsed().as_secs_f64();
    let build_cpu_s = cpu_seconds() - c;
    graph.validate().expect("valid graph");
    let edges: usize = (0..n)
        .map(|v| weft_core::GraphView::neighbors(&graph, v as u32).len())
        .sum();
    // FNV-1a over every row and the entry points: equal hashes, equal graphs (determinism checks).
    let mut graph_hash: u64 = 0xcbf2_9ce4_8422_2325;
    let rows_and_entries = (0..n)
        .flat_map(|v| weft_core::GraphView::neighbors(&graph, v as u32).to_vec())
        .chain([u32::MAX])
        .chain(weft_core::GraphView::entry_points(&graph).to_vec());
    for id in rows_and_entries {
        graph_hash = (graph_hash ^ u64::from(id)).wrapping_mul(0x0100_0000_01b3);
    }

    let mut rows = Vec::new();
    for l in ls.split(',').map(|s| s.trim().parse::<usize>().expect("L")) {
        let sp = BeamSearchParams {
            entry_points: if entries == 0 {
                EntryPoints::Graph
            } else {
                EntryPoints::Random { count: entries }
            },
            ..BeamSearchParams::with_beam_width(l.max(k))
        };
        let mut out = Neighbors::new(nq, k);
        let mut times = Vec::new();
        let mut cpu_times = Vec::new();
        let mut dcs = 0;
        for _ in 0..reps.max(1) {
            let t = Instant::now();
            let c = cpu_seconds();
            let stats = ctx
                .install(|| {
                    BeamSearch.search(&graph, base, queries, Metric::L2Squared, &sp, out.as_mut())
                })
                .expect("pool")
                .expect("search");
            times.push(t.elapsed().as_secs_f64());
            cpu_times.push(cpu_seconds() - c);
            dcs = stats.distance_computations;
        }
        times.sort_by(f64::total_cmp);
        let secs = times[times.len() / 2];
        cpu_times.sort_by(f64::total_cmp);
        let cpu_secs = cpu_times[cpu_times.len() / 2].max(1e-3);
        let mut hits = 0usize;
        for q in 0..nq {
            let truth = &gt[q * gk..q * gk + k];
            hits += out
                .row_ids(q)
                .iter()
                .filter(|id| truth.contains(id))
                .count();
        }
        rows.push(format!(
            "{{\"l\": {l}, \"recall\": {:.5}, \"qps\": {:.1}, \"cpu_qps\": {:.1}, \
             \"dist_per_query\": {:.1}}}",
            hits as f64 / (nq * k) as f64,
            nq as f64 / secs,
            nq as f64 / (cpu_secs / threads as f64),
            dcs as f64 / nq as f64
        ));
    }
    println!(
        "{{\"algorithm\": \"rnndescent\", \"n\": {n}, \"dim\": {dim}, \"threads\": {threads}, \
         \"s\": {}, \"r\": {}, \"t1\": {}, \"t2\": {}, \"degree\": {}, \"truncate\": {}, \
         \"build_s\": {build_s:.3}, \"build_cpu_s\": {build_cpu_s:.3}, \"build_distances\": {}, \
         \"graph_hash\": \"{graph_hash:016x}\", \"avg_degree\": {:.2}, \"sweep\": [{}]}}",
        params.s,
        params.r,
        params.t1,
        params.t2,
        params.degree,
        params.truncate_updates,
        build_stats.distance_computations,
        edges as f64 / n as f64,
        rows.join(", ")
    );
}
