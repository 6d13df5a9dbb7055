//! QPS and recall of the GPU CAGRA-style search (`CagraSearchDevice`).
//!
//! ```text
//! cagra_search_bench [--preset sift|gist] [--n 1000000] [--nq 10000] [--knn-degree 128]
//!     [--degree 64] [--beam-width 32,48,64,96,128,192,256] [--runs 3] [--batch1 200]
//!     [--batch1-beam-width 32,64,128] [--f16]
//! e.g. cagra_search_bench --runs 3 --batch1 200 --beam-width 16,17,18,19,20,24 --batch1-beam-width 16,32
//! ```
//!
//! Generates the weft-io synthetic preset (seed 1: base and queries), uploads it, builds the
//! search graph on the GPU as the `cagra` gpu registry entry does (GNND k-NN graph of degree
//! `--knn-degree`, then `CagraOptimizer::optimize_device` to `--degree`, no host round trip),
//! computes the exact top 10 with `ExactGpu`, then prints one JSON line per measurement:
//! single-CTA QPS and recall@10 per beam_width at batch `--nq` (data, graph and queries resident;
//! median of `--runs` per batch, each covering the kernels and the download of the results to the
//! host): `qps` / `seconds_median` through one session (a `CagraSearchBuffers` allocated on a
//! warm-up call and reused: steady state, no allocation), `qps_one_shot` /
//! `seconds_median_one_shot` through `search_device` (work buffers allocated per call); the
//! batch-1 latency per beam_width (multi-CTA, the first `--batch1` queries one at a time, again
//! through one session and one-shot), and with `--f16` the same sweep on f16 copies of base and queries (recall against the
//! f32 truth). Each search line also gives the memory-bandwidth floor of its iterations: the
//! bytes of vectors and graph rows one query reads (distances computed x row bytes + expanded
//! vertices x degree x 4), over 4.8 TB/s (H200 HBM3e; scale for other GPUs).

use std::time::Instant;

use weft_cagra::gpu::CagraOptimizer;
use weft_core::{BuildCtx, Dataset, Element, Metric, Neighbors};
use weft_exact::ExactGpu;
use weft_gpu::{DeviceFixedGraph, DeviceMatrix, GpuContext};
use weft_nndescent::NnDescentParams;
use weft_nndescent::gpu::Gnnd;
use weft_search::gpu::DeviceSearchInputs;
use weft_search::gpu::cagra::{
    CagraSearchBuffers, CagraSearchDevice, CagraSearchMode, CagraSearchParams, CagraSearchSession,
    CagraSearchShape, CagraSearchTuning,
};

fn arg(args: &[String], name: &str) -> Option<String> {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .cloned()
}

fn num(args: &[String], name: &str, default: usize) -> usize {
    arg(args, name).map_or(default, |v| v.parse().expect("a number"))
}

fn list(args: &[String], name: &str, default: &str) -> Vec<usize> {
    arg(args, name)
        .unwrap_or_else(|| default.to_string())
        .split(',')
        .map(|v| v.parse().expect("a number"))
        .collect()
}

fn recall(found: &Neighbors, truth: &Neighbors, rows: usize) -> f64 {
    let mut hits = 0;
    for q in 0..rows {
        let t = &truth.row_ids(q)[..10];
        hits += found.row_ids(q)[..10]
            .iter()
            .filter(|x| t.contains(x))
            .count();
    }
    hits as f64 / (rows * 10) as f64
}

const HBM_BYTES_PER_S: f64 = 4.8e12;

/// FNV-1a over the ids and the distances' bits: equal results give equal checksums, so runs of
/// two builds of the kernel can be compared exactly.
fn checksum(found: &Neighbors) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let words = found
        .ids
        .iter()
        .copied()
        .chain(found.dists.iter().map(|d| d.to_bits()));
    for w in words {
        for b in w.to_le_bytes() {
            h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
        }
    }
    format!("{h:016x}")
}

#[allow(clippy::too_many_arguments)]
fn sweep<T: Element>(
    ctx: &GpuContext,
    label: &str,
    data: &DeviceMatrix<T>,
    graph: &DeviceFixedGraph,
    queries: &DeviceMatrix<T>,
    truth: &Neighbors,
    beam_widths: &[usize],
    runs: usize,
) -> weft_core::Result<()> {
    let search = CagraSearchDevice::new(ctx);
    let nq = queries.rows();
    let row_bytes = data.stride() * std::mem::size_of::<T>();
    for &beam_width in beam_widths {
        let cfg = CagraSearchParams {
            beam_width,
            tuning: CagraSearchTuning {
                mode: CagraSearchMode::SingleCta,
                ..Default::default()
            },
            ..Default::default()
        };
        let shape = CagraSearchShape {
            n: data.rows(),
            dim: data.dim(),
            elem_bytes: std::mem::size_of::<T>(),
            degree: graph.degree(),
            nq,
            k: 10,
            filtered: false,
        };
        let plan = search.plan(shape, &cfg)?;
        let inputs = DeviceSearchInputs {
            data,
            graph,
            entries: &[],
            queries,
        };
        let (found, stats) = search.search_device(inputs, Metric::L2Squared, 10, &cfg)?;
        let mut times = Vec::new();
        for _ in 0..runs {
            let t = Instant::now();
            search.search_device(inputs, Metric::L2Squared, 10, &cfg)?;
            times.push(t.elapsed().as_secs_f64());
        }
        times.sort_by(f64::total_cmp);
        let t_one = times[times.len() / 2];
        // Steady state: one session's buffers, allocated by the warm-up call.
        let mut bufs = CagraSearchBuffers::new();
        let mut again = Neighbors::new(nq, 10);
        search.search_device_with(&mut bufs, inputs, Metric::L2Squared, &cfg, again.as_mut())?;
        let allocs = bufs.allocations();
        let mut times = Vec::new();
        for _ in 0..runs {
            let t = Instant::now();
            search.search_device_with(
                &mut bufs,
                inputs,
                Metric::L2Squared,
                &cfg,
                again.as_mut(),
            )?;
            times.push(t.elapsed().as_secs_f64());
        }
        times.sort_by(f64::total_cmp);
        let t = times[times.len() / 2];
        let dpq = stats.distance_computations as f64 / nq as f64;
        let hpq = stats.hops as f64 / nq as f64;
        let bytes_per_query = dpq * row_bytes as f64 + hpq * graph.degree() as f64 * 4.0;
        let floor_s = bytes_per_query * nq as f64 / HBM_BYTES_PER_S;
        println!(
            "{}",
            serde_json::json!({
                "what": "batch", "data": label, "mode": "single_cta", "beam_width": beam_width,
                "queries": nq, "recall@10": recall(&found, truth, nq), "qps": nq as f64 / t,
                "seconds_median": t, "qps_one_shot": nq as f64 / t_one,
                "seconds_median_one_shot": t_one, "session_same_ids": again.ids == found.ids,
                "checksum": checksum(&found),
                "session_steady_allocations": bufs.allocations() - allocs,
                "session_buffer_bytes": bufs.bytes(), "runs": runs, "team": plan.team_size,
                "max_iterations": plan.max_iterations, "distances_per_query": dpq,
                "expanded_per_query": hpq, "bytes_per_query": bytes_per_query,
                "bandwidth_floor_s": floor_s, "floor_fraction": floor_s / t,
            })
        );
    }
    Ok(())
}

#[allow(clippy::too_many_arguments)]
fn batch1<T: Element>(
    ctx: &GpuContext,
    label: &str,
    data: &DeviceMatrix<T>,
    graph: &DeviceFixedGraph,
    queries: &Dataset<T>,
    truth: &Neighbors,
    beam_widths: &[usize],
    count: usize,
) -> weft_core::Result<()> {
    let search = CagraSearchDevice::new(ctx);
    let count = count.min(queries.rows());
    let singles: Vec<DeviceMatrix<T>> = (0..count)
        .map(|q| DeviceMatrix::upload(ctx, queries.view().slice_rows(q..q + 1)?))
        .collect::<weft_core::Result<_>>()?;
    for &beam_width in beam_widths {
        let cfg = CagraSearchParams {
            beam_width,
            tuning: CagraSearchTuning {
                mode: CagraSearchMode::MultiCta,
                ..Default::default()
            },
            ..Default::default()
        };
        let inputs = |queries| DeviceSearchInputs {
            data,
            graph,
            entries: &[],
            queries,
        };
        search.search_device(inputs(&singles[0]), Metric::L2Squared, 10, &cfg)?;
        let mut lat = Vec::new();
        let mut found = Neighbors::new(count, 10);
        for (q, m) in singles.iter().enumerate() {
            let t = Instant::now();
            let (nb, _) = search.search_device(inputs(m), Metric::L2Squared, 10, &cfg)?;
            lat.push(t.elapsed().as_secs_f64());
            found.ids[q * 10..q * 10 + 10].copy_from_slice(nb.row_ids(0));
        }
        lat.sort_by(f64::total_cmp);
        // The same queries through one session's buffers (allocated by a warm-up call).
        let mut bufs = CagraSearchBuffers::new();
        let mut one = Neighbors::new(1, 10);
        search.search_device_with(
            &mut bufs,
            inputs(&singles[0]),
            Metric::L2Squared,
            &cfg,
            one.as_mut(),
        )?;
        let allocs = bufs.allocations();
        let mut slat = Vec::new();
        let mut sfound = Neighbors::new(count, 10);
        for (q, m) in singles.iter().enumerate() {
            let t = Instant::now();
            search.search_device_with(
                &mut bufs,
                inputs(m),
                Metric::L2Squared,
                &cfg,
                sfound.as_mut().rows_mut(q..q + 1),
            )?;
            slat.push(t.elapsed().as_secs_f64());
        }
        slat.sort_by(f64::total_cmp);
        let p99 = |v: &[f64]| v[(v.len() * 99 / 100).min(v.len() - 1)];
        println!(
            "{}",
            serde_json::json!({
                "what": "batch1", "data": label, "mode": "multi_cta", "beam_width": beam_width,
                "queries": count, "recall@10": recall(&sfound, truth, count),
                "latency_ms_median": 1e3 * slat[slat.len() / 2],
                "checksum": checksum(&sfound),
                "latency_ms_p99": 1e3 * p99(&slat),
                "recall@10_one_shot": recall(&found, truth, count),
                "latency_ms_median_one_shot": 1e3 * lat[lat.len() / 2],
                "latency_ms_p99_one_shot": 1e3 * p99(&lat),
                "session_steady_allocations": bufs.allocations() - allocs,
            })
        );
    }
    Ok(())
}

/// The sweep through a `CagraSearchSession` from host queries to host results (what
/// `weft::Index` does), at k = 10 and k = beam_width, beside the same session on resident queries.
fn host_sweep(
    ctx: GpuContext,
    data: DeviceMatrix<f32>,
    graph: DeviceFixedGraph,
    queries: &Dataset<f32>,
    truth: &Neighbors,
    beam_widths: &[usize],
    runs: usize,
) -> weft_core::Result<()> {
    let qdev = DeviceMatrix::upload(&ctx, queries.view())?;
    let mut session = CagraSearchSession::from_device(ctx, data, graph, &[], None)?;
    let nq = queries.rows();
    for &beam_width in beam_widths {
        let cfg = CagraSearchParams {
            beam_width,
            tuning: CagraSearchTuning {
                mode: CagraSearchMode::SingleCta,
                ..Default::default()
            },
            ..Default::default()
        };
        for k in [10, beam_width.min(100)] {
            let mut out = Neighbors::new(nq, k);
            session.search_into(queries.view(), Metric::L2Squared, &cfg, out.as_mut())?;
            let median = |mut v: Vec<f64>| {
                v.sort_by(f64::total_cmp);
                v[v.len() / 2]
            };
            let mut host_t = Vec::new();
            for _ in 0..runs {
                let t = Instant::now();
                session.search_into(queries.view(), Metric::L2Squared, &cfg, out.as_mut())?;
                host_t.push(t.elapsed().as_secs_f64());
            }
            let mut dev_t = Vec::new();
            for _ in 0..runs {
                let t = Instant::now();
                session.search_device(&qdev, Metric::L2Squared, k, &cfg)?;
                dev_t.push(t.elapsed().as_secs_f64());
            }
            let (h, d) = (median(host_t), median(dev_t));
            println!(
                "{}",
                serde_json::json!({
                    "what": "host_batch", "beam_width": beam_width, "k": k, "queries": nq,
                    "recall@10": recall(&out, truth, nq), "qps_host": nq as f64 / h,
                    "qps_resident_queries": nq as f64 / d, "seconds_host": h,
                    "seconds_resident_queries": d,
                })
            );
        }
    }
    Ok(())
}

fn main() -> weft_core::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let preset = match arg(&args, "--preset").as_deref() {
        Some("gist") => weft_io::synthetic::Preset::Gist,
        _ => weft_io::synthetic::Preset::Sift,
    };
    let n = num(&args, "--n", 1_000_000);
    let nq = num(&args, "--nq", 10_000);
    let knn_degree = num(&args, "--knn-degree", 128);
    let degree = num(&args, "--degree", 64);
    let runs = num(&args, "--runs", 3).max(1);
    let b1 = num(&args, "--batch1", 200);
    let beam_widths = list(&args, "--beam-width", "32,48,64,96,128,192,256");
    let b1_beam_widths = list(&args, "--batch1-beam-width", "32,64,128");
    let f16 = args.iter().any(|a| a == "--f16");
    let host = args.iter().any(|a| a == "--host");

    let ctx = weft_gpu::probe()?;
    let t = Instant::now();
    let generator = preset.generator(1)?;
    let base = generator.base(n)?;
    let queries = generator.queries(nq)?;
    let gen_s = t.elapsed().as_secs_f64();
    let dev = DeviceMatrix::upload(&ctx, base.view())?;
    let qdev = DeviceMatrix::upload(&ctx, queries.view())?;
    let t = Instant::now();
    let (dknn, _) = Gnnd::new(&ctx).build_device(
        &dev,
        Metric::L2Squared,
        knn_degree,
        &NnDescentParams::default(),
        &BuildCtx::new(0),
    )?;
    let knn_s = t.elapsed().as_secs_f64();
    let t = Instant::now();
    let graph = CagraOptimizer::new(&ctx).optimize_device(&dknn, degree)?;
    ctx.synchronize()?;
    let opt_s = t.elapsed().as_secs_f64();
    drop(dknn);
    let t = Instant::now();
    let truth = ExactGpu::new(&ctx).search_device(&dev, &qdev, Metric::L2Squared, 10)?;
    let exact_s = t.elapsed().as_secs_f64();
    println!(
        "{}",
        serde_json::json!({
            "what": "setup", "device": ctx.info().name, "preset": preset.name(), "n": n,
            "dim": base.dim(), "queries": nq, "knn_degree": knn_degree, "degree": degree,
            "generate_s": gen_s, "gnnd_s": knn_s, "optimize_s": opt_s, "exact_truth_s": exact_s,
        })
    );
    let label = format!("{}-f32", preset.name());
    sweep(
        &ctx,
        &label,
        &dev,
        &graph,
        &qdev,
        &truth,
        &beam_widths,
        runs,
    )?;
    if b1 > 0 {
        batch1(
            &ctx,
            &label,
            &dev,
            &graph,
            &queries,
            &truth,
            &b1_beam_widths,
            b1,
        )?;
    }
    if host {
        host_sweep(ctx, dev, graph, &queries, &truth, &beam_widths, runs)?;
        return Ok(());
    }
    if f16 {
        drop(dev);
        drop(qdev);
        let to_f16 = |d: &Dataset<f32>| {
            let v: Vec<half::f16> = d
                .view()
                .iter()
                .flatten()
                .map(|&x| half::f16::from_f32(x))
                .collect();
            Dataset::from_vec(v, d.rows(), d.dim())
        };
        let base16 = to_f16(&base)?;
        let q16 = to_f16(&queries)?;
        let dev16 = DeviceMatrix::upload(&ctx, base16.view())?;
        let qdev16 = DeviceMatrix::upload(&ctx, q16.view())?;
        let label = format!("{}-f16", preset.name());
        sweep(
            &ctx,
            &label,
            &dev16,
            &graph,
            &qdev16,
            &truth,
            &beam_widths,
            runs,
        )?;
    }
    Ok(())
}
