//! Times `weft_exact::exact_search` on `.fbin` files (u32 rows, u32 dim, f32 row-major).
//! (Named `exact_cpu_bench` because `weft-gpu` has an `exact_bench` example: two examples of one
//! name overwrite each other in `target/release/examples/`.)
//!
//! ```text
//! cargo run --release -p weft-benches --example exact_cpu_bench -- \
//!     --base base.fbin --queries queries.fbin --k 10 --threads 2 --reps 3 [--metric l2] \
//!     [--ids-out ids.u32]
//! ```
//!
//! Runs one warm-up and `--reps` timed searches and prints one JSON object with the median wall
//! time, the queries per second and the median CPU seconds per search (all threads; steadier than
//! wall time on a busy machine). `--ids-out` writes the result ids (queries x k, u32 little-endian)
//! for comparison with another library. Without `--base`, searches random data
//! (`--n`, `--nq`, `--dim`).

use std::path::Path;
use std::time::Instant;

use weft_core::rng::SplitMix64;
use weft_core::{BuildCtx, DatasetView, Metric};
use weft_exact::exact_search;

/// Reads an `.fbin` file: u32 rows, u32 dim, then rows x dim little-endian f32.
fn read_fbin(path: &Path) -> Result<(Vec<f32>, usize, usize), String> {
    let bytes = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
    if bytes.len() < 8 {
        return Err(format!("{}: shorter than its header", path.display()));
    }
    let rows = u32::from_le_bytes(bytes[0..4].try_into().unwrap()) as usize;
    let dim = u32::from_le_bytes(bytes[4..8].try_into().unwrap()) as usize;
    let need = 8 + rows * dim * 4;
    if bytes.len() != need {
        return Err(format!(
            "{}: {rows} x {dim} needs {need} bytes, file has {}",
            path.display(),
            bytes.len()
        ));
    }
    let data = bytes[8..]
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
        .collect();
    Ok((data, rows, dim))
}

/// CPU seconds used by this process so far (user + system, all threads; Linux `/proc`, else 0):
/// less sensitive than wall time to other work on a busy machine.
fn cpu_seconds() -> f64 {
    let Ok(stat) = std::fs::read_to_string("/proc/self/stat") else {
        return 0.0;
    };
    // Fields after the parenthesised command name; utime and stime are fields 14 and 15.
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    (ticks(11) + ticks(12)) / 100.0
}

fn random(rows: usize, dim: usize, seed: u64) -> Vec<f32> {
    let mut r = SplitMix64::new(seed);
    (0..rows * dim).map(|_| r.next_f32() * 2.0 - 1.0).collect()
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let get = |name: &str| -> Option<String> {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1).cloned())
    };
    let num = |name: &str, default: usize| -> Result<usize, String> {
        get(name).map_or(Ok(default), |v| {
            v.parse().map_err(|e| format!("{name} {v}: {e}"))
        })
    };
    let k = num("--k", 10)?;
    let reps = num("--reps", 3)?.max(1);
    let threads = num("--threads", 0)?;
    let metric: Metric = get("--metric").as_deref().unwrap_or("l2").parse()?;

    let ((base, n, dim), (queries, nq, qdim)) = match (get("--base"), get("--queries")) {
        (Some(b), Some(q)) => (read_fbin(Path::new(&b))?, read_fbin(Path::new(&q))?),
        _ => {
            let (n, nq, dim) = (
                num("--n", 100_000)?,
                num("--nq", 10_000)?,
                num("--dim", 128)?,
            );
            ((random(n, dim, 1), n, dim), (random(nq, dim, 2), nq, dim))
        }
    };
    let base = DatasetView::new(&base, n, dim)?;
    let queries = DatasetView::new(&queries, nq, qdim)?;
    let ctx = BuildCtx::new(0).with_threads((threads > 0).then_some(threads));

    let mut res = exact_search(base, queries, metric, k, &ctx)?; // warm-up
    let mut times = Vec::with_capacity(reps);
    let mut cpu = Vec::with_capacity(reps);
    for _ in 0..reps {
        let (t, c) = (Instant::now(), cpu_seconds());
        res = exact_search(base, queries, metric, k, &ctx)?;
        times.push(t.elapsed().as_secs_f64());
        cpu.push(cpu_seconds() - c);
    }
    cpu.sort_by(f64::total_cmp);
    let cpu_median = cpu[cpu.len() / 2];
    let mut sorted = times.clone();
    sorted.sort_by(f64::total_cmp);
    let median = sorted[sorted.len() / 2];
    if let Some(path) = get("--ids-out") {
        let bytes: Vec<u8> = res.ids.iter().flat_map(|v| v.to_le_bytes()).collect();
        std::fs::write(&path, bytes).map_err(|e| format!("{path}: {e}"))?;
    }
    let isa = weft_core::distance::detect_isa().name();
    println!(
        "{{\"n\": {n}, \"nq\": {nq}, \"dim\": {dim}, \"k\": {k}, \"metric\": \"{}\", \"threads\": {}, \"isa\": \"{isa}\", \"median_s\": {median:.6}, \"qps\": {:.1}, \"cpu_s\": {cpu_median:.2}, \"times_s\": {:?}}}",
        metric.name(),
        if threads > 0 {
            threads
        } else {
            rayon::current_num_threads()
        },
        nq as f64 / median,
        times
    );
    Ok(())
}
