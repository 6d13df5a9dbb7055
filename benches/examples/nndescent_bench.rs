//! Times [`NnDescentCpu`] on a `.fbin` file and prints one JSON line: build time, graph recall on
//! a sample against a ground-truth file, peak RSS.
//!
//! ```text
//! cargo run --release -p weft-benches --example nndescent_bench -- DATA.fbin GT.bin \
//!     [--k 32] [--seed 0] [--threads N] [--params '{"max_candidates": 24}']
//! ```
//! - `DATA.fbin`: u32 rows, u32 dim, then rows x dim f32 (little endian, row-major).
//! - `GT.bin` (or `-` for none): u32 m, u32 k, m u32 sample ids, then m x k u32 exact neighbour ids (self
//!   excluded), as written by `benches/peers/nndescent_vs_pynndescent.py`.

use std::io::Read;
use std::time::Instant;

use weft_core::{BuildCtx, DatasetView, KnnGraphBuilder, Metric};
use weft_nndescent::{NnDescentCpu, NnDescentParams};

fn read_u32s(bytes: &[u8]) -> Vec<u32> {
    bytes
        .chunks_exact(4)
        .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

fn peak_rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1).and_then(|v| v.parse().ok()))
        })
        .unwrap_or(0)
}

/// User + system CPU seconds of this process (from /proc/self/stat, 100 ticks per second).
fn cpu_secs() -> f64 {
    std::fs::read_to_string("/proc/self/stat")
        .ok()
        .and_then(|s| {
            let rest = s.rsplit_once(')')?.1;
            let f: Vec<&str> = rest.split_whitespace().collect();
            let u: f64 = f.get(11)?.parse().ok()?;
            let st: f64 = f.get(12)?.parse().ok()?;
            Some((u + st) / 100.0)
        })
        .unwrap_or(0.0)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 3 {
        return Err("usage: nndescent_bench DATA.fbin GT.bin [--k K] [--seed S] [--threads T] [--params JSON]".into());
    }
    let (mut k, mut seed, mut threads, mut params) =
        (32usize, 0u64, None, NnDescentParams::default());
    let mut i = 3;
    while i + 1 < args.len() {
        match args[i].as_str() {
            "--k" => k = args[i + 1].parse()?,
            "--seed" => seed = args[i + 1].parse()?,
            "--threads" => threads = Some(args[i + 1].parse()?),
            "--params" => params = serde_json::from_str(&args[i + 1])?,
            other => return Err(format!("unknown flag {other}").into()),
        }
        i += 2;
    }
    // Read in slices so that peak memory stays at one copy of the data.
    let mut file = std::fs::File::open(&args[1])?;
    let mut hdr = [0u8; 8];
    file.read_exact(&mut hdr)?;
    let hdr = read_u32s(&hdr);
    let (rows, dim) = (hdr[0] as usize, hdr[1] as usize);
    if file.metadata()?.len() != 8 + (rows * dim * 4) as u64 {
        return Err("data file size does not match its header".into());
    }
    let mut data: Vec<f32> = Vec::with_capacity(rows * dim);
    let mut slice = vec![0u8; 1 << 20];
    while data.len() < rows * dim {
        let want = ((rows * dim - data.len()) * 4).min(slice.len());
        file.read_exact(&mut slice[..want])?;
        data.extend(
            slice[..want]
                .chunks_exact(4)
                .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])),
        );
    }
    drop(slice);
    // GT.bin `-`: no recall (memory and time runs on sets without ground truth).
    let gt = if args[2] == "-" {
        vec![0, 1]
    } else {
        read_u32s(&std::fs::read(&args[2])?)
    };
    if gt.len() < 2 {
        return Err("ground-truth file too short".into());
    }
    let (m, gk) = (gt[0] as usize, gt[1] as usize);
    if gt.len() != 2 + m + m * gk {
        return Err("ground-truth file size does not match its header".into());
    }
    let sample = &gt[2..2 + m];
    let truth = &gt[2 + m..];
    let view = DatasetView::new(&data, rows, dim)?;
    let ctx = BuildCtx::new(seed).with_threads(threads);
    let c0 = cpu_secs();
    let t0 = Instant::now();
    let (graph, stats) =
        NnDescentCpu.build_with_stats(view, Metric::L2Squared, k, &params, &ctx)?;
    let secs = t0.elapsed().as_secs_f64();
    let cpu = cpu_secs() - c0;
    let kk = k.min(gk);
    let mut hits = 0usize;
    for (j, &v) in sample.iter().enumerate() {
        let row = &graph.row_ids(v as usize)[..kk];
        let t = &truth[j * gk..j * gk + kk];
        hits += row.iter().filter(|x| t.contains(x)).count();
    }
    let recall = if m == 0 {
        f64::NAN
    } else {
        hits as f64 / (m * kk) as f64
    };
    let _ = NnDescentCpu.name();
    println!(
        "{}",
        serde_json::json!({
            "impl": "weft-nndescent",
            "rows": rows, "dim": dim, "k": k,
            "threads": threads.unwrap_or_else(rayon::current_num_threads),
            "build_s": secs,
            "cpu_s": cpu,
            "recall": recall,
            "iterations": stats.iterations,
            "distance_computations": stats.distance_computations,
            "candidates": stats.candidates, "updates": stats.updates, "init_s": stats.init_secs, "sample_s": stats.sample_secs, "join_s": stats.join_secs, "apply_s": stats.apply_secs,
            "peak_rss_mib": peak_rss_kib() as f64 / 1024.0,
            "params": params,
        })
    );
    Ok(())
}
