//! Times exact k-NN on the GPU: `exact_bench [queries] [base] [dim] [k]` (default 10000 x
//! 1000000 x 128, k = 100, f32, L2). Prints the FLOP floor, the median of several searches
//! (host to host, base upload included) and the upload time alone, so that the device part can be
//! read off.

use std::time::Instant;

use weft_core::Dataset;
use weft_core::Metric;
use weft_core::rng::SplitMix64;
use weft_gpu::{DeviceMatrix, ExactGpu, probe};

fn arg(i: usize, default: usize) -> usize {
    std::env::args()
        .nth(i)
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let (nq, nb, dim, k) = (arg(1, 10_000), arg(2, 1_000_000), arg(3, 128), arg(4, 100));
    let ctx = probe()?;
    println!("device: {:?}", ctx.info());
    let mut r = SplitMix64::new(42);
    let base = Dataset::from_fn(nb, dim, |_, _| r.next_f32() * 2.0 - 1.0)?;
    let queries = Dataset::from_fn(nq, dim, |_, _| r.next_f32() * 2.0 - 1.0)?;
    let flop = 2.0 * nq as f64 * nb as f64 * dim as f64;
    println!(
        "{nq} queries x {nb} base x {dim}-d, k = {k}: {:.3} TFLOP; floor at 67 TFLOP/s fp32 = {:.1} ms",
        flop / 1e12,
        flop / 67e12 * 1e3
    );
    let exact = ExactGpu::new(&ctx);
    let plan = exact.plan::<f32>(nq, nb, dim, k)?;
    println!("plan: {plan:?}");
    // Warm-up: module load / compilation, allocations.
    let t = Instant::now();
    let first = exact.search(base.view(), queries.view(), Metric::L2Squared, k)?;
    println!(
        "first search (with module load) {:.3} s; kernel paths {:?}",
        t.elapsed().as_secs_f64(),
        ctx.kernel_load_paths()
    );
    let mut times = Vec::new();
    for _ in 0..5 {
        let t = Instant::now();
        let res = exact.search(base.view(), queries.view(), Metric::L2Squared, k)?;
        times.push(t.elapsed().as_secs_f64());
        assert_eq!(res.ids, first.ids, "searches disagree");
    }
    // Check a sample of queries against the CPU oracle (several chunks, mid-row flushes).
    let sample = 16.min(nq);
    let sq = queries.view().slice_rows(0..sample)?;
    let cpu = weft_graph::exact::exact_search(
        base.view(),
        sq,
        Metric::L2Squared,
        k,
        &weft_core::BuildCtx::new(0),
    )?;
    let (mut max_err, mut bad) = (0f32, 0usize);
    for i in 0..sample * k {
        let (g, c) = (first.dists[i], cpu.dists[i]);
        max_err = max_err.max((g - c).abs());
        if (g - c).abs() > 1e-3 * c.abs().max(1.0) {
            bad += 1;
        }
    }
    println!(
        "oracle check on {sample} queries: max |gpu - cpu| distance {max_err:.2e}, {bad} distances off by more than 1e-3 relative"
    );
    if bad > 0 {
        return Err("GPU results disagree with the CPU oracle".into());
    }
    let mut up = Vec::new();
    for _ in 0..3 {
        let t = Instant::now();
        let m = DeviceMatrix::upload(&ctx, base.view())?;
        ctx.synchronize()?;
        up.push(t.elapsed().as_secs_f64());
        drop(m);
    }
    let (s, u) = (median(times.clone()), median(up));
    println!("search (host to host) median {:.4} s over {:?}", s, times);
    println!("base upload alone median {:.4} s", u);
    println!(
        "search minus upload {:.4} s = {:.1} TFLOP/s effective",
        s - u,
        flop / (s - u) / 1e12
    );
    Ok(())
}
