//! Times the CAGRA graph optimisation alone on the GPU.
//!
//! ```text
//! cagra_gpu_bench [--n 1000000] [--k 128] [--degree 64] [--runs 5] [--check]
//! ```
//!
//! Builds a SIFT-like synthetic set (weft-io preset `sift`, seed 1), its exact k-NN graph on the
//! GPU (`ExactGpu::knn_graph_device`), then times `CagraOptimizer::optimize_device` (k-NN graph
//! already on the device, result left on the device: kernels, allocations and the final
//! synchronisation) and `CagraOptimizer::optimize` (host graph in, host graph out: plus the
//! upload of the ids and the download of the result). Prints one JSON line. `--check` also
//! runs the CPU optimiser and requires the same graph.

use std::time::Instant;

use weft_cagra::CagraCpu;
use weft_cagra::gpu::CagraOptimizer;
use weft_core::{BuildCtx, Metric};
use weft_exact::ExactGpu;
use weft_gpu::{DeviceKnnGraph, DeviceMatrix};

fn arg(args: &[String], name: &str, default: usize) -> usize {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .map(|v| v.parse().expect("a number"))
        .unwrap_or(default)
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() -> weft_core::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let n = arg(&args, "--n", 1_000_000);
    let k = arg(&args, "--k", 128);
    let degree = arg(&args, "--degree", 64);
    let runs = arg(&args, "--runs", 5).max(1);
    let check = args.iter().any(|a| a == "--check");

    let ctx = weft_gpu::probe()?;
    let t = Instant::now();
    let base = weft_io::synthetic::Preset::Sift.generator(1)?.base(n)?;
    let gen_s = t.elapsed().as_secs_f64();
    let t = Instant::now();
    let dev = DeviceMatrix::upload(&ctx, base.view())?;
    let knn =
        ExactGpu::new(&ctx).knn_graph_device(&dev, Metric::L2Squared, k, &BuildCtx::new(0))?;
    drop(dev);
    let knn_s = t.elapsed().as_secs_f64();
    let dknn = DeviceKnnGraph::upload(&ctx, &knn)?;

    let opt = CagraOptimizer::new(&ctx);
    // Warm-up: loads the module.
    let first = opt.optimize_device(&dknn, degree)?;
    drop(first);
    let mut device_s = Vec::new();
    for _ in 0..runs {
        let t = Instant::now();
        let g = opt.optimize_device(&dknn, degree)?;
        device_s.push(t.elapsed().as_secs_f64());
        drop(g);
    }
    drop(dknn);
    let mut host_s = Vec::new();
    let mut graph = None;
    for _ in 0..runs.min(3) {
        let t = Instant::now();
        let g = opt.optimize(&knn, degree)?;
        host_s.push(t.elapsed().as_secs_f64());
        graph = Some(g);
    }
    let graph = graph.expect("at least one run");
    graph.validate()?;
    let mut cpu_s = None;
    if check {
        let t = Instant::now();
        let cpu = CagraCpu.optimize_knn(&knn, degree, &BuildCtx::new(0))?;
        cpu_s = Some(t.elapsed().as_secs_f64());
        assert_eq!(cpu.ids(), graph.ids(), "GPU and CPU graphs differ");
    }
    println!(
        "{}",
        serde_json::json!({
            "device": ctx.info().name,
            "n": n, "k": k, "degree": degree, "runs": runs,
            "generate_s": gen_s,
            "exact_knn_s": knn_s,
            "optimize_device_s": { "min": device_s.iter().cloned().fold(f64::INFINITY, f64::min), "median": median(&mut device_s) },
            "optimize_host_s": { "min": host_s.iter().cloned().fold(f64::INFINITY, f64::min), "median": median(&mut host_s) },
            "cpu_check_s": cpu_s,
            "checked_against_cpu": check,
        })
    );
    Ok(())
}
