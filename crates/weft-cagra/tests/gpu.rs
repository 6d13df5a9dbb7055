//! The GPU optimiser against the CPU optimiser: every stage equal, bit for bit, on fresh random
//! k-NN graphs (proptest), the optimised graph of a synthetic set, and the GPU pipeline (k-NN
//! graph from the host or left on the device) against the CPU pipeline. Skips without a GPU
//! (fails with WEFT_REQUIRE_GPU=1).
#![cfg(feature = "cuda")]

use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use std::sync::Arc;

use weft_cagra::gpu::CagraOptimizer;
use weft_cagra::{
    CagraCpu, CagraGpu, CagraParams, CagraPipeline, CagraPipelineGpu, KnnSource, optimize_stages,
};
use weft_core::{
    BuildCtx, GraphBuilder, GraphOptimizer, GraphView, INVALID, KnnGraph, KnnGraphBuilder, Metric,
    NoParams, NodeId,
};
use weft_gpu::testing::gpu_or_skip;
use weft_gpu::{GpuKnnGraph, GpuKnnSource, HostKnn};

/// A random valid k-NN graph (a fifth of the rows shorter when `short`); neighbours are drawn
/// from a window around the vertex when `local`, so that rows overlap and detours are common.
fn random_knn(n: usize, k: usize, seed: u64, short: bool, local: bool) -> KnnGraph {
    let mut rng = weft_core::rng::SplitMix64::new(seed);
    let mut ids = vec![INVALID; n * k];
    let mut dists = vec![f32::INFINITY; n * k];
    let window = (3 * k).min(n - 1).max(k);
    for v in 0..n {
        let m = if short && rng.below(5) == 0 {
            rng.below(k as u64 + 1) as usize
        } else {
            k
        };
        let mut row: Vec<NodeId> = Vec::with_capacity(m);
        while row.len() < m {
            let x = if local {
                ((v + n + rng.below(window as u64 + 1) as usize) - window / 2) % n
            } else {
                rng.below(n as u64) as usize
            } as NodeId;
            if x as usize != v && !row.contains(&x) {
                row.push(x);
            }
        }
        for (j, x) in row.into_iter().enumerate() {
            ids[v * k + j] = x;
            dists[v * k + j] = j as f32;
        }
    }
    KnnGraph::from_parts(n, k, ids, dists).unwrap()
}

#[test]
fn gpu_stages_equal_cpu_stages_on_random_graphs() {
    let Some(ctx) = gpu_or_skip("gpu_stages_equal_cpu_stages_on_random_graphs") else {
        return;
    };
    let gpu = CagraOptimizer::new(&ctx);
    // CAGRA_ORACLE_CASES lowers the case count under compute-sanitizer.
    let cases = std::env::var("CAGRA_ORACLE_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(64);
    let mut runner = TestRunner::new(Config::with_cases(cases));
    let strategy = (
        2usize..3000,
        1usize..200,
        0.05f64..1.0,
        any::<u64>(),
        any::<bool>(),
        any::<bool>(),
    );
    runner
        .run(&strategy, |(n, k, frac, seed, short, local)| {
            let k = k.min(n - 1);
            let d = ((k as f64 * frac).ceil() as usize).clamp(1, k);
            let knn = random_knn(n, k, seed, short, local);
            let cpu = optimize_stages(&knn, d, &BuildCtx::new(0)).unwrap();
            let g = gpu.optimize_stages(&knn, d).unwrap();
            prop_assert_eq!(&g.detours, &cpu.detours, "detours n={} k={} d={}", n, k, d);
            prop_assert_eq!(&g.pruned, &cpu.pruned, "pruned n={} k={} d={}", n, k, d);
            prop_assert_eq!(&g.reverse_counts, &cpu.reverse_counts);
            prop_assert_eq!(&g.reverse, &cpu.reverse);
            prop_assert_eq!(&g.graph, &cpu.graph, "graph n={} k={} d={}", n, k, d);
            Ok(())
        })
        .unwrap();
}

#[test]
fn gpu_optimiser_equals_cpu_optimiser_on_a_synthetic_set() {
    let Some(ctx) = gpu_or_skip("gpu_optimiser_equals_cpu_optimiser_on_a_synthetic_set") else {
        return;
    };
    let generator = weft_io::synthetic::Preset::Sift.generator(11).unwrap();
    let base = generator.base(6000).unwrap();
    let bctx = BuildCtx::new(4);
    let knn = weft_exact::ExactKnn
        .build(
            base.view(),
            Metric::L2Squared,
            64,
            &weft_core::NoParams {},
            &bctx,
        )
        .unwrap();
    let p = CagraParams {
        graph_degree: 32,
        intermediate_degree: 64,
        ..Default::default()
    };
    let cpu = CagraCpu
        .optimize(base.view(), Metric::L2Squared, &knn, 32, &p, &bctx)
        .unwrap();
    let gpu = CagraGpu::new(&ctx)
        .optimize(base.view(), Metric::L2Squared, &knn, 32, &p, &bctx)
        .unwrap();
    assert_eq!(gpu.ids(), cpu.ids());
    assert_eq!(gpu.entry_points(), cpu.entry_points());
    assert!(!gpu.entry_points().is_empty());
    // The same through the device-resident entry point.
    let dknn = weft_gpu::DeviceKnnGraph::upload(&ctx, &knn).unwrap();
    let dev = CagraGpu::new(&ctx)
        .optimize_device(base.view(), Metric::L2Squared, &dknn, 32, &p, &bctx)
        .unwrap();
    assert_eq!(dev.ids(), cpu.ids());
    assert_eq!(dev.entry_points(), cpu.entry_points());
}

/// A k-NN source that leaves the exact graph on the device, as GNND does.
struct ExactOnDevice<'c>(&'c weft_gpu::GpuContext);

impl GpuKnnSource for ExactOnDevice<'_> {
    fn name(&self) -> &'static str {
        "exact"
    }

    fn knn_graph<T: weft_core::Element>(
        &self,
        data: weft_core::DatasetView<'_, T>,
        metric: Metric,
        k: usize,
        ctx: &BuildCtx,
    ) -> weft_core::Result<GpuKnnGraph> {
        let knn = weft_exact::ExactKnn.build(data, metric, k, &NoParams {}, ctx)?;
        Ok(GpuKnnGraph::Device(weft_gpu::DeviceKnnGraph::upload(
            self.0, &knn,
        )?))
    }
}

#[test]
fn gpu_pipeline_equals_cpu_pipeline_from_host_and_device_sources() {
    let Some(ctx) = gpu_or_skip("gpu_pipeline_equals_cpu_pipeline_from_host_and_device_sources")
    else {
        return;
    };
    let ctx = Arc::new(ctx);
    let base = weft_io::synthetic::Preset::Sift
        .generator(5)
        .unwrap()
        .base(3000)
        .unwrap();
    let bctx = BuildCtx::new(2);
    let p = CagraParams {
        graph_degree: 32,
        intermediate_degree: 64,
        ..Default::default()
    };
    let cpu = CagraPipeline::new(weft_exact::ExactKnn, NoParams {})
        .build(base.view(), Metric::L2Squared, &p, &bctx)
        .unwrap();
    let host = CagraPipelineGpu::new(
        Arc::clone(&ctx),
        HostKnn::new(weft_exact::ExactKnn, NoParams {}),
    )
    .build(base.view(), Metric::L2Squared, &p, &bctx)
    .unwrap();
    assert_eq!(host.ids(), cpu.ids());
    assert_eq!(host.entry_points(), cpu.entry_points());
    let device = CagraPipelineGpu::new(Arc::clone(&ctx), ExactOnDevice(&ctx))
        .build(base.view(), Metric::L2Squared, &p, &bctx)
        .unwrap();
    assert_eq!(device.ids(), cpu.ids());
    assert_eq!(device.entry_points(), cpu.entry_points());
    // `Exact` runs the exact GPU kernels instead of the source (same graph up to ties).
    let exact = CagraParams {
        knn: KnnSource::Exact,
        ..p.clone()
    };
    let by_gpu = CagraPipelineGpu::new(Arc::clone(&ctx), ExactOnDevice(&ctx))
        .build(base.view(), Metric::L2Squared, &exact, &bctx)
        .unwrap();
    by_gpu.validate().unwrap();
    assert_eq!(by_gpu.degree(), 32);
}
