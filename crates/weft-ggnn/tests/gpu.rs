//! GgnnGpu against the CPU reference GgnnCpu (needs a GPU: skips visibly without one, fails
//! with `WEFT_REQUIRE_GPU=1`): the same layer sizes and the same sampled points for a seed,
//! graph recall within 0.02 of the CPU's, valid hierarchies, the GraphBuilder conformance suite,
//! cancellation and progress, the one-layer case, and GGNN search over a GPU-built hierarchy.
#![cfg(feature = "cuda")]

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

mod common;

use common::hits_at_10;
use proptest::prelude::*;
use weft_core::DatasetView;
use weft_core::{BuildCtx, CancelToken, Error, GraphBuilder, GraphView, Metric, NodeId, Progress};
use weft_ggnn::gpu::GgnnBuild;
use weft_ggnn::{GgnnCpu, GgnnGpu, GgnnParams, nearest_entries};
use weft_gpu::DeviceMatrix;
use weft_gpu::testing::gpu_or_skip;
use weft_graph::hier::HierGraph;
use weft_testkit::graph::{GraphSuite, gaussian_mixture, ground_truth, run_graph_suite};

fn gpu(test: &str) -> Option<GgnnGpu> {
    gpu_or_skip(test).map(|ctx| GgnnGpu::new(Arc::new(ctx)))
}

/// C@10 of the base rows: the share of each point's 10 true nearest neighbours (itself
/// excluded) among its first 10 stored neighbours.
fn c_at_10(g: &HierGraph, truth: &weft_core::Neighbors) -> f64 {
    let n = g.n();
    let hit: usize = (0..n).map(|v| hits_at_10(g, v, truth.row_ids(v))).sum();
    hit as f64 / (10 * n) as f64
}

#[test]
fn gpu_samples_the_same_layers_as_the_cpu_reference() {
    let Some(b) = gpu("gpu_samples_the_same_layers_as_the_cpu_reference") else {
        return;
    };
    let (base, _) = gaussian_mixture::<f32>(2000, 0, 16, 8, 5);
    for (metric, seed, k) in [
        (Metric::L2Squared, 3u64, 24usize),
        (Metric::L2Squared, 8, 16),
        (Metric::Cosine, 5, 24),
        (Metric::InnerProduct, 6, 20),
    ] {
        let p = GgnnParams {
            k_build: k,
            ..Default::default()
        };
        let ctx = BuildCtx::new(seed);
        let cpu = GgnnCpu.build(base.view(), metric, &p, &ctx).unwrap();
        let gpu = b.build(base.view(), metric, &p, &ctx).unwrap();
        gpu.validate().unwrap();
        assert_eq!(cpu.num_layers(), gpu.num_layers());
        for l in 0..cpu.num_layers() {
            assert_eq!(cpu.layer_len(l), gpu.layer_len(l), "{metric} layer {l}");
        }
        for l in 1..cpu.num_layers() {
            assert_eq!(
                cpu.layer(l).unwrap().global_ids(),
                gpu.layer(l).unwrap().global_ids(),
                "{metric} seed {seed}: sampled points of layer {l} differ"
            );
        }
        assert_eq!(cpu.entry_points(), gpu.entry_points());
    }
}

#[test]
fn gpu_graph_recall_is_within_002_of_the_cpu_reference() {
    let Some(b) = gpu("gpu_graph_recall_is_within_002_of_the_cpu_reference") else {
        return;
    };
    let (base, _) = gaussian_mixture::<f32>(5000, 0, 32, 16, 21);
    for metric in [Metric::L2Squared, Metric::Cosine] {
        let p = GgnnParams::default();
        let ctx = BuildCtx::new(9);
        let (cpu, cs) = GgnnCpu
            .build_with_stats(base.view(), metric, &p, &ctx)
            .unwrap();
        let (gpu, gs) = b.build_with_stats(base.view(), metric, &p, &ctx).unwrap();
        gpu.validate().unwrap();
        let truth = ground_truth(base.view(), base.view(), metric, 11).unwrap();
        let (rc, rg) = (c_at_10(&cpu, &truth), c_at_10(&gpu, &truth));
        println!(
            "{metric}: C@10 CPU {rc:.4} GPU {rg:.4}; mean nn1 {} / {}; dropped links {} / {}",
            cs.mean_nn1, gs.mean_nn1, cs.dropped_links, gs.dropped_links
        );
        assert!((rc - rg).abs() <= 0.02, "{metric}: CPU {rc} vs GPU {rg}");
        assert!(gs.max_nn1 >= gs.mean_nn1 && gs.mean_nn1 > 0.0);
        assert!((gs.mean_nn1 - cs.mean_nn1).abs() <= 0.01 * cs.mean_nn1);
        // Upper layers too: the same proportion of matching first neighbours.
        for l in 1..cpu.num_layers() {
            let (a, g) = (cpu.layer_graph(l).unwrap(), gpu.layer_graph(l).unwrap());
            let same = (0..a.n())
                .filter(|&v| a.neighbors(v as NodeId)[0] == g.neighbors(v as NodeId)[0])
                .count();
            assert!(
                same as f64 >= 0.95 * a.n() as f64,
                "{metric} layer {l}: {same} of {} first neighbours agree",
                a.n()
            );
        }
    }
}

#[test]
fn ggnn_gpu_passes_the_suite() {
    let Some(b) = gpu("ggnn_gpu_passes_the_suite") else {
        return;
    };
    // The CPU reference's thresholds (tests/ggnn.rs); the GPU hands out inverse links with
    // atomics, so its graphs are not bit-reproducible and the determinism check is off.
    let mut suite = GraphSuite::new(GgnnParams::default(), 0.45);
    suite.min_recall_ip = 0.85;
    suite.check_determinism = false;
    suite.invalid_params = vec![
        GgnnParams {
            k_build: 1,
            ..Default::default()
        },
        GgnnParams {
            segment_size: 48,
            ..Default::default()
        },
        GgnnParams {
            layers: 0,
            ..Default::default()
        },
        GgnnParams {
            tau_build: f32::NAN,
            ..Default::default()
        },
        GgnnParams {
            segment_size: 512,
            ..Default::default()
        },
    ];
    let report = run_graph_suite(&b, &suite);
    println!("{report}");
}

/// Counts progress units.
struct Count(AtomicU64);
impl Progress for Count {
    fn begin(&self, _stage: &str, _total: Option<u64>) {}
    fn advance(&self, delta: u64) {
        self.0.fetch_add(delta, Ordering::Relaxed);
    }
}

#[test]
fn gpu_cancellation_progress_and_budget() {
    let Some(b) = gpu("gpu_cancellation_progress_and_budget") else {
        return;
    };
    let (base, _) = gaussian_mixture::<f32>(800, 0, 8, 4, 2);
    let p = GgnnParams::default();
    let cancel = CancelToken::new();
    cancel.cancel();
    let r = b.build(
        base.view(),
        Metric::L2Squared,
        &p,
        &BuildCtx::new(1).with_cancel(cancel),
    );
    assert!(matches!(r, Err(Error::Cancelled)));
    let count = Arc::new(Count(AtomicU64::new(0)));
    b.build(
        base.view(),
        Metric::L2Squared,
        &p,
        &BuildCtx::new(1).with_progress(count.clone()),
    )
    .unwrap();
    assert_eq!(count.0.load(Ordering::Relaxed), 4 + 3 + 4 + 6 + 6 + 6);
    let small = b.clone().with_budget(4096);
    assert!(matches!(
        small.build(base.view(), Metric::L2Squared, &p, &BuildCtx::new(1)),
        Err(Error::OutOfDeviceMemory { .. })
    ));
}

#[test]
fn gpu_one_layer_is_exact_brute_force() {
    let Some(b) = gpu("gpu_one_layer_is_exact_brute_force") else {
        return;
    };
    let (base, _) = gaussian_mixture::<f32>(200, 0, 8, 4, 4);
    let p = GgnnParams {
        layers: 1,
        k_build: 10,
        ..Default::default()
    };
    let g = b
        .build(base.view(), Metric::L2Squared, &p, &BuildCtx::new(1))
        .unwrap();
    g.validate().unwrap();
    assert_eq!(g.num_layers(), 1);
    let dist = Metric::L2Squared.distance_fn::<f32>();
    for v in 0..200u32 {
        let mut all: Vec<(f32, NodeId)> = (0..200u32)
            .filter(|&u| u != v)
            .map(|u| (dist.eval(base.row(v as usize), base.row(u as usize)), u))
            .collect();
        all.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
        // Distances of the first half equal the true 5 nearest (ids may swap on exact ties).
        for (j, &x) in g.neighbors(v)[..5].iter().enumerate() {
            let d = dist.eval(base.row(v as usize), base.row(x as usize));
            assert!(
                (d - all[j].0).abs() <= 1e-4 * (1.0 + all[j].0),
                "vertex {v} slot {j}"
            );
        }
    }
}

#[test]
fn ggnn_search_over_a_gpu_built_hierarchy() {
    use weft_core::{Neighbors, Searcher};
    use weft_search::{GgnnSearch, GgnnSearchParams, GgnnSearchTuning};
    use weft_testkit::graph::recall_at_k;
    let Some(b) = gpu("ggnn_search_over_a_gpu_built_hierarchy") else {
        return;
    };
    let (base, queries) = gaussian_mixture::<f32>(3000, 100, 32, 4, 17);
    let (g, stats) = b
        .build_with_stats(
            base.view(),
            Metric::L2Squared,
            &GgnnParams::default(),
            &BuildCtx::new(5),
        )
        .unwrap();
    let truth = ground_truth(base.view(), queries.view(), Metric::L2Squared, 10).unwrap();
    let p = GgnnSearchParams {
        max_nn1: Some(stats.max_nn1),
        tuning: GgnnSearchTuning {
            tau: 0.8,
            ..Default::default()
        },
        ..Default::default()
    };
    let mut out = Neighbors::new(100, 10);
    GgnnSearch
        .search(
            &g,
            base.view(),
            queries.view(),
            Metric::L2Squared,
            &p,
            out.as_mut(),
        )
        .unwrap();
    let recall = recall_at_k(&out, &truth, 10);
    println!("ggnn search over the GPU graph: recall@10 {recall:.4}");
    assert!(recall >= 0.9, "recall@10 {recall}");
}

/// Vertices of every layer of `g` that its entry points (`weft_ggnn::layer_entry_points`) do
/// not reach.
fn unreachable_per_layer(g: &HierGraph) -> Vec<usize> {
    (0..g.num_layers())
        .map(|l| {
            let graph = g.layer_graph(l).unwrap();
            let entries = weft_ggnn::layer_entry_points(g, l);
            let r = weft_graph::stats::Reachability::new(graph, &entries).unwrap();
            graph.n() - r.num_reachable()
        })
        .collect()
}

/// Recall@10 of the GPU GGNN search (`weft_search::GgnnSearchGpu`) over `g` from its entry
/// points, for each `tau`.
fn gpu_search_recalls(
    b: &GgnnGpu,
    g: &HierGraph,
    base: &weft_core::Dataset<f32>,
    queries: &weft_core::Dataset<f32>,
    metric: Metric,
    taus: &[f32],
) -> Vec<f64> {
    use weft_core::{Neighbors, Searcher};
    use weft_search::GgnnSearchTuning;
    use weft_search::{GgnnSearchGpu, GgnnSearchParams};
    use weft_testkit::graph::recall_at_k;
    let truth = ground_truth(base.view(), queries.view(), metric, 10).unwrap();
    taus.iter()
        .map(|&tau| {
            let params = GgnnSearchParams {
                tuning: GgnnSearchTuning {
                    tau,
                    ..Default::default()
                },
                ..Default::default()
            };
            let mut out = Neighbors::new(queries.rows(), 10);
            GgnnSearchGpu::new(b.context())
                .search(
                    g,
                    base.view(),
                    queries.view(),
                    metric,
                    &params,
                    out.as_mut(),
                )
                .unwrap();
            recall_at_k(&out, &truth, 10)
        })
        .collect()
}

/// Issue 16 on the GPU: on strongly clustered data (40 Gaussian clusters, the exact k-NN
/// graph one component per cluster) the GPU build leaves every layer reachable from its entry
/// points, and the GPU GGNN search from the spread entry points reaches recall@10 >= 0.99; the
/// paper's top-layer entry points (repair off) strand queries.
#[test]
fn gpu_build_on_clustered_data_is_connected_and_the_gpu_search_finds_every_cluster() {
    let Some(b) =
        gpu("gpu_build_on_clustered_data_is_connected_and_the_gpu_search_finds_every_cluster")
    else {
        return;
    };
    let (base, queries) = gaussian_mixture::<f32>(5000, 200, 32, 40, 41);
    let (g, stats) = b
        .build_with_stats(
            base.view(),
            Metric::L2Squared,
            &GgnnParams::default(),
            &BuildCtx::new(5),
        )
        .unwrap();
    g.validate().unwrap();
    assert_eq!(g.entry_points().len(), 256);
    assert_eq!(unreachable_per_layer(&g), vec![0; g.num_layers()]);
    assert_eq!(stats.repair.unreachable_after, 0, "{:?}", stats.repair);
    let recalls = gpu_search_recalls(&b, &g, &base, &queries, Metric::L2Squared, &[0.0, 0.5]);
    println!(
        "clustered, GPU build + GPU search: repair {:?}, recall@10 at tau 0 / 0.5 {recalls:?}",
        stats.repair
    );
    assert!(recalls[1] >= 0.99, "{recalls:?}");

    // The paper's entry points (the top layer's 32 points) and no repair: stranded.
    let paper = GgnnParams {
        repair: false,
        entry_points: 0,
        ..Default::default()
    };
    let g = b
        .build(base.view(), Metric::L2Squared, &paper, &BuildCtx::new(5))
        .unwrap();
    let before = unreachable_per_layer(&g);
    let r = gpu_search_recalls(&b, &g, &base, &queries, Metric::L2Squared, &[0.5]);
    println!("clustered, paper's entry points: unreachable per layer {before:?}, recall@10 {r:?}");
    assert!(before[0] > 1000 && r[0] < 0.8, "{before:?} {r:?}");
}

/// GloVe-like angular data (cosine): GPU build + GPU search reach recall@10 >= 0.99.
#[test]
fn gpu_build_and_search_on_glove_like_angular_data() {
    let Some(b) = gpu("gpu_build_and_search_on_glove_like_angular_data") else {
        return;
    };
    let generator = weft_io::synthetic::Preset::Glove.generator(7).unwrap();
    let base = generator.base(20_000).unwrap();
    let queries = generator.queries(500).unwrap();
    let (g, stats) = b
        .build_with_stats(
            base.view(),
            Metric::Cosine,
            &GgnnParams::default(),
            &BuildCtx::new(3),
        )
        .unwrap();
    assert_eq!(unreachable_per_layer(&g), vec![0; g.num_layers()]);
    let recalls = gpu_search_recalls(&b, &g, &base, &queries, Metric::Cosine, &[0.5, 1.0, 2.0]);
    println!(
        "GloVe-like 20,000 x 100, GPU build + GPU search: repair {:?}, recall@10 {recalls:?}",
        stats.repair
    );
    assert!(recalls.iter().any(|&r| r >= 0.99), "{recalls:?}");
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    /// The seeds of the entry-seeded merges (`ggnn_nearest_entry`) against the CPU reference
    /// `nearest_entries` on fresh random data: the same ids on integer data in L2 (exact
    /// distances, so ties go to the earlier entry on both), otherwise the same id or one at
    /// the same distance up to rounding.
    #[test]
    fn gpu_nearest_entries_match_the_cpu_reference(
        n in 1usize..3000,
        dim in prop::sample::select(vec![1usize, 3, 16, 33, 128]),
        want in 1usize..300,
        metric in prop::sample::select(Metric::ALL.to_vec()),
        integer in any::<bool>(),
        seed in any::<u64>(),
    ) {
        let Some(b) = gpu("gpu_nearest_entries_match_the_cpu_reference") else {
            return Ok(());
        };
        let mut rng = weft_core::rng::SplitMix64::new(seed);
        let mut ids: Vec<NodeId> = (0..n as NodeId).collect();
        for i in (1..n).rev() {
            ids.swap(i, rng.below(i as u64 + 1) as usize);
        }
        let entries = &ids[..want.min(n)];
        let ctx = BuildCtx::new(0);
        if integer {
            let data: Vec<u8> = (0..n * dim).map(|_| rng.below(8) as u8).collect();
            let view = DatasetView::new(&data, n, dim).unwrap();
            let cpu = nearest_entries(view, metric, entries, &ctx).unwrap();
            let dev = DeviceMatrix::upload(b.context(), view).unwrap();
            let gpu = GgnnBuild::new(b.context()).nearest_entries(&dev, metric, entries).unwrap();
            if metric == Metric::L2Squared {
                prop_assert_eq!(gpu, cpu);
            } else {
                check_near(view, metric, &cpu, &gpu)?;
            }
        } else {
            let data: Vec<f32> = (0..n * dim).map(|_| rng.next_f32() * 2.0 - 1.0).collect();
            let view = DatasetView::new(&data, n, dim).unwrap();
            let cpu = nearest_entries(view, metric, entries, &ctx).unwrap();
            let dev = DeviceMatrix::upload(b.context(), view).unwrap();
            let gpu = GgnnBuild::new(b.context()).nearest_entries(&dev, metric, entries).unwrap();
            check_near(view, metric, &cpu, &gpu)?;
        }
    }
}

/// Every point's GPU seed is its CPU seed or an entry at the same distance up to rounding.
fn check_near<T: weft_core::Element>(
    view: DatasetView<'_, T>,
    metric: Metric,
    cpu: &[NodeId],
    gpu: &[NodeId],
) -> Result<(), TestCaseError> {
    prop_assert_eq!(cpu.len(), gpu.len());
    let dist = metric.distance_fn::<T>();
    for (v, (&c, &g)) in cpu.iter().zip(gpu).enumerate() {
        if c != g {
            let dc = dist.eval(view.row(v), view.row(c as usize));
            let dg = dist.eval(view.row(v), view.row(g as usize));
            prop_assert!(
                (dc - dg).abs() <= 1e-4 * dc.abs().max(1.0),
                "point {v}: cpu {c} at {dc}, gpu {g} at {dg}"
            );
        }
    }
    Ok(())
}
