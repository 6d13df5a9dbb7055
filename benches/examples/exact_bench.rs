//! Times exact k-NN on the GPU.
//!
//! - `exact_bench [queries] [base] [dim] [k]` (default 10000 x 1000000 x 128, k = 100, f32, L2):
//!   prints the FLOP floor, the median of several searches (host to host, base upload included)
//!   and the upload time alone, so that the device part can be read off.
//! - `exact_bench graph [n] [dim] [k]` (default 1000000 x 128, k = 64): the exact k-NN graph of
//!   all points, data resident on the device, against the FLOP floor `2 n^2 d`; a sample of rows
//!   is checked against the CPU oracle.

use std::time::Instant;

use weft_core::Dataset;
use weft_core::Metric;
use weft_core::rng::SplitMix64;
use weft_exact::ExactGpu;
use weft_gpu::{DeviceMatrix, probe};

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

fn graph() -> Result<(), Box<dyn std::error::Error>> {
    let (n, dim, k) = (arg(2, 1_000_000), arg(3, 128), arg(4, 64));
    let ctx = probe()?;
    println!("device: {:?}", ctx.info());
    let mut r = SplitMix64::new(7);
    let data = Dataset::from_fn(n, dim, |_, _| r.next_f32() * 2.0 - 1.0)?;
    let flop = 2.0 * n as f64 * n as f64 * dim as f64;
    println!(
        "exact k-NN graph of {n} x {dim}-d, k = {k}: {:.1} TFLOP; floor at 67 TFLOP/s fp32 = {:.2} s",
        flop / 1e12,
        flop / 67e12
    );
    let exact = ExactGpu::new(&ctx);
    let t = Instant::now();
    let dev = DeviceMatrix::upload(&ctx, data.view())?;
    ctx.synchronize()?;
    println!("upload {:.3} s", t.elapsed().as_secs_f64());
    let bctx = weft_core::BuildCtx::new(0);
    // Warm-up on a slice-sized problem: module load and allocations.
    let _ = exact.knn_graph(
        data.view().slice_rows(0..k + 1000)?,
        Metric::L2Squared,
        k,
        &bctx,
    )?;
    let mut times = Vec::new();
    let mut last = None;
    for _ in 0..2 {
        let t = Instant::now();
        let g = exact.knn_graph_device(&dev, Metric::L2Squared, k, &bctx)?;
        times.push(t.elapsed().as_secs_f64());
        last = Some(g);
    }
    let g = last.ok_or("no run")?;
    // Oracle on a sample of rows.
    let sample: Vec<usize> = (0..16).map(|i| i * (n / 16)).collect();
    let q = Dataset::from_fn(sample.len(), dim, |i, j| data.view().row(sample[i])[j])?;
    let cpu = weft_exact::exact_search(data.view(), q.view(), Metric::L2Squared, k + 1, &bctx)?;
    let mut bad = 0;
    for (i, &row) in sample.iter().enumerate() {
        // The CPU search includes the point itself at distance 0; the graph excludes it.
        let want: Vec<f32> = cpu
            .row_dists(i)
            .iter()
            .copied()
            .filter(|&d| d > 0.0)
            .take(k)
            .collect();
        for (a, b) in g.row_dists(row).iter().zip(&want) {
            if (a - b).abs() > 1e-3 * b.abs().max(1.0) {
                bad += 1;
            }
        }
    }
    let s = median(times.clone());
    println!(
        "graph (device-resident data, host result) median {s:.3} s over {times:?} = {:.1} TFLOP/s, {:.0}% of the fp32 floor; oracle: {bad} of {} sampled distances off",
        flop / s / 1e12,
        100.0 * (flop / 67e12) / s,
        sample.len() * k
    );
    if bad > 0 {
        return Err("GPU graph disagrees with the CPU oracle".into());
    }
    Ok(())
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    if std::env::args().nth(1).as_deref() == Some("graph") {
        return graph();
    }
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
    let cpu = weft_exact::exact_search(
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
