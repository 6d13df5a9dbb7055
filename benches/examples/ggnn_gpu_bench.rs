//! Times the GGNN construction on the GPU and measures the graph and the GGNN search over it.
//!
//! ```text
//! ggnn_gpu_bench [--preset sift] [--n 1000000] [--queries 10000] [--k 24] [--runs 2]
//!                [--taus 0.0,0.2,0.35,0.5,0.65,0.8,1.0] [--check-sample 10000] [--timed 1]
//!                [--tunings MERGE_SEEN_BYTES:SYM_SEEN_BYTES:VECS_PER_LANE:MAX_WARPS[:MERGE_HEADS[:ORDER[:TAGS]]],...]
//! ```
//!
//! `--tunings` (default: `GgnnTuning::default()` alone; TAGS 0 u32 ids, 1 tags, 2 by row size,
//! the default) times the build under each launch
//! setting in turn (one JSON line each with its build times, C@10 and phase times); the search
//! is measured on the graph of the first.
//!
//! Generates the synthetic preset (weft-io, seed 1; `sift` is 128-d, `gist` 960-d), uploads it,
//! warms up (a build on the first 50,000 rows loads the kernels), then times
//! `GgnnGpu::build_device` (vectors already on the device: every phase, the layer-0 statistics
//! brought back after each brute force or merge, and the download of the graph); then `--timed`
//! more builds with per-phase timing (`GgnnGpu::build_device_timed`, the device synchronised
//! around every phase), printed as one JSON line each: the phases in order and their totals by
//! kind (these builds are not in `build_s`). Graph
//! quality: C@10 of the base rows on a sample of points against the exact GPU k-NN. Search: the
//! CPU `GgnnSearch` (all cores) over the hierarchy for each tau, recall@1 (the true nearest
//! neighbour returned first) and recall@10 against `ExactGpu` ground truth, queries per second.
//! Prints JSON lines.

use std::time::Instant;

use weft_core::{BuildCtx, DatasetView, Metric, Neighbors, NodeId, Searcher};
use weft_exact::ExactGpu;
use weft_ggnn::gpu::GgnnTuning;
use weft_ggnn::{GgnnGpu, GgnnParams};
use weft_gpu::DeviceMatrix;
use weft_search::{GgnnSearch, GgnnSearchParams, GgnnSearchTuning};

fn arg(args: &[String], name: &str, default: &str) -> String {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .cloned()
        .unwrap_or_else(|| default.to_string())
}

fn num(args: &[String], name: &str, default: usize) -> usize {
    arg(args, name, &default.to_string())
        .parse()
        .expect("a number")
}

fn main() -> weft_core::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let name = arg(&args, "--preset", "sift");
    let preset = weft_io::synthetic::Preset::from_name(&name)
        .ok_or_else(|| weft_core::Error::InvalidInput(format!("unknown preset {name}")))?;
    let n = num(&args, "--n", 1_000_000);
    let nq = num(&args, "--queries", 10_000);
    let k = num(&args, "--k", 24);
    let runs = num(&args, "--runs", 2).max(1);
    let sample = num(&args, "--check-sample", 10_000).min(n);
    let timed = num(&args, "--timed", 1);
    let taus: Vec<f32> = arg(&args, "--taus", "0.0,0.2,0.35,0.5,0.65,0.8,1.0")
        .split(',')
        .map(|t| t.parse().expect("a number"))
        .collect();
    let metric = Metric::L2Squared;

    let ctx = std::sync::Arc::new(weft_gpu::probe()?);
    let t = Instant::now();
    let generator = preset.generator(1)?;
    let base = generator.base(n)?;
    let queries = generator.queries(nq)?;
    let gen_s = t.elapsed().as_secs_f64();
    let dev = DeviceMatrix::upload(&ctx, base.view())?;
    let tunings: Vec<GgnnTuning> = match args.iter().position(|a| a == "--tunings") {
        None => vec![GgnnTuning::default()],
        Some(_) => arg(&args, "--tunings", "")
            .split(',')
            .map(|t| {
                let f: Vec<u32> = t.split(':').map(|x| x.parse().expect("a number")).collect();
                assert!(
                    (4..=7).contains(&f.len()),
                    "a tuning is MERGE_SEEN_BYTES:SYM_SEEN_BYTES:VECS_PER_LANE:MAX_WARPS[:MERGE_HEADS[:ORDER[:TAGS]]]"
                );
                GgnnTuning {
                    merge_seen_bytes: f[0],
                    sym_seen_bytes: f[1],
                    vecs_per_lane: f[2],
                    max_warps: f[3],
                    merge_heads: f
                        .get(4)
                        .copied()
                        .unwrap_or(GgnnTuning::default().merge_heads),
                    locality_order: f
                        .get(5)
                        .map_or(GgnnTuning::default().locality_order, |&o| o != 0),
                    seen_tags: f.get(6).map_or(GgnnTuning::default().seen_tags, |&o| {
                        (o < 2).then_some(o == 1)
                    }),
                }
            })
            .collect(),
    };
    let params = GgnnParams {
        k_build: k,
        ..Default::default()
    };
    let exact = ExactGpu::new(&ctx);
    // C@10 on a sample of base points (every (n / sample)-th) against the exact GPU k-NN.
    let step = (n / sample.max(1)).max(1);
    let picks: Vec<usize> = (0..n).step_by(step).take(sample).collect();
    let mut qs = Vec::with_capacity(picks.len() * base.dim());
    for &p in &picks {
        qs.extend_from_slice(base.row(p));
    }
    let qsv = DatasetView::new(&qs, picks.len(), base.dim())?;
    let truth = exact.search(base.view(), qsv, metric, 11)?;
    let mut first = None;
    for (ti, &tuning) in tunings.iter().enumerate() {
        let builder = GgnnGpu::new(ctx.clone()).with_tuning(tuning);
        // Warm-up on a prefix: loads the module.
        {
            let m = n.min(50_000);
            let warm = DatasetView::new(&base.as_slice()[..m * base.dim()], m, base.dim())?;
            let wdev = DeviceMatrix::upload(&ctx, warm)?;
            builder.build_device(&wdev, warm, metric, &params, &BuildCtx::new(1))?;
        }
        let mut times = Vec::new();
        let mut built = None;
        for _ in 0..runs {
            let t = Instant::now();
            let r = builder.build_device(&dev, base.view(), metric, &params, &BuildCtx::new(1))?;
            ctx.synchronize()?;
            times.push(t.elapsed().as_secs_f64());
            built = Some(r);
        }
        let (graph, stats) = built.expect("one run at least");
        graph.validate()?;
        let mut hit = 0usize;
        for (i, &p) in picks.iter().enumerate() {
            let t: Vec<NodeId> = truth
                .row_ids(i)
                .iter()
                .copied()
                .filter(|&u| u as usize != p)
                .take(10)
                .collect();
            let nb = weft_core::GraphView::neighbors(&graph, p as NodeId);
            let nb = &nb[..nb.len().min(10)];
            hit += t.iter().filter(|x| nb.contains(x)).count();
        }
        let c10 = hit as f64 / (10 * picks.len()) as f64;
        times.sort_by(f64::total_cmp);
        println!(
            "{}",
            serde_json::json!({
                "device": ctx.info().name, "preset": preset.name(), "n": n, "dim": base.dim(), "k_build": k,
                "params": format!("{params:?}"), "tuning": format!("{tuning:?}"),
                "layers": (0..graph.num_layers()).map(|l| graph.layer_len(l)).collect::<Vec<_>>(),
                "generate_s": gen_s,
                "build_s": { "min": times[0], "median": times[times.len() / 2], "runs": runs },
                "c_at_10_sample": c10, "sample": picks.len(),
                "mean_nn1": stats.mean_nn1, "max_nn1": stats.max_nn1, "dropped_links": stats.dropped_links,
                "repair": stats.repair, "entry_points": graph.entry_points().len(),
            })
        );
        for _ in 0..timed {
            let t = Instant::now();
            let (_, _, phases) = builder.build_device_timed(
                &dev,
                base.view(),
                metric,
                &params,
                &BuildCtx::new(1),
            )?;
            let total = t.elapsed().as_secs_f64();
            let mut kinds: Vec<(&str, f64)> = Vec::new();
            for p in &phases {
                match kinds.iter_mut().find(|(k, _)| *k == p.phase) {
                    Some(e) => e.1 += p.seconds,
                    None => kinds.push((p.phase, p.seconds)),
                }
            }
            let list: Vec<serde_json::Value> = phases
                .iter()
                .map(|p| {
                    serde_json::json!([
                        p.phase,
                        p.from,
                        p.layer,
                        (p.seconds * 1e4).round() / 1e4,
                        p.pops,
                        p.scored,
                        p.by_layer
                    ])
                })
                .collect();
            println!(
                "{}",
                serde_json::json!({
                    "tuning": ti,
                    "timed_build_s": total,
                    "by_phase_s": kinds.iter().map(|(k, s)| serde_json::json!([k, (s * 1e4).round() / 1e4])).collect::<Vec<_>>(),
                    "phases [phase, from, layer, s, pops, scored, [[search layer, pops, scored]]]": list,
                })
            );
        }
        if first.is_none() {
            first = Some((graph, stats));
        }
    }
    drop(dev);
    let (graph, stats) = first.expect("one tuning at least");
    let gt = exact.search(base.view(), queries.view(), metric, 10)?;
    for &tau in &taus {
        let p = GgnnSearchParams {
            max_nn1: Some(stats.max_nn1),
            tuning: GgnnSearchTuning {
                tau,
                ..Default::default()
            },
            ..Default::default()
        };
        let mut out = Neighbors::new(nq, 10);
        let t = Instant::now();
        GgnnSearch.search(
            &graph,
            base.view(),
            queries.view(),
            metric,
            &p,
            out.as_mut(),
        )?;
        let s = t.elapsed().as_secs_f64();
        let mut r1 = 0usize;
        let mut r10 = 0usize;
        for q in 0..nq {
            let found = out.row_ids(q);
            let want = gt.row_ids(q);
            r1 += usize::from(found[0] == want[0]);
            r10 += want.iter().filter(|x| found.contains(x)).count();
        }
        println!(
            "{}",
            serde_json::json!({
                "search": "GgnnSearch (CPU)", "threads": rayon_threads(), "tau": tau,
                "recall_at_1": r1 as f64 / nq as f64, "recall_at_10": r10 as f64 / (10 * nq) as f64,
                "qps": nq as f64 / s,
            })
        );
    }
    Ok(())
}

fn rayon_threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}
