//! Times GRNND on the GPU and measures its graph with weft's CPU beam search.
//!
//! `grnnd_bench [n] [queries] [ablation_n] [gist_n] [variants]` (defaults 1000000, 1000, 100000,
//! 0, 0):
//! 1. SIFT-like `n x 128` (weft-io preset, generated here), uploaded; ground truth of `queries`
//!    queries by `ExactGpu`.
//! 2. GRNND (default parameters: S 20, R 64, T1 3, T2 10, degree 32, rho 0.6, random order)
//!    after a warm-up build on 20,000 points (kernel loading excluded): median build time of 2
//!    runs, data resident on the device, graph left on the device (the connectivity check
//!    included); then the CPU beam search (L sweep): recall@10 and QPS (all cores).
//! 3. CAGRA at the same degree: GNND (k = 64, NN-Descent defaults as the `cagra` registry
//!    entry uses them) on the device, then the CAGRA optimisation of that k-NN graph, timed, and
//!    the same search sweep with the same entry point. The optimisation runs on the GPU
//!    (`weft_cagra::gpu::CagraOptimizer::optimize_device`) on the k-NN graph GNND left there,
//!    with no host round trip; both build times are printed.
//! 4. Parity and ablation on the first `ablation_n` points: the CPU RNN-Descent at the same
//!    parameters against GRNND (search sweep), then update order x rho x (T1, T2).
//! 5. With `gist_n > 0`: GIST-like `gist_n x 960`, GRNND build time and recall.
//! 6. With `variants = 1` (after step 3): denser GRNND settings (final reverse edges, T1 = 4,
//!    R = 96) against the same CAGRA curve.

use std::sync::Arc;
use std::time::Instant;

use weft_core::{BuildCtx, Dataset, FixedDegreeGraph, Metric, Neighbors, Searcher};
use weft_exact::ExactGpu;
use weft_gpu::{DeviceMatrix, GpuContext, probe};
use weft_grnnd::GrnndParams;
use weft_grnnd::gpu::{Grnnd, GrnndStats};
use weft_io::synthetic::Preset;
use weft_nndescent::{NnDescentGpu, NnDescentParams};
use weft_rnndescent::{RnnDescentCpu, RnnDescentParams, UpdateOrder};
use weft_search::{BeamSearch, BeamSearchParams};

type Res<T> = Result<T, Box<dyn std::error::Error>>;

fn arg(i: usize, default: usize) -> usize {
    std::env::args()
        .nth(i)
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn recall(found: &Neighbors, truth: &Neighbors, k: usize) -> f64 {
    let mut hits = 0usize;
    for q in 0..found.rows() {
        let t = &truth.row_ids(q)[..k];
        hits += found.row_ids(q)[..k]
            .iter()
            .filter(|x| t.contains(x))
            .count();
    }
    hits as f64 / (found.rows() * k) as f64
}

/// (L, recall@10, QPS) of the CPU beam search over `g` for each beam width.
fn sweep(
    g: &FixedDegreeGraph,
    base: &Dataset<f32>,
    queries: &Dataset<f32>,
    truth: &Neighbors,
    ls: &[usize],
) -> Res<Vec<(usize, f64, f64)>> {
    let mut out = Vec::new();
    for &l in ls {
        let mut best = f64::INFINITY;
        let mut found = Neighbors::new(queries.rows(), 10);
        for _ in 0..2 {
            let t = Instant::now();
            BeamSearch.search(
                g,
                base.view(),
                queries.view(),
                Metric::L2Squared,
                &BeamSearchParams::with_beam_width(l),
                found.as_mut(),
            )?;
            best = best.min(t.elapsed().as_secs_f64());
        }
        out.push((l, recall(&found, truth, 10), queries.rows() as f64 / best));
    }
    Ok(out)
}

fn print_sweep(name: &str, s: &[(usize, f64, f64)]) {
    for (l, r, q) in s {
        println!("  {name:<12} L {l:>4}  recall@10 {r:.4}  QPS {q:>10.0}");
    }
}

/// QPS at recall `target` by linear interpolation on the sweep (None if never reached).
fn qps_at(s: &[(usize, f64, f64)], target: f64) -> Option<f64> {
    for w in s.windows(2) {
        let ((_, r0, q0), (_, r1, q1)) = (w[0], w[1]);
        if r0 >= target {
            return Some(q0);
        }
        if r1 >= target {
            let t = (target - r0) / (r1 - r0).max(1e-12);
            return Some(q0 + t * (q1 - q0));
        }
    }
    s.first().filter(|x| x.1 >= target).map(|x| x.2)
}

/// The seed of every GRNND build.
const SEED: u64 = 1;

fn grnnd_timed(
    ctx: &GpuContext,
    dev: &DeviceMatrix<f32>,
    params: &GrnndParams,
    runs: usize,
) -> Res<(FixedDegreeGraph, GrnndStats, f64)> {
    let mut times = Vec::new();
    let mut last = None;
    for _ in 0..runs {
        ctx.synchronize()?;
        let t = Instant::now();
        let (g, s) =
            Grnnd::new(ctx).build_device(dev, Metric::L2Squared, params, &BuildCtx::new(SEED))?;
        ctx.synchronize()?;
        times.push(t.elapsed().as_secs_f64());
        last = Some((g, s));
    }
    times.sort_by(f64::total_cmp);
    let (g, s) = last.ok_or("no run")?;
    let host = g.download(ctx)?.with_entry_points(vec![s.entry_point]);
    Ok((host, s, times[times.len() / 2]))
}

fn main() -> Res<()> {
    let (n, nq, an, gist_n) = (arg(1, 1_000_000), arg(2, 1000), arg(3, 100_000), arg(4, 0));
    let variants = arg(5, 0) != 0;
    let ctx = Arc::new(probe()?);
    println!("device: {:?}", ctx.info());
    println!(
        "threads: {}",
        std::thread::available_parallelism()
            .map(|x| x.get())
            .unwrap_or(1)
    );
    let ls = [10usize, 16, 24, 32, 48, 64, 96, 128, 192];

    let t = Instant::now();
    let generator = Preset::Sift.generator(42)?;
    let base = generator.base(n)?;
    let queries = generator.queries(nq)?;
    println!(
        "SIFT-like {n} x 128 generated in {:.1} s",
        t.elapsed().as_secs_f64()
    );
    let dev = DeviceMatrix::upload(&ctx, base.view())?;
    let truth = ExactGpu::new(&ctx).search(base.view(), queries.view(), Metric::L2Squared, 10)?;

    // Warm-up: kernel loading and first allocations.
    let warm = DeviceMatrix::upload(&ctx, base.view().slice_rows(0..20_000.min(n))?)?;
    let cfg = GrnndParams::default();
    let _ = Grnnd::new(&ctx).build_device(&warm, Metric::L2Squared, &cfg, &BuildCtx::new(SEED))?;
    drop(warm);

    println!("== GRNND {n} x 128 (defaults) ==");
    let (g, s, secs) = grnnd_timed(&ctx, &dev, &cfg, 2)?;
    println!(
        "GRNND build {secs:.3} s (median of 2, device-resident); distances {}, redirects {}, edges before cut {}, unreachable {} -> {} ({} links)",
        s.distance_computations,
        s.redirects,
        s.edges_before_cut,
        s.unreachable,
        s.unreachable_after,
        s.repair_links
    );
    let gs = sweep(&g, &base, &queries, &truth, &ls)?;
    print_sweep("grnnd", &gs);

    println!("== CAGRA {n} x 128 (GNND k 64 + optimiser, degree 32) ==");
    let gnnd = NnDescentGpu::new(Arc::clone(&ctx));
    // Warm-up of the GNND kernels.
    {
        let w = DeviceMatrix::upload(&ctx, base.view().slice_rows(0..20_000.min(n))?)?;
        let _ = gnnd.build_device(
            &w,
            Metric::L2Squared,
            64,
            &NnDescentParams::default(),
            &BuildCtx::new(1),
        )?;
    }
    ctx.synchronize()?;
    let t = Instant::now();
    let (knn, gst) = gnnd.build_device(
        &dev,
        Metric::L2Squared,
        64,
        &NnDescentParams::default(),
        &BuildCtx::new(1),
    )?;
    ctx.synchronize()?;
    let t_knn = t.elapsed().as_secs_f64();
    let t = Instant::now();
    let optimized = weft_cagra::gpu::CagraOptimizer::new(&ctx).optimize_device(&knn, 32)?;
    ctx.synchronize()?;
    let t_opt = t.elapsed().as_secs_f64();
    drop(knn);
    println!(
        "CAGRA build: GNND {t_knn:.3} s ({} iterations) + optimiser {t_opt:.3} s, both on the GPU",
        gst.iterations
    );
    let cg = optimized
        .download(&ctx)?
        .with_entry_points(vec![s.entry_point]);
    let cs = sweep(&cg, &base, &queries, &truth, &ls)?;
    print_sweep("cagra", &cs);
    for target in [0.90, 0.95, 0.98] {
        match (qps_at(&gs, target), qps_at(&cs, target)) {
            (Some(a), Some(b)) => println!(
                "recall {target}: GRNND QPS {a:.0}, CAGRA QPS {b:.0}, ratio {:.3}",
                a / b
            ),
            (a, b) => println!("recall {target}: GRNND {a:?}, CAGRA {b:?} (not reached)"),
        }
    }
    if variants {
        // Settings that trade build time for a denser graph, against the same CAGRA curve.
        let vs: [(&str, GrnndParams); 4] = [
            (
                "final_reverse",
                GrnndParams {
                    final_reverse_edges: true,
                    ..cfg.clone()
                },
            ),
            (
                "t1=4",
                GrnndParams {
                    t1: 4,
                    ..cfg.clone()
                },
            ),
            (
                "r=96,s=32",
                GrnndParams {
                    r: 96,
                    s: 32,
                    ..cfg.clone()
                },
            ),
            (
                "r=96,s=32,final_reverse",
                GrnndParams {
                    r: 96,
                    s: 32,
                    final_reverse_edges: true,
                    ..cfg.clone()
                },
            ),
        ];
        for (name, c) in vs {
            let (g, s, secs) = grnnd_timed(&ctx, &dev, &c, 1)?;
            println!(
                "== GRNND variant {name}: build {secs:.3} s, edges before cut {} ==",
                s.edges_before_cut
            );
            let vs = sweep(&g, &base, &queries, &truth, &ls)?;
            print_sweep(name, &vs);
            for target in [0.90, 0.95, 0.98] {
                if let (Some(a), Some(b)) = (qps_at(&vs, target), qps_at(&cs, target)) {
                    println!(
                        "recall {target}: {name} QPS {a:.0}, CAGRA QPS {b:.0}, ratio {:.3}",
                        a / b
                    );
                }
            }
        }
    }
    drop(dev);

    if an > 0 {
        let an = an.min(n);
        println!("== parity and ablation on {an} x 128 ==");
        let sub = Dataset::from_vec(
            base.view()
                .slice_rows(0..an)?
                .to_dataset()
                .as_slice()
                .to_vec(),
            an,
            128,
        )?;
        let sq = queries.clone();
        let st = ExactGpu::new(&ctx).search(sub.view(), sq.view(), Metric::L2Squared, 10)?;
        let sdev = DeviceMatrix::upload(&ctx, sub.view())?;
        let (g, s, secs) = grnnd_timed(&ctx, &sdev, &cfg, 1)?;
        println!("GRNND {secs:.3} s, distances {}", s.distance_computations);
        let gs = sweep(&g, &sub, &sq, &st, &ls)?;
        print_sweep("grnnd", &gs);
        let t = Instant::now();
        let (cpu, cst) = RnnDescentCpu.build_with_stats(
            sub.view(),
            Metric::L2Squared,
            &RnnDescentParams::default(),
            &BuildCtx::new(1),
        )?;
        println!(
            "CPU RNN-Descent {:.3} s, distances {}",
            t.elapsed().as_secs_f64(),
            cst.distance_computations
        );
        let ps = sweep(&cpu, &sub, &sq, &st, &ls)?;
        print_sweep("rnnd-cpu", &ps);
        for target in [0.90, 0.95, 0.98] {
            if let (Some(a), Some(b)) = (qps_at(&gs, target), qps_at(&ps, target)) {
                println!(
                    "recall {target}: GRNND QPS {a:.0}, CPU RNN-Descent QPS {b:.0}, ratio {:.3}",
                    a / b
                );
            }
        }
        println!("ablation: order rho t1 t2 | build s | recall@10 at L 32, 64 | distances");
        let mut rows: Vec<(UpdateOrder, f32, usize, usize)> = Vec::new();
        for order in [
            UpdateOrder::Random,
            UpdateOrder::Ascending,
            UpdateOrder::Descending,
        ] {
            rows.push((order, 0.6, 3, 10));
        }
        for rho in [0.2f32, 0.4, 0.8, 1.0] {
            rows.push((UpdateOrder::Random, rho, 3, 10));
        }
        for (t1, t2) in [(1usize, 10usize), (2, 10), (4, 10), (3, 5), (3, 15), (2, 5)] {
            rows.push((UpdateOrder::Random, 0.6, t1, t2));
        }
        for (order, rho, t1, t2) in rows {
            let c = GrnndParams {
                update_order: order,
                rho,
                t1,
                t2,
                ..cfg.clone()
            };
            let (g, s, secs) = grnnd_timed(&ctx, &sdev, &c, 1)?;
            let r = sweep(&g, &sub, &sq, &st, &[32, 64])?;
            println!(
                "  {order:?} {rho} {t1} {t2} | {secs:.3} | {:.4} {:.4} | {}",
                r[0].1, r[1].1, s.distance_computations
            );
        }
    }

    if gist_n > 0 {
        println!("== GRNND GIST-like {gist_n} x 960 ==");
        let generator = Preset::Gist.generator(42)?;
        let base = generator.base(gist_n)?;
        let queries = generator.queries(nq)?;
        let dev = DeviceMatrix::upload(&ctx, base.view())?;
        let truth =
            ExactGpu::new(&ctx).search(base.view(), queries.view(), Metric::L2Squared, 10)?;
        for (t1, t2) in [(3usize, 10usize), (4, 15)] {
            let c = GrnndParams {
                t1,
                t2,
                ..cfg.clone()
            };
            let (g, s, secs) = grnnd_timed(&ctx, &dev, &c, 1)?;
            println!(
                "GRNND t1 {t1} t2 {t2}: {secs:.3} s, distances {}",
                s.distance_computations
            );
            print_sweep(
                "grnnd-gist",
                &sweep(&g, &base, &queries, &truth, &[16, 32, 64, 128, 256])?,
            );
        }
    }
    Ok(())
}
