//! Times GNND (`NnDescentGpu`) and measures its graph recall.
//!
//! `gnnd_bench [preset] [n] [k] [gpu_sample] [max_iters,...] [delta]` (default `sift 1000000
//! 64 32 12 0.001`): generates the synthetic preset (f32), uploads it, warms up (module load),
//! then for each `max_iters` times `build_device` with the vectors resident (the graph stays on
//! the device; the time ends after a device synchronisation; device allocations included).
//! With `GNND_HOST=1`, also the host-to-host `build` once. Graph recall@k is measured on a 10,000-point sample against the exact GPU k-NN of those
//! points (self excluded); a returned neighbour counts when it is no farther than the true k-th
//! (CPU-recomputed distances, so ties are not penalised).
//!
//! Environment overrides of the GNND settings for experiments: `GNND_SYMMETRIC=0|1`,
//! `GNND_INBOX=<slots>`, `GNND_ROW_OFFERS=1..4`.
//!
//! Merges: `GNND_MERGE_HALVES=half,doubled,auto` builds the graphs of the set's two halves, then
//! times their merge (`Gnnd::merge_device`, vectors resident) once per listed
//! [`MergeLists`] and reports the merged graph's recall beside the whole set's build.
//!
//! Growth and out-of-memory runs: `GNND_PREFIXES=1000000,2000000,...` first times in-memory
//! builds of those prefixes of the set (same settings, recall on each prefix);
//! `GNND_SKIP_FULL=1` skips the in-memory build of the whole set; `GNND_BUDGET=<bytes>` then
//! times the out-of-memory build (`NnDescentGpu::build_sharded`, host to host: shard uploads,
//! shard builds, pairwise merges and the host-side folding included) under that device budget,
//! once per schedule of `GNND_SCHEDULES=all,nearest:2,...` (`all`: contiguous shards, every
//! pair merged; `nearest:M`: locality-aware shards, each merged with its M nearest; `auto`: the
//! smallest M keeping 99% of 256 probe points' true neighbour pairs; default: the parameters'
//! default schedule, `auto`); the time includes the partitioning (and auto's probe scan).

use std::sync::Arc;
use std::time::Instant;

use weft_core::{BuildCtx, DatasetView, Element, Metric};
use weft_exact::ExactGpu;
use weft_gpu::{DeviceMatrix, probe};
use weft_io::Preset;
use weft_nndescent::gpu::{Gnnd, GnndTuning, MergeLists, MergeSide};
use weft_nndescent::{NnDescentGpu, NnDescentParams, ShardSchedule};

fn arg<T: std::str::FromStr>(i: usize, default: T) -> T {
    std::env::args()
        .nth(i)
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let preset: Preset = arg::<String>(1, "sift".into()).parse()?;
    let n: usize = arg(2, 1_000_000);
    let k: usize = arg(3, 64);
    let iters: Vec<usize> = arg::<String>(5, "12".into())
        .split(',')
        .map(|v| v.parse())
        .collect::<Result<_, _>>()?;
    let params = NnDescentParams {
        gpu_sample: arg(4, 32),
        delta: arg(6, 0.001),
        ..Default::default()
    };
    let metric = preset.metric();
    let ctx = Arc::new(probe()?);
    println!("device: {}", ctx.info().name);
    let t = Instant::now();
    let data = preset.generator(42)?.base(n)?;
    println!(
        "data: {preset} {n} x {} f32 ({metric:?}), generated in {:.1} s",
        data.dim(),
        t.elapsed().as_secs_f64()
    );
    let bctx = BuildCtx::new(7);
    let mut tuning = GnndTuning::default();
    if let Ok(v) = std::env::var("GNND_SYMMETRIC") {
        tuning.symmetric = v == "1";
    }
    if let Some(v) = std::env::var("GNND_INBOX")
        .ok()
        .and_then(|v| v.parse().ok())
    {
        tuning.inbox = v;
    }
    if let Some(v) = std::env::var("GNND_ROW_OFFERS")
        .ok()
        .and_then(|v| v.parse().ok())
    {
        tuning.row_offers = v;
    }
    let gnnd = Gnnd::new(&ctx).with_tuning(tuning);
    // The settings of the `Gnnd` runs (their `max_iters` varies).
    let mut run = params.clone();
    // Warm-up: module load (NVRTC or cubin) and first allocations.
    // Kept below 8 MiB (one unstaged upload).
    let row_bytes = 4 * data.dim().div_ceil(16) * 16;
    let warm = data
        .view()
        .slice_rows(0..n.min(4096).min((8 << 20) / row_bytes - 1))?;
    gnnd.build(warm, metric, k.min(warm.rows() - 1), &run, &bctx)?;

    let env_num =
        |name: &str| -> Option<u64> { std::env::var(name).ok().and_then(|v| v.parse().ok()) };
    if let Ok(list) = std::env::var("GNND_PREFIXES") {
        run.max_iters = iters[0];
        for m in list.split(',').filter_map(|v| v.parse::<usize>().ok()) {
            let m = m.min(n);
            let view = data.view().slice_rows(0..m)?;
            let dev = DeviceMatrix::upload(&ctx, view)?;
            ctx.synchronize()?;
            let t = Instant::now();
            let (g, stats) = gnnd.build_device(&dev, metric, k, &run, &bctx)?;
            ctx.synchronize()?;
            let secs = t.elapsed().as_secs_f64();
            let g = g.download(&ctx)?;
            g.validate()?;
            let recall = sample_recall(&ctx, &dev, view, metric, k, &g)?;
            println!(
                "RESULT gnnd-prefix {preset} n={m} d={} k={k} iters={}: build_device {secs:.3} s, recall@{k} {recall:.4} (10k sample)",
                data.dim(),
                stats.iterations
            );
        }
    }
    let skip_full = std::env::var("GNND_SKIP_FULL").is_ok_and(|v| v == "1");
    let dev = if skip_full && env_num("GNND_BUDGET").is_some() {
        None
    } else {
        Some(DeviceMatrix::upload(&ctx, data.view())?)
    };
    ctx.synchronize()?;
    for &max_iters in iters.iter().filter(|_| !skip_full) {
        let dev = dev.as_ref().expect("uploaded");
        run.max_iters = max_iters;
        println!("params: {run:?}, tuning: {tuning:?}");
        let t = Instant::now();
        let (g, stats) = gnnd.build_device(dev, metric, k, &run, &bctx)?;
        ctx.synchronize()?;
        let secs = t.elapsed().as_secs_f64();
        println!(
            "build_device: {secs:.3} s, {} iterations, updates {:?}, dropped {:?}",
            stats.iterations, stats.updates, stats.dropped
        );
        let g = g.download(&ctx)?;
        g.validate()?;
        let recall = sample_recall(&ctx, dev, data.view(), metric, k, &g)?;
        println!(
            "RESULT gnnd {preset} n={n} d={} k={k} p={} iters={} (max {max_iters}) delta={} symmetric={} row_offers={} inbox={}: build_device {secs:.3} s, recall@{k} {recall:.4} (10k sample)",
            data.dim(),
            run.gpu_sample,
            stats.iterations,
            run.delta,
            tuning.symmetric,
            tuning.row_offers,
            tuning.inbox_for(k, run.gpu_sample),
        );
    }
    if let Ok(list) = std::env::var("GNND_MERGE_HALVES") {
        let dev = dev
            .as_ref()
            .expect("GNND_MERGE_HALVES needs the whole set on the device");
        run.max_iters = iters[0];
        let n1 = n / 2;
        let (va, vb) = (
            data.view().slice_rows(0..n1)?,
            data.view().slice_rows(n1..n)?,
        );
        let (da, db) = (
            DeviceMatrix::upload(&ctx, va)?,
            DeviceMatrix::upload(&ctx, vb)?,
        );
        let ga = gnnd
            .build_device(&da, metric, k, &run, &bctx)?
            .0
            .download(&ctx)?;
        let gb = gnnd
            .build_device(&db, metric, k, &run, &BuildCtx::new(8))?
            .0
            .download(&ctx)?;
        for name in list.split(',') {
            let lists = match name.trim() {
                "half" => MergeLists::Half,
                "doubled" => MergeLists::Doubled,
                "auto" => MergeLists::Auto,
                other => {
                    return Err(format!("merge lists `{other}`: use half, doubled or auto").into());
                }
            };
            let merger = Gnnd::new(&ctx).with_tuning(GnndTuning {
                merge_lists: lists,
                ..tuning
            });
            ctx.synchronize()?;
            let t = Instant::now();
            let (g, stats) = merger.merge_device(
                MergeSide::new(&da, &ga),
                MergeSide::new(&db, &gb),
                metric,
                &run,
                &bctx,
            )?;
            ctx.synchronize()?;
            let secs = t.elapsed().as_secs_f64();
            let g = g.download(&ctx)?;
            g.validate()?;
            let recall = sample_recall(&ctx, dev, data.view(), metric, k, &g)?;
            println!(
                "RESULT gnnd-merge {preset} n={n} ({n1} + {}) d={} k={k} lists={lists:?}: merge_device {secs:.3} s, {} iterations, recall@{k} {recall:.4} (10k sample)",
                n - n1,
                data.dim(),
                stats.iterations,
            );
        }
    }
    drop(dev);
    if let Some(budget) = env_num("GNND_BUDGET") {
        let schedules: Vec<ShardSchedule> = match std::env::var("GNND_SCHEDULES") {
            Ok(list) => list
                .split(',')
                .map(parse_schedule)
                .collect::<Result<_, _>>()?,
            Err(_) => vec![params.shard_schedule],
        };
        let builder = NnDescentGpu::new(Arc::clone(&ctx));
        let mut full: Option<DeviceMatrix<f32>> = None;
        for schedule in schedules {
            let p = NnDescentParams {
                gpu_mem_limit: Some(budget),
                max_iters: iters[0],
                shard_schedule: schedule,
                ..params.clone()
            };
            let t = Instant::now();
            let Some(plan) = builder.plan::<f32>(data.view(), metric, k, &p, bctx.seed())? else {
                println!("budget {budget}: the build fits in one piece");
                continue;
            };
            println!(
                "budget {budget} bytes, {schedule:?}: {} shards of <= {} rows, {} merges, {} loads, {} bytes planned, partition {:.2} s",
                plan.shards.len(),
                plan.shard_rows,
                plan.merges(),
                plan.loads(),
                plan.bytes,
                plan.seconds,
            );
            if let Some(a) = &plan.auto {
                println!(
                    "  auto: m = {} (kept fraction per m from 1: {:?}; {} probes x {} neighbours)",
                    a.m, a.kept, a.probes, a.k
                );
            }
            let (g, stats) = builder.build_sharded(data.view(), metric, k, &p, &plan, &bctx)?;
            let secs = t.elapsed().as_secs_f64();
            let merge_iters: usize = stats.merge_stats.iter().map(|s| s.iterations).sum();
            let build_iters: usize = stats.builds.iter().map(|s| s.iterations).sum();
            g.validate()?;
            let plan_schedule = plan.schedule;
            drop(plan);
            if full.is_none() {
                full = Some(DeviceMatrix::upload(&ctx, data.view())?);
            }
            let dev = full.as_ref().expect("uploaded");
            let recall = sample_recall(&ctx, dev, data.view(), metric, k, &g)?;
            println!(
                "RESULT gnnd-oom {preset} n={n} d={} k={k} budget={budget} schedule={schedule:?} ({:?}): {} shards, {} merges, {} loads, build iterations {build_iters}, merge iterations {merge_iters}: {secs:.3} s host to host (partition included), recall@{k} {recall:.4} (10k sample)",
                data.dim(),
                plan_schedule,
                stats.shards,
                stats.merges,
                stats.loads,
            );
            println!("  stages (s): {:?}", stats.seconds);
        }
    }
    if std::env::var("GNND_HOST").is_ok_and(|v| v == "1") {
        let builder = NnDescentGpu::new(Arc::clone(&ctx));
        let t = Instant::now();
        builder.build_with_stats(data.view(), metric, k, &params, &bctx)?;
        println!(
            "build (host to host, upload and download included): {:.3} s",
            t.elapsed().as_secs_f64()
        );
    }
    Ok(())
}

/// `all` or `nearest:M`.
fn parse_schedule(s: &str) -> Result<ShardSchedule, Box<dyn std::error::Error>> {
    match s.trim().split_once(':') {
        None if s.trim() == "all" => Ok(ShardSchedule::AllPairs),
        None if s.trim() == "auto" => Ok(ShardSchedule::Auto),
        Some(("nearest", m)) => Ok(ShardSchedule::Nearest(m.parse()?)),
        _ => Err(format!("schedule `{s}`: use all, auto or nearest:M").into()),
    }
}

fn sample_recall<T: Element>(
    ctx: &weft_gpu::GpuContext,
    dev: &DeviceMatrix<T>,
    data: DatasetView<'_, T>,
    metric: Metric,
    k: usize,
    g: &weft_core::KnnGraph,
) -> Result<f64, Box<dyn std::error::Error>> {
    let n = data.rows();
    let m = n.min(10_000);
    let step = n / m;
    let ids: Vec<usize> = (0..m).map(|i| i * step).collect();
    let mut q = Vec::with_capacity(m * data.dim());
    for &v in &ids {
        q.extend_from_slice(data.row(v));
    }
    // Queries in batches below 8 MiB (one unstaged upload each).
    let batch = ((8 << 20) / (4 * data.dim().div_ceil(16) * 16) - 1).max(1);
    let mut found_ids = Vec::with_capacity(m * (k + 1));
    for b0 in (0..m).step_by(batch) {
        let b1 = (b0 + batch).min(m);
        let view = DatasetView::new(&q[b0 * data.dim()..b1 * data.dim()], b1 - b0, data.dim())?;
        let queries = DeviceMatrix::upload(ctx, view)?;
        let found = ExactGpu::new(ctx).search_device(dev, &queries, metric, k + 1)?;
        for i in 0..b1 - b0 {
            found_ids.extend_from_slice(found.row_ids(i));
        }
    }
    let dist = metric.distance_fn::<T>();
    let mut hits = 0usize;
    for (i, &v) in ids.iter().enumerate() {
        let truth: Vec<u32> = found_ids[i * (k + 1)..(i + 1) * (k + 1)]
            .iter()
            .copied()
            .filter(|&u| u as usize != v)
            .take(k)
            .collect();
        let kth = truth
            .iter()
            .map(|&u| dist.eval(data.row(v), data.row(u as usize)))
            .fold(f32::NEG_INFINITY, f32::max);
        let tol = 1e-5 * kth.abs().max(1e-6);
        hits += g
            .row_ids(v)
            .iter()
            .filter(|&&u| dist.eval(data.row(v), data.row(u as usize)) <= kth + tol)
            .count();
    }
    Ok(hits as f64 / (m * k) as f64)
}
