//! QPS and recall of the GPU GGNN query (`weft_search::gpu::ggnn`, what
//! `weft_search::GgnnSearchGpu` runs), beside the CAGRA search and other graphs.
//!
//! ```text
//! ggnn_gpu_search_bench [--preset sift|gist] [--n 1000000] [--queries 10000] [--k 24]
//!     [--taus 0.0,0.2,0.3,0.4,0.5,0.6,0.7,0.8,1.0] [--prioq 54 (the GGNN beam width)] [--visited 384]
//!     [--iterations 400] [--blocks 32,64] [--teams 0] [--runs 3] [--extra "prioq:iters[:visited],..."]
//!     [--compare] [--beam-width 16,24,32,48,64] [--f16] [--prefetch 1,0]
//! ```
//!
//! Generates the weft-io synthetic preset (seed 1: base and queries) and uploads it; builds the
//! GGNN hierarchy on the GPU (`GgnnGpu::build_device`, k_build `--k`, defaults otherwise);
//! computes the exact top 10 with `ExactGpu`; then, with the data, the base-layer graph, the
//! entry points and the queries resident on the device, times `GgnnSearchDevice::
//! search_device_with` over the whole batch (one warm-up call first, then the median of
//! `--runs` calls; each call covers the kernel and the download of the results to the host,
//! synchronised) for every tau of `--taus` and every block size and team size, with the
//! queue, ring and iteration cap given (and `--extra` more queue:iteration pairs at every tau).
//! One JSON line per point: recall@1 (the true nearest neighbour returned first), recall@10,
//! queries per second, expansions and distances per query.
//!
//! With `--compare`: builds a CAGRA graph (GNND k = 64, optimised to degree 32) and a GRNND
//! graph (defaults, degree 32) of the same data on the GPU and searches the three graphs both
//! with the GGNN query (entered from the GGNN hierarchy's entry points, tau sweep) and with the
//! CAGRA single-CTA search (the GGNN entry points besides its random ones, beam_width
//! sweep `--beam-width`). With `--f16`: the GGNN sweep (first block and team size) again on f16
//! copies of base and queries, over the same graph (recall against the f32 truth).

use std::sync::Arc;
use std::time::Instant;

use weft_cagra::gpu::CagraOptimizer;
use weft_core::{BuildCtx, Dataset, Element, Metric, Neighbors, NodeId};
use weft_exact::ExactGpu;
use weft_ggnn::{GgnnGpu, GgnnParams};
use weft_gpu::{DeviceFixedGraph, DeviceMatrix, GpuContext};
use weft_grnnd::GrnndParams;
use weft_grnnd::gpu::Grnnd;
use weft_nndescent::NnDescentParams;
use weft_nndescent::gpu::Gnnd;
use weft_search::gpu::cagra::{
    CagraSearchBuffers, CagraSearchDevice, CagraSearchMode, CagraSearchParams, CagraSearchTuning,
};
use weft_search::gpu::ggnn::{GgnnGpuOptions, GgnnSearchBuffers, GgnnSearchDevice};
use weft_search::{DeviceSearchInputs, GgnnSearchParams, GgnnSearchTuning};

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

fn list<T: std::str::FromStr>(args: &[String], name: &str, default: &str) -> Vec<T> {
    arg(args, name, default)
        .split(',')
        .filter(|s| !s.is_empty())
        .map(|v| {
            v.parse()
                .unwrap_or_else(|_| panic!("{name}: bad value {v}"))
        })
        .collect()
}

/// (recall@1, recall@10): recall@1 counts a query whose first result is the true nearest
/// neighbour (or ties its distance).
fn recalls(found: &Neighbors, truth: &Neighbors) -> (f64, f64) {
    let nq = found.rows();
    let (mut r1, mut r10) = (0usize, 0usize);
    for q in 0..nq {
        let (f, fd) = (found.row_ids(q), found.row_dists(q));
        let (t, td) = (truth.row_ids(q), truth.row_dists(q));
        r1 += usize::from(f[0] == t[0] || fd[0] <= td[0]);
        let k = f.len().min(10);
        r10 += f[..k]
            .iter()
            .enumerate()
            .filter(|&(j, x)| t[..k].contains(x) || fd[j] <= td[k - 1])
            .count();
    }
    (r1 as f64 / nq as f64, r10 as f64 / (10 * nq) as f64)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Everything one sweep needs, resident on the device.
struct Bench<'a, T: Element> {
    ctx: &'a GpuContext,
    data: &'a DeviceMatrix<T>,
    queries: &'a DeviceMatrix<T>,
    truth: &'a Neighbors,
    entries: &'a [NodeId],
    runs: usize,
    preset: &'a str,
}

impl<T: Element> Bench<'_, T> {
    /// The bench's data, entry points and queries with `graph`.
    fn inputs<'a>(&'a self, graph: &'a DeviceFixedGraph) -> DeviceSearchInputs<'a, T> {
        DeviceSearchInputs {
            data: self.data,
            graph,
            entries: self.entries,
            queries: self.queries,
        }
    }

    fn ggnn(
        &self,
        graph_name: &str,
        graph: &DeviceFixedGraph,
        cfg: &GgnnSearchParams,
        opts: &GgnnGpuOptions,
    ) -> weft_core::Result<()> {
        let dev = GgnnSearchDevice::new(self.ctx);
        let nq = self.queries.rows();
        let mut bufs = GgnnSearchBuffers::new();
        let mut found = Neighbors::new(nq, 10);
        let inputs = self.inputs(graph);
        let l2 = Metric::L2Squared;
        let st = dev.search_device_with(&mut bufs, inputs, l2, cfg, opts, found.as_mut())?;
        let mut again = Neighbors::new(nq, 10);
        let mut times = Vec::new();
        for _ in 0..self.runs {
            let t = Instant::now();
            dev.search_device_with(&mut bufs, inputs, l2, cfg, opts, again.as_mut())?;
            self.ctx.synchronize()?;
            times.push(t.elapsed().as_secs_f64());
        }
        let t = median(times);
        let (r1, r10) = recalls(&found, self.truth);
        let plan = weft_search::gpu::ggnn::plan(
            self.data.rows(),
            self.data.dim(),
            std::mem::size_of::<T>(),
            graph.degree(),
            10,
            cfg,
            opts,
        )?;
        println!(
            "{}",
            serde_json::json!({
                "what": "search", "search": "ggnn_gpu", "graph": graph_name, "preset": self.preset, "dtype": T::DTYPE.name(),
                "n": self.data.rows(), "queries": nq, "tau": cfg.tuning.tau, "best": cfg.tuning.best,
                "beam_width": cfg.beam_width, "visited": cfg.tuning.visited, "max_iterations": cfg.tuning.max_iterations,
                "prefetch_rows": opts.prefetch_rows,
                "block": plan.block_threads, "team": plan.team_size, "hash_bits": plan.hash_bits,
                "shared_bytes": plan.shared_bytes,
                "recall_at_1": r1, "recall_at_10": r10, "qps": nq as f64 / t, "seconds_median": t,
                "runs": self.runs, "expanded_per_query": st.hops as f64 / nq as f64,
                "distances_per_query": st.distance_computations as f64 / nq as f64,
            })
        );
        Ok(())
    }

    fn cagra(
        &self,
        graph_name: &str,
        graph: &DeviceFixedGraph,
        beam_width: usize,
    ) -> weft_core::Result<()> {
        let dev = CagraSearchDevice::new(self.ctx);
        let nq = self.queries.rows();
        let cfg = CagraSearchParams {
            beam_width,
            tuning: CagraSearchTuning {
                mode: CagraSearchMode::SingleCta,
                ..Default::default()
            },
            ..Default::default()
        };
        let mut bufs = CagraSearchBuffers::new();
        let mut found = Neighbors::new(nq, 10);
        let inputs = self.inputs(graph);
        let l2 = Metric::L2Squared;
        let st = dev.search_device_with(&mut bufs, inputs, l2, &cfg, found.as_mut())?;
        let mut again = Neighbors::new(nq, 10);
        let mut times = Vec::new();
        for _ in 0..self.runs {
            let t = Instant::now();
            dev.search_device_with(&mut bufs, inputs, l2, &cfg, again.as_mut())?;
            self.ctx.synchronize()?;
            times.push(t.elapsed().as_secs_f64());
        }
        let t = median(times);
        let (r1, r10) = recalls(&found, self.truth);
        println!(
            "{}",
            serde_json::json!({
                "what": "search", "search": "cagra_gpu", "graph": graph_name, "preset": self.preset, "dtype": T::DTYPE.name(),
                "n": self.data.rows(), "queries": nq, "beam_width": beam_width,
                "recall_at_1": r1, "recall_at_10": r10, "qps": nq as f64 / t, "seconds_median": t,
                "runs": self.runs, "expanded_per_query": st.hops as f64 / nq as f64,
                "distances_per_query": st.distance_computations as f64 / nq as f64,
            })
        );
        Ok(())
    }
}

fn main() -> weft_core::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let name = arg(&args, "--preset", "sift");
    let preset = weft_io::synthetic::Preset::from_name(&name)
        .ok_or_else(|| weft_core::Error::InvalidInput(format!("unknown preset {name}")))?;
    let n = num(&args, "--n", 1_000_000);
    let nq = num(&args, "--queries", 10_000);
    let k_build = num(&args, "--k", 24);
    let runs = num(&args, "--runs", 3).max(1);
    let taus: Vec<f32> = list(&args, "--taus", "0.0,0.2,0.3,0.4,0.5,0.6,0.7,0.8,1.0");
    let prioq = num(&args, "--prioq", 54);
    let visited = num(&args, "--visited", 384);
    let iterations = num(&args, "--iterations", 400);
    let blocks: Vec<usize> = list(&args, "--blocks", "32,64");
    let teams: Vec<usize> = list(&args, "--teams", "0");
    // prioq:iterations[:visited] triples (visited defaults to --visited).
    let extra: Vec<(usize, usize, usize)> = arg(&args, "--extra", "")
        .split(',')
        .filter(|s| !s.is_empty())
        .map(|s| {
            let v: Vec<usize> = s.split(':').map(|x| x.parse().expect("a number")).collect();
            assert!(
                v.len() == 2 || v.len() == 3,
                "--extra wants prioq:iterations[:visited]"
            );
            (v[0], v[1], v.get(2).copied().unwrap_or(visited))
        })
        .collect();
    let compare = args.iter().any(|a| a == "--compare");
    let f16 = args.iter().any(|a| a == "--f16");
    let prefetch: Vec<usize> = list(&args, "--prefetch", "1");
    let beam_widths: Vec<usize> = list(&args, "--beam-width", "16,24,32,48,64");
    let metric = Metric::L2Squared;

    let ctx = Arc::new(weft_gpu::probe()?);
    let t = Instant::now();
    let generator = preset.generator(1)?;
    let base = generator.base(n)?;
    let queries = generator.queries(nq)?;
    let gen_s = t.elapsed().as_secs_f64();
    let dev = DeviceMatrix::upload(&ctx, base.view())?;
    let qdev = DeviceMatrix::upload(&ctx, queries.view())?;
    let params = GgnnParams {
        k_build,
        ..Default::default()
    };
    let t = Instant::now();
    let (hier, stats) = GgnnGpu::new(ctx.clone()).build_device(
        &dev,
        base.view(),
        metric,
        &params,
        &BuildCtx::new(1),
    )?;
    ctx.synchronize()?;
    let build_s = t.elapsed().as_secs_f64();
    let t = Instant::now();
    let truth = ExactGpu::new(&ctx).search_device(&dev, &qdev, metric, 10)?;
    let exact_s = t.elapsed().as_secs_f64();
    let ggnn_graph = DeviceFixedGraph::upload(&ctx, hier.base())?;
    let entries = hier.entry_points().to_vec();
    println!(
        "{}",
        serde_json::json!({
            "what": "setup", "device": ctx.info().name, "preset": preset.name(), "n": n,
            "dim": base.dim(), "queries": nq, "k_build": k_build, "generate_s": gen_s,
            "ggnn_build_s": build_s, "exact_truth_s": exact_s,
            "layers": (0..hier.num_layers()).map(|l| hier.layer_len(l)).collect::<Vec<_>>(),
            "entry_points": entries.len(), "mean_nn1": stats.mean_nn1, "max_nn1": stats.max_nn1,
            "resident": "data, base-layer graph, entry points and queries on the device; each timed call = kernel + result download, synchronised",
        })
    );
    let bench = Bench {
        ctx: &ctx,
        data: &dev,
        queries: &qdev,
        truth: &truth,
        entries: &entries,
        runs,
        preset: preset.name(),
    };
    let mut configs: Vec<(usize, usize, usize)> = vec![(prioq, iterations, visited)];
    configs.extend(extra.iter().copied());
    for &pf in &prefetch {
        for &block in &blocks {
            for &team in &teams {
                for &(pq, it, vis) in &configs {
                    for &tau in &taus {
                        let cfg = GgnnSearchParams {
                            beam_width: pq,
                            max_nn1: Some(stats.max_nn1),
                            tuning: GgnnSearchTuning {
                                tau,
                                visited: vis,
                                max_iterations: it,
                                ..Default::default()
                            },
                            ..Default::default()
                        };
                        let opts = GgnnGpuOptions {
                            block_threads: block,
                            team_size: team,
                            prefetch_rows: pf != 0,
                        };
                        bench.ggnn("ggnn", &ggnn_graph, &cfg, &opts)?;
                    }
                }
            }
        }
    }
    if f16 {
        let to_f16 = |d: &Dataset<f32>| {
            let v: Vec<half::f16> = d
                .view()
                .iter()
                .flatten()
                .map(|&x| half::f16::from_f32(x))
                .collect();
            Dataset::from_vec(v, d.rows(), d.dim())
        };
        let dev16 = DeviceMatrix::upload(&ctx, to_f16(&base)?.view())?;
        let q16 = DeviceMatrix::upload(&ctx, to_f16(&queries)?.view())?;
        let bench16 = Bench {
            ctx: &ctx,
            data: &dev16,
            queries: &q16,
            truth: &truth,
            entries: &entries,
            runs,
            preset: preset.name(),
        };
        for &tau in &taus {
            let cfg = GgnnSearchParams {
                beam_width: prioq,
                max_nn1: Some(stats.max_nn1),
                tuning: GgnnSearchTuning {
                    tau,
                    visited,
                    max_iterations: iterations,
                    ..Default::default()
                },
                ..Default::default()
            };
            let opts = GgnnGpuOptions {
                block_threads: blocks.first().copied().unwrap_or(0),
                team_size: teams.first().copied().unwrap_or(0),
                ..Default::default()
            };
            bench16.ggnn("ggnn", &ggnn_graph, &cfg, &opts)?;
        }
    }
    if compare {
        for &beam_width in &beam_widths {
            bench.cagra("ggnn", &ggnn_graph, beam_width)?;
        }
        let t = Instant::now();
        let (knn, _) = Gnnd::new(&ctx).build_device(
            &dev,
            metric,
            64,
            &NnDescentParams::default(),
            &BuildCtx::new(0),
        )?;
        let cagra_graph = CagraOptimizer::new(&ctx).optimize_device(&knn, 32)?;
        ctx.synchronize()?;
        let cagra_s = t.elapsed().as_secs_f64();
        drop(knn);
        let t = Instant::now();
        let (grnnd_graph, _) = Grnnd::new(&ctx).build_device(
            &dev,
            metric,
            &GrnndParams::default(),
            &BuildCtx::new(0),
        )?;
        ctx.synchronize()?;
        let grnnd_s = t.elapsed().as_secs_f64();
        println!(
            "{}",
            serde_json::json!({
                "what": "setup_compare", "cagra_build_s": cagra_s, "cagra": "GNND k=64 + optimiser to degree 32",
                "grnnd_build_s": grnnd_s, "grnnd": "defaults, degree 32",
            })
        );
        let block = blocks.first().copied().unwrap_or(0);
        for (gname, g) in [("cagra", &cagra_graph), ("grnnd", &grnnd_graph)] {
            for &tau in &taus {
                let cfg = GgnnSearchParams {
                    beam_width: prioq,
                    max_nn1: Some(stats.max_nn1),
                    tuning: GgnnSearchTuning {
                        tau,
                        visited,
                        max_iterations: iterations,
                        ..Default::default()
                    },
                    ..Default::default()
                };
                let opts = GgnnGpuOptions {
                    block_threads: block,
                    ..Default::default()
                };
                bench.ggnn(gname, g, &cfg, &opts)?;
            }
            for &beam_width in &beam_widths {
                bench.cagra(gname, g, beam_width)?;
            }
        }
    }
    Ok(())
}
