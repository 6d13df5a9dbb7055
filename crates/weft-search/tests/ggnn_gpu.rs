//! The GPU GGNN query (`GgnnSearchGpu`, `weft_gpu::ggnn_search`): the searcher suite, an oracle
//! against the CPU `GgnnSearch` on fresh random sets, no duplicates on malformed graphs, batch
//! and buffer reuse, and typed errors. Every test skips visibly without a GPU and fails with
//! WEFT_REQUIRE_GPU=1.
//!
//! The oracle (`ggnn_gpu_equals_cpu_when_nothing_is_forgotten`): on vectors of small integers
//! (so that both sides compute every squared L2 distance exactly, whatever the summation
//! order), with a queue that holds every point (nothing is dropped) and a ring that holds every
//! expanded vertex (nothing is forgotten), both searches expand the same vertices in the same
//! order and return the same k (id, distance) pairs, up to distance ties: the distances equal
//! bit for bit, and the ids wherever the distance is not tied with a neighbour in the list
//! (or at the last position, which may tie with the first point left out). Ties can reorder expansions (the CPU puts newer entries first, the GPU
//! orders by id), so at most one query in 25 may differ, and then only in ids at tied
//! distances or, rarely, by a different path (its recall is still checked).
#![cfg(feature = "cuda")]

mod common;

use half::f16;
use proptest::prelude::*;
use weft_core::{
    Dataset, Element, Error, FixedDegreeGraph, GraphView, INVALID, Metric, Neighbors, NodeId,
};
use weft_gpu::GpuContext;
use weft_gpu::testing::gpu_or_skip;
use weft_gpu::{DeviceFixedGraph, DeviceMatrix};
use weft_search::gpu::ggnn::{GgnnGpuOptions, GgnnSearchBuffers, GgnnSearchDevice};
use weft_search::{
    DeviceSearchInputs, GgnnSearch, GgnnSearchGpu, GgnnSearchParams, GgnnSearchTuning, SearchInputs,
};
use weft_testkit::gpu_cases;
use weft_testkit::graph::{gaussian_mixture, ground_truth, recall_at_k};
use weft_testkit::search::{
    SearchSuite, check_results, known_good_graph, run_search, run_search_suite,
};

use common::{ggnn_invalid_params, two_layer_hierarchy};

#[test]
fn ggnn_gpu_passes_the_suite() {
    let Some(ctx) = gpu_or_skip("ggnn_gpu_passes_the_suite") else {
        return;
    };
    let mut suite = SearchSuite::new(GgnnSearchParams::default(), 0.9);
    suite.invalid_params = ggnn_invalid_params();
    suite.invalid_params.extend([
        // More than a block can merge, and a visited table beyond shared memory.
        GgnnSearchParams {
            beam_width: 5000,
            ..Default::default()
        },
        GgnnSearchParams {
            tuning: GgnnSearchTuning {
                visited: 100_000,
                ..Default::default()
            },
            ..Default::default()
        },
    ]);
    for block in [0, 32, 64, 128] {
        let s = GgnnSearchGpu::new(&ctx).with_block_threads(block);
        let report = run_search_suite(&s, &suite);
        println!("block {block}:\n{report}");
    }
}

/// `rows` x `dim` vectors of integers in [-100, 100] (shifted by 100 for u8), exact in every
/// element type, as `T`.
fn integer_set<T: Element>(rows: usize, dim: usize, seed: u64) -> Dataset<T> {
    let shift = if T::DTYPE == weft_core::DType::U8 {
        100.0
    } else {
        0.0
    };
    let v: Vec<T> = (0..rows * dim)
        .map(|i| {
            let r = weft_core::rng::below(weft_core::rng::hash3(seed, i as u64, 0x17), 201);
            T::from_f32(r as f32 - 100.0 + shift)
        })
        .collect();
    Dataset::from_vec(v, rows, dim).unwrap()
}

/// Whether position `j` of the sorted distances `d` may hold another id at the same distance:
/// tied with a neighbour in the list, or the last position (tied, perhaps, with the first
/// point left out).
fn is_tied(d: &[f32], j: usize) -> bool {
    (j > 0 && d[j - 1] == d[j]) || (j + 1 < d.len() && d[j + 1] == d[j]) || j + 1 == d.len()
}

/// Where the oracle's queries start.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Entries {
    /// The graph's entry point.
    Graph,
    /// No graph entry points: 32 random points per query (`entry_points = 0`).
    Random,
    /// No graph entry points: points spread over the data (the default `entry_points`).
    Spread,
}

#[allow(clippy::too_many_arguments)]
fn oracle_case<T: Element>(
    ctx: &GpuContext,
    n: usize,
    dim: usize,
    seed: u64,
    tau: f32,
    best: usize,
    iters: usize,
    entries: Entries,
    block: usize,
    metric: Metric,
) -> Result<(), TestCaseError> {
    let base = integer_set::<T>(n, dim, seed);
    let queries = integer_set::<T>(40, dim, seed ^ 0xabc);
    let mut graph = known_good_graph(base.view(), metric, seed);
    if entries != Entries::Graph {
        graph = graph.with_entry_points(Vec::new());
    }
    let k = 10;
    let p = GgnnSearchParams {
        beam_width: n,
        max_nn1: None,
        // The spread points of a graph without any (picked on the host for the GPU), or the
        // per-query random points the kernel draws as the CPU does.
        entry_points: if entries == Entries::Random {
            0
        } else {
            weft_graph::connect::DEFAULT_ENTRY_POINTS
        },
        seed,
        filter: None,
        tuning: GgnnSearchTuning {
            tau,
            best,
            visited: iters,
            max_iterations: iters,
        },
    };
    let (cpu, cst) = run_search(
        &GgnnSearch,
        &graph,
        base.view(),
        queries.view(),
        metric,
        k,
        &p,
    )
    .unwrap();
    let s = GgnnSearchGpu::new(ctx).with_block_threads(block);
    let (gpu, gst) = run_search(&s, &graph, base.view(), queries.view(), metric, k, &p).unwrap();
    check_results("ggnn_gpu", &gpu, base.view(), queries.view(), metric);
    let mut differing = 0;
    for q in 0..queries.rows() {
        let (ci, cd) = (cpu.row_ids(q), cpu.row_dists(q));
        let (gi, gd) = (gpu.row_ids(q), gpu.row_dists(q));
        let same = cd == gd && (0..k).all(|j| ci[j] == gi[j] || is_tied(cd, j));
        if !same {
            differing += 1;
        }
    }
    prop_assert!(
        differing * 25 <= queries.rows(),
        "{differing} of {} queries differ ({:?}, {metric:?}, tau {tau}, best {best}, iterations \
         {iters}, entries {entries:?}, block {block}); CPU {cst:?}, GPU {gst:?}",
        queries.rows(),
        T::DTYPE
    );
    let truth = ground_truth(base.view(), queries.view(), metric, k).unwrap();
    let (rc, rg) = (recall_at_k(&cpu, &truth, k), recall_at_k(&gpu, &truth, k));
    prop_assert!(rg >= rc - 0.02, "GPU recall {rg} < CPU {rc}");
    // Same expansions: the hop counts agree but for the tie-reordered queries.
    let (hc, hg) = (cst.hops as f64, gst.hops as f64);
    prop_assert!(
        (hc - hg).abs() <= 0.05 * hc + 2.0,
        "expansions CPU {hc} vs GPU {hg}"
    );
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: gpu_cases(8), ..ProptestConfig::default() })]

    /// The oracle of the module documentation, for every element type, every entry kind (the
    /// graph's entry point, the CPU's seeded random points, or points spread over the data),
    /// every block size, and the two metrics whose distances are exact on integer data (squared
    /// L2, with its squared slack, and inner product, with the linear one).
    #[test]
    fn ggnn_gpu_equals_cpu_when_nothing_is_forgotten(
        n in 150usize..700,
        dim in 4usize..40,
        seed in 0u64..10_000,
        tau in prop::sample::select(vec![0.0f32, 0.2, 0.5, 1.0]),
        best in 10usize..24,
        iters in prop::sample::select(vec![5usize, 30, 400]),
        entries in prop::sample::select(vec![Entries::Graph, Entries::Random, Entries::Spread]),
        dtype in 0usize..4,
        block in prop::sample::select(vec![32usize, 64, 128]),
        metric in prop::sample::select(vec![Metric::L2Squared, Metric::InnerProduct]),
    ) {
        let Some(ctx) = gpu_or_skip("ggnn_gpu_equals_cpu_when_nothing_is_forgotten") else {
            return Ok(());
        };
        // The merge holds best + queue + candidates <= 8 x block entries.
        let n = n.min(8 * block - best - 32);
        let m = metric;
        match dtype {
            0 => oracle_case::<f32>(&ctx, n, dim, seed, tau, best, iters, entries, block, m)?,
            1 => oracle_case::<f16>(&ctx, n, dim, seed, tau, best, iters, entries, block, m)?,
            2 => oracle_case::<u8>(&ctx, n, dim, seed, tau, best, iters, entries, block, m)?,
            _ => oracle_case::<i8>(&ctx, n, dim, seed, tau, best, iters, entries, block, m)?,
        }
    }

    /// With bounded lists and a small visited ring (the table is reset every few rows), any
    /// metric: results are sorted, distinct and carry their distances, and recall@10 stays
    /// within 0.05 of the CPU search's.
    #[test]
    fn ggnn_gpu_recall_tracks_cpu(
        n in 300usize..2000,
        dim in 2usize..48,
        clusters in 1usize..6,
        metric_i in 0usize..3,
        tau in 0.0f32..1.2,
        beam_width in 8usize..64,
        visited in prop::sample::select(vec![0usize, 16, 64, 384]),
        iters in 20usize..400,
        seed in 0u64..1000,
    ) {
        let Some(ctx) = gpu_or_skip("ggnn_gpu_recall_tracks_cpu") else {
            return Ok(());
        };
        let metric = [Metric::L2Squared, Metric::InnerProduct, Metric::Cosine][metric_i];
        let (base, queries) = gaussian_mixture::<f32>(n, 50, dim, clusters, seed);
        let graph = known_good_graph(base.view(), metric, seed);
        let p = GgnnSearchParams { beam_width, seed, tuning: GgnnSearchTuning { tau, visited, max_iterations: iters, ..Default::default() }, ..Default::default() };
        let k = 10;
        let truth = ground_truth(base.view(), queries.view(), metric, k).unwrap();
        let (cpu, _) = run_search(&GgnnSearch, &graph, base.view(), queries.view(), metric, k, &p).unwrap();
        let s = GgnnSearchGpu::new(&ctx);
        let (gpu, st) = run_search(&s, &graph, base.view(), queries.view(), metric, k, &p).unwrap();
        check_results("ggnn_gpu", &gpu, base.view(), queries.view(), metric);
        prop_assert_eq!(st.queries, 50);
        let (rc, rg) = (recall_at_k(&cpu, &truth, k), recall_at_k(&gpu, &truth, k));
        prop_assert!(rg >= rc - 0.05, "GPU recall {} < CPU {} ({:?})", rg, rc, metric);
    }

    /// Malformed rows (repeated ids, self-loops, ids past n, ids after padding) and repeated
    /// entry points: never a duplicate in the results.
    #[test]
    fn ggnn_gpu_never_returns_duplicates(
        n in 40usize..400,
        degree in 1usize..40,
        tau in 0.0f32..2.0,
        visited in prop::sample::select(vec![0usize, 8, 64]),
        beam_width in 1usize..40,
        k in 1usize..12,
        seed in 0u64..1000,
    ) {
        let Some(ctx) = gpu_or_skip("ggnn_gpu_never_returns_duplicates") else {
            return Ok(());
        };
        let k = k.min(n);
        let (base, queries) = gaussian_mixture::<f32>(n, 20, 6, 3, seed);
        let ids: Vec<NodeId> = (0..n * degree)
            .map(|i| {
                let r = weft_core::rng::hash3(seed, i as u64, 5);
                match r % 10 {
                    0 => INVALID,
                    1 => (i / degree) as NodeId,                 // self-loop
                    2 => (n + (r as usize >> 8) % 5) as NodeId, // out of range
                    3 => 0,                                      // repeated everywhere
                    _ => weft_core::rng::below(r, n as u64) as NodeId,
                }
            })
            .collect();
        let entries: Vec<NodeId> = (0..12).map(|j| (j * 7 % n) as NodeId).chain([0, 0]).collect();
        let graph = FixedDegreeGraph::new(n, degree, ids).unwrap().with_entry_points(entries);
        let p = GgnnSearchParams { beam_width, tuning: GgnnSearchTuning { tau, visited, max_iterations: 200, best: k }, ..Default::default() };
        let s = GgnnSearchGpu::new(&ctx);
        let (gpu, _) = run_search(&s, &graph, base.view(), queries.view(), Metric::L2Squared, k, &p).unwrap();
        check_results("ggnn_gpu", &gpu, base.view(), queries.view(), Metric::L2Squared);
        // The CPU search on the same malformed graph: its results are duplicate-free too, and
        // the GPU's reach is not worse.
        let (cpu, _) = run_search(&GgnnSearch, &graph, base.view(), queries.view(), Metric::L2Squared, k, &p).unwrap();
        let truth = ground_truth(base.view(), queries.view(), Metric::L2Squared, k).unwrap();
        let (rc, rg) = (recall_at_k(&cpu, &truth, k), recall_at_k(&gpu, &truth, k));
        prop_assert!(rg >= rc - 0.1, "GPU recall {} < CPU {}", rg, rc);
    }
}

#[test]
fn ggnn_gpu_searches_a_hierarchy_from_its_top_layer() {
    let Some(ctx) = gpu_or_skip("ggnn_gpu_searches_a_hierarchy_from_its_top_layer") else {
        return;
    };
    let common::TwoLayers {
        base,
        queries,
        top_ids,
        hier: h,
    } = two_layer_hierarchy();
    // Layer 0 alone, entered from the same points.
    let flat = h.base().clone().with_entry_points(top_ids);
    let p = GgnnSearchParams {
        tuning: GgnnSearchTuning {
            tau: 1.0,
            ..Default::default()
        },
        ..Default::default()
    };
    let s = GgnnSearchGpu::new(&ctx);
    let (a, _) = run_search(
        &s,
        &h,
        base.view(),
        queries.view(),
        Metric::L2Squared,
        10,
        &p,
    )
    .unwrap();
    let (b, _) = run_search(
        &s,
        &flat,
        base.view(),
        queries.view(),
        Metric::L2Squared,
        10,
        &p,
    )
    .unwrap();
    assert_eq!(a.ids, b.ids);
    let truth = ground_truth(base.view(), queries.view(), Metric::L2Squared, 10).unwrap();
    let r = recall_at_k(&a, &truth, 10);
    assert!(r >= 0.99, "recall {r}");
}

/// A graph without entry points over strongly clustered data (the exact 20-NN graph of 40
/// well-separated Gaussian clusters, one component per cluster): the GPU search starts from the
/// same spread points as the CPU search (picked on the host once per call) and reaches
/// recall@10 >= 0.99; a query's result does not depend on its batch.
#[test]
fn ggnn_gpu_enters_a_clustered_graph_without_entry_points_at_spread_points() {
    let Some(ctx) =
        gpu_or_skip("ggnn_gpu_enters_a_clustered_graph_without_entry_points_at_spread_points")
    else {
        return;
    };
    let (base, queries) = gaussian_mixture::<f32>(5000, 200, 32, 40, 41);
    let metric = Metric::L2Squared;
    let knn =
        weft_exact::exact_knn_graph(base.view(), metric, 20, &weft_core::BuildCtx::new(0)).unwrap();
    let g = knn.to_fixed_degree(20).unwrap();
    let truth = ground_truth(base.view(), queries.view(), metric, 10).unwrap();
    let s = GgnnSearchGpu::new(&ctx);
    let p = GgnnSearchParams::default();
    let (gpu, _) = run_search(&s, &g, base.view(), queries.view(), metric, 10, &p).unwrap();
    let (cpu, _) =
        run_search(&GgnnSearch, &g, base.view(), queries.view(), metric, 10, &p).unwrap();
    let (rg, rc) = (recall_at_k(&gpu, &truth, 10), recall_at_k(&cpu, &truth, 10));
    let random = GgnnSearchParams {
        entry_points: 0,
        ..Default::default()
    };
    let (gr, _) = run_search(&s, &g, base.view(), queries.view(), metric, 10, &random).unwrap();
    let rr = recall_at_k(&gr, &truth, 10);
    println!("clustered graph without entry points: GPU {rg:.4}, CPU {rc:.4}, GPU random {rr:.4}");
    assert!(rg >= 0.99, "GPU recall@10 {rg}");
    assert!(rg >= rc - 0.01, "GPU {rg} vs CPU {rc}");
    let part = queries.view().slice_rows(50..80).unwrap();
    let (out, _) = run_search(&s, &g, base.view(), part, metric, 10, &p).unwrap();
    for q in 0..30 {
        assert_eq!(out.row_ids(q), gpu.row_ids(50 + q), "query {}", 50 + q);
    }
}

#[test]
fn ggnn_gpu_device_path_is_batch_independent_and_reuses_buffers() {
    let Some(ctx) = gpu_or_skip("ggnn_gpu_device_path_is_batch_independent_and_reuses_buffers")
    else {
        return;
    };
    let (base, queries) = gaussian_mixture::<f32>(3000, 64, 24, 5, 11);
    let graph = known_good_graph(base.view(), Metric::L2Squared, 11);
    let entries = graph.entry_points().to_vec();
    let d = DeviceMatrix::upload(&ctx, base.view()).unwrap();
    let q = DeviceMatrix::upload(&ctx, queries.view()).unwrap();
    let g = DeviceFixedGraph::upload(&ctx, &graph).unwrap();
    let dev = GgnnSearchDevice::new(&ctx);
    let cfg = GgnnSearchParams {
        tuning: GgnnSearchTuning {
            tau: 0.6,
            ..Default::default()
        },
        ..Default::default()
    };
    let opts = GgnnGpuOptions::default();
    let mut bufs = GgnnSearchBuffers::new();
    let run = |bufs: &mut GgnnSearchBuffers, opts: &GgnnGpuOptions| {
        let mut out = Neighbors::new(q.rows(), 10);
        let inputs = DeviceSearchInputs {
            data: &d,
            graph: &g,
            entries: &entries,
            queries: &q,
        };
        let st = dev
            .search_device_with(bufs, inputs, Metric::L2Squared, &cfg, opts, out.as_mut())
            .unwrap();
        (out, st)
    };
    let (all, st) = run(&mut bufs, &opts);
    assert_eq!(st.queries, 64);
    assert!(st.hops > 0 && st.distance_computations >= st.hops);
    let allocs = bufs.allocations();
    let (again, _) = run(&mut bufs, &opts);
    assert_eq!(all.ids, again.ids);
    assert_eq!(all.dists, again.dists);
    assert_eq!(
        bufs.allocations(),
        allocs,
        "a steady state allocates nothing"
    );
    // The L2 prefetch of candidate rows changes nothing but timing.
    let no_prefetch = GgnnGpuOptions {
        prefetch_rows: false,
        ..opts
    };
    let (plain, _) = run(&mut bufs, &no_prefetch);
    assert_eq!(plain.ids, all.ids);
    assert_eq!(plain.dists, all.dists);
    for i in [0usize, 17, 63] {
        let one = DeviceMatrix::upload(&ctx, queries.view().slice_rows(i..i + 1).unwrap()).unwrap();
        let inputs = DeviceSearchInputs {
            data: &d,
            graph: &g,
            entries: &entries,
            queries: &one,
        };
        let (r, _) = dev
            .search_device(inputs, Metric::L2Squared, 10, &cfg, &opts)
            .unwrap();
        assert_eq!(r.row_ids(0), all.row_ids(i), "query {i}");
    }
    // The host path gives the device path's answer.
    let (h, _) = dev
        .search(
            SearchInputs {
                graph: &graph,
                data: base.view(),
                queries: queries.view(),
            },
            &entries,
            Metric::L2Squared,
            10,
            &cfg,
            &opts,
        )
        .unwrap();
    assert_eq!(h.ids, all.ids);
}

#[test]
fn ggnn_gpu_rejects_bad_input_with_typed_errors() {
    let Some(ctx) = gpu_or_skip("ggnn_gpu_rejects_bad_input_with_typed_errors") else {
        return;
    };
    let (base, queries) = gaussian_mixture::<f32>(300, 5, 8, 3, 4);
    let graph = known_good_graph(base.view(), Metric::L2Squared, 4);
    let p = GgnnSearchParams::default();
    let s = GgnnSearchGpu::new(&ctx);
    let l2 = Metric::L2Squared;
    let invalid = |r: weft_core::Result<(Neighbors, weft_core::SearchStats)>, what: &str| match r {
        Err(Error::InvalidParams { .. }) => {}
        other => panic!(
            "{what}: expected InvalidParams, got {:?}",
            other.map(|x| x.1)
        ),
    };
    // GPU knobs.
    for (block, team) in [(48, 0), (32, 3), (32, 64), (256, 0)] {
        let s = GgnnSearchGpu::new(&ctx)
            .with_block_threads(block)
            .with_team_size(team);
        invalid(
            run_search(&s, &graph, base.view(), queries.view(), l2, 10, &p),
            &format!("block {block} team {team}"),
        );
    }
    // k out of range.
    invalid(
        run_search(&s, &graph, base.view(), queries.view(), l2, 301, &p),
        "k > n",
    );
    // Dimension mismatch.
    let (_, q4) = gaussian_mixture::<f32>(1, 5, 4, 2, 4);
    assert!(matches!(
        run_search(&s, &graph, base.view(), q4.view(), l2, 10, &p),
        Err(Error::DimensionMismatch { .. })
    ));
    // NaN and infinity.
    let mut bad = queries.clone();
    bad.as_mut_slice()[3] = f32::NAN;
    assert!(matches!(
        run_search(&s, &graph, base.view(), bad.view(), l2, 10, &p),
        Err(Error::NonFinite { .. })
    ));
    let mut badb = base.clone();
    badb.as_mut_slice()[7] = f32::INFINITY;
    assert!(matches!(
        run_search(&s, &graph, badb.view(), queries.view(), l2, 10, &p),
        Err(Error::NonFinite { .. })
    ));
    // Empty base set.
    let empty = Dataset::<f32>::from_vec(Vec::new(), 0, 8).unwrap();
    let g0 = FixedDegreeGraph::new(0, 4, Vec::new()).unwrap();
    assert!(run_search(&s, &g0, empty.view(), queries.view(), l2, 1, &p).is_err());
    // Graph and data disagree; entry point out of range.
    let small = FixedDegreeGraph::new(10, 1, vec![INVALID; 10]).unwrap();
    assert!(matches!(
        run_search(&s, &small, base.view(), queries.view(), l2, 10, &p),
        Err(Error::DimensionMismatch { .. })
    ));
    let far = graph.clone().with_entry_points(vec![300]);
    assert!(matches!(
        run_search(&s, &far, base.view(), queries.view(), l2, 10, &p),
        Err(Error::InvalidGraph(_))
    ));
    // Out of device memory: a budget too small for the upload.
    assert!(matches!(
        GgnnSearchDevice::new(&ctx).with_budget(1000).search(
            SearchInputs {
                graph: &graph,
                data: base.view(),
                queries: queries.view(),
            },
            graph.entry_points(),
            l2,
            10,
            &GgnnSearchParams::default(),
            &GgnnGpuOptions::default(),
        ),
        Err(Error::OutOfDeviceMemory { .. })
    ));
    // No queries: nothing to do.
    let none = Dataset::<f32>::from_vec(Vec::new(), 0, 8).unwrap();
    let (r, st) = run_search(&s, &graph, base.view(), none.view(), l2, 10, &p).unwrap();
    assert_eq!((r.rows(), st.queries), (0, 0));
}
