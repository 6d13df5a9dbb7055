//! The GPU CAGRA-style search (`CagraSearchGpu`): the searcher suite (every dtype and metric, bad
//! inputs), an oracle test against the CPU beam search on fresh random sets, batch-size
//! independence, filters at 90% and 99%, k up to 1024, and single vs multi CTA. Every test skips
//! visibly without a GPU and fails with WEFT_REQUIRE_GPU=1.
#![cfg(feature = "cuda")]

use proptest::prelude::*;
use weft_core::{Error, FixedDegreeGraph, INVALID, Metric, Neighbors, Searcher};
use weft_gpu::GpuContext;
use weft_gpu::testing::gpu_or_skip;
use weft_search::{
    BeamSearch, BeamSearchParams, CagraSearchGpu, CagraSearchMode, CagraSearchParams,
    CagraSearchTuning,
};
use weft_testkit::gpu_cases;
use weft_testkit::graph::{gaussian_mixture, ground_truth, recall_at_k};
use weft_testkit::search::{
    SearchSuite, check_result_rows, known_good_graph, run_search, run_search_suite,
};

/// How much lower than the CPU beam search's recall the GPU search's may be at the same list
/// size: the GPU search stops after an iteration cap and starts from random points as well as
/// the entry point, so on small sets it can differ by a query or two.
const RECALL_TOLERANCE: f64 = 0.02;

fn single(beam_width: usize) -> CagraSearchParams {
    CagraSearchParams {
        tuning: CagraSearchTuning {
            mode: CagraSearchMode::SingleCta,
            ..Default::default()
        },
        ..CagraSearchParams::with_beam_width(beam_width)
    }
}

fn multi(beam_width: usize) -> CagraSearchParams {
    CagraSearchParams {
        tuning: CagraSearchTuning {
            mode: CagraSearchMode::MultiCta,
            ..Default::default()
        },
        ..CagraSearchParams::with_beam_width(beam_width)
    }
}

fn search(
    ctx: &GpuContext,
    graph: &FixedDegreeGraph,
    base: &weft_core::Dataset<f32>,
    queries: &weft_core::Dataset<f32>,
    metric: Metric,
    k: usize,
    params: &CagraSearchParams,
) -> Neighbors {
    run_search(
        &CagraSearchGpu::new(ctx),
        graph,
        base.view(),
        queries.view(),
        metric,
        k,
        params,
    )
    .unwrap()
    .0
}

#[test]
fn gpu_cagra_search_passes_the_suite() {
    let Some(ctx) = gpu_or_skip("gpu_cagra_search_passes_the_suite") else {
        return;
    };
    for params in [single(32), multi(32)] {
        let mut suite = SearchSuite::new(params.clone(), 0.9);
        suite.invalid_params = vec![
            CagraSearchParams::with_beam_width(0),
            CagraSearchParams::with_beam_width(5), // below k = 10
            CagraSearchParams::with_beam_width(2048),
            CagraSearchParams {
                tuning: CagraSearchTuning {
                    search_width: 0,
                    ..Default::default()
                },
                ..Default::default()
            },
            CagraSearchParams {
                tuning: CagraSearchTuning {
                    team_size: 3,
                    ..Default::default()
                },
                ..Default::default()
            },
            CagraSearchParams {
                tuning: CagraSearchTuning {
                    max_iterations: 4,
                    min_iterations: 5,
                    ..Default::default()
                },
                ..Default::default()
            },
            CagraSearchParams {
                filter: Some(vec![u32::MAX]),
                ..Default::default()
            },
        ];
        let report = run_search_suite(&CagraSearchGpu::new(&ctx), &suite);
        println!("{params:?}\n{report}");
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: gpu_cases(8), ..ProptestConfig::default() })]

    /// On fresh random sets, the GPU search's recall@10 is at least the CPU beam search's at
    /// the same list size, minus RECALL_TOLERANCE; rows are sorted, distinct and valid.
    #[test]
    fn gpu_cagra_search_matches_beam_search(
        n in 300usize..1500,
        dim in 2usize..40,
        clusters in 1usize..6,
        metric_i in 0usize..3,
        l in prop::sample::select(vec![16usize, 32, 64]),
        width in 1usize..3,
        seed in 0u64..1000,
    ) {
        let Some(ctx) = gpu_or_skip("gpu_cagra_search_matches_beam_search") else {
            return Ok(());
        };
        let metric = [Metric::L2Squared, Metric::InnerProduct, Metric::Cosine][metric_i];
        let (base, queries) = gaussian_mixture::<f32>(n, 40, dim, clusters, seed);
        let graph = known_good_graph(base.view(), metric, seed);
        let k = 10;
        let truth = ground_truth(base.view(), queries.view(), metric, k).unwrap();
        let mut cpu = Neighbors::new(queries.rows(), k);
        BeamSearch
            .search(&graph, base.view(), queries.view(), metric, &BeamSearchParams::with_beam_width(l), cpu.as_mut())
            .unwrap();
        let base_params = single(l);
        let params = CagraSearchParams { seed, tuning: CagraSearchTuning { search_width: width, ..base_params.tuning.clone() }, ..base_params };
        let gpu = search(&ctx, &graph, &base, &queries, metric, k, &params);
        check_result_rows("cagra_gpu", &gpu, n);
        let (rc, rg) = (recall_at_k(&cpu, &truth, k), recall_at_k(&gpu, &truth, k));
        prop_assert!(rg >= rc - RECALL_TOLERANCE, "GPU recall {rg} < CPU beam {rc} (L = {l}, {metric:?})");
        let gpu_multi = search(&ctx, &graph, &base, &queries, metric, k, &CagraSearchParams { seed, ..multi(l) });
        check_result_rows("cagra_gpu", &gpu_multi, n);
        let rm = recall_at_k(&gpu_multi, &truth, k);
        prop_assert!(rm >= rc - RECALL_TOLERANCE, "multi-CTA recall {rm} < CPU beam {rc} (L = {l}, {metric:?})");
    }
}

#[test]
fn gpu_cagra_search_is_batch_size_independent() {
    let Some(ctx) = gpu_or_skip("gpu_cagra_search_is_batch_size_independent") else {
        return;
    };
    let (base, queries) = gaussian_mixture::<f32>(3000, 64, 24, 5, 11);
    let graph = known_good_graph(base.view(), Metric::L2Squared, 11);
    let params = CagraSearchParams {
        seed: 7,
        ..single(48)
    };
    let all = search(
        &ctx,
        &graph,
        &base,
        &queries,
        Metric::L2Squared,
        10,
        &params,
    );
    check_result_rows("cagra_gpu", &all, 3000);
    for q in 0..queries.rows() {
        let one = weft_core::Dataset::from_vec(queries.view().row(q).to_vec(), 1, 24).unwrap();
        let r = search(&ctx, &graph, &base, &one, Metric::L2Squared, 10, &params);
        assert_eq!(r.row_ids(0), all.row_ids(q), "query {q}");
        assert_eq!(r.row_dists(0), all.row_dists(q), "query {q}");
    }
    // And the same call twice gives the same answer.
    assert_eq!(
        all.ids,
        search(
            &ctx,
            &graph,
            &base,
            &queries,
            Metric::L2Squared,
            10,
            &params
        )
        .ids
    );
}

#[test]
fn gpu_cagra_filtered_search_never_returns_filtered_ids() {
    let Some(ctx) = gpu_or_skip("gpu_cagra_filtered_search_never_returns_filtered_ids") else {
        return;
    };
    let n = 5000;
    let (base, queries) = gaussian_mixture::<f32>(n, 100, 16, 4, 21);
    let graph = known_good_graph(base.view(), Metric::L2Squared, 21);
    // The list must hold enough points to reach k allowed ones: beam_width 128 at 90%, 512 at 99%.
    for (rate, keep_every, beam_width, min_recall) in
        [(0.9, 10usize, 128, 0.9), (0.99, 100, 512, 0.7)]
    {
        let allowed =
            |i: usize| weft_core::rng::hash3(5, i as u64, 0).is_multiple_of(keep_every as u64);
        let filter = CagraSearchParams::filter_from(n, allowed);
        let ids: Vec<usize> = (0..n).filter(|&i| allowed(i)).collect();
        // Exact answer over the allowed points only.
        let sub: Vec<f32> = ids
            .iter()
            .flat_map(|&i| base.view().row(i).to_vec())
            .collect();
        let sub = weft_core::Dataset::from_vec(sub, ids.len(), 16).unwrap();
        let k = 10.min(ids.len());
        let mut truth = ground_truth(sub.view(), queries.view(), Metric::L2Squared, k).unwrap();
        for x in truth.ids.iter_mut() {
            *x = ids[*x as usize] as u32;
        }
        for params in [single(beam_width), multi(beam_width)] {
            let params = CagraSearchParams {
                filter: Some(filter.clone()),
                tuning: CagraSearchTuning {
                    min_iterations: 64,
                    ..params.tuning.clone()
                },
                ..params
            };
            let found = search(&ctx, &graph, &base, &queries, Metric::L2Squared, k, &params);
            check_result_rows("cagra_gpu", &found, n);
            for &id in found.ids.iter().filter(|&&i| i != INVALID) {
                assert!(
                    allowed(id as usize),
                    "filtered-out id {id} returned ({rate} filtered)"
                );
            }
            let r = recall_at_k(&found, &truth, k);
            println!("filter {rate}: {:?} recall@{k} {r:.3}", params.tuning.mode);
            assert!(
                r >= min_recall,
                "recall {r} at {rate} filtered ({:?})",
                params.tuning.mode
            );
        }
    }
}

#[test]
fn gpu_cagra_search_k_up_to_1024_in_both_modes() {
    let Some(ctx) = gpu_or_skip("gpu_cagra_search_k_up_to_1024_in_both_modes") else {
        return;
    };
    let (base, queries) = gaussian_mixture::<f32>(4000, 8, 12, 3, 31);
    let graph = known_good_graph(base.view(), Metric::L2Squared, 31);
    for k in [100, 1024] {
        let truth = ground_truth(base.view(), queries.view(), Metric::L2Squared, k).unwrap();
        for params in [single(1024), multi(1024)] {
            let found = search(&ctx, &graph, &base, &queries, Metric::L2Squared, k, &params);
            check_result_rows("cagra_gpu", &found, 4000);
            let r = recall_at_k(&found, &truth, k);
            println!("k = {k} {:?}: recall {r:.3}", params.tuning.mode);
            assert!(r >= 0.9, "k = {k} {:?}: recall {r}", params.tuning.mode);
        }
    }
}

#[test]
fn gpu_cagra_search_f16_and_every_metric() {
    let Some(ctx) = gpu_or_skip("gpu_cagra_search_f16_and_every_metric") else {
        return;
    };
    for metric in [Metric::L2Squared, Metric::InnerProduct, Metric::Cosine] {
        let (base, queries) = gaussian_mixture::<half::f16>(2000, 50, 40, 4, 41);
        let graph = known_good_graph(base.view(), metric, 41);
        let truth = ground_truth(base.view(), queries.view(), metric, 10).unwrap();
        for params in [single(64), multi(64)] {
            let (out, _) = run_search(
                &CagraSearchGpu::new(&ctx),
                &graph,
                base.view(),
                queries.view(),
                metric,
                10,
                &params,
            )
            .unwrap();
            check_result_rows("cagra_gpu", &out, 2000);
            let r = recall_at_k(&out, &truth, 10);
            let min = if metric == Metric::InnerProduct {
                0.45
            } else {
                0.9
            };
            assert!(
                r >= min,
                "f16 {metric:?} {:?}: recall {r}",
                params.tuning.mode
            );
        }
    }
}

#[test]
fn gpu_cagra_search_rejects_bad_params() {
    let Some(ctx) = gpu_or_skip("gpu_cagra_search_rejects_bad_params") else {
        return;
    };
    let (base, queries) = gaussian_mixture::<f32>(500, 4, 8, 2, 51);
    let graph = known_good_graph(base.view(), Metric::L2Squared, 51);
    let bad = [
        CagraSearchParams::with_beam_width(8),
        CagraSearchParams {
            tuning: CagraSearchTuning {
                search_width: 33,
                ..Default::default()
            },
            ..Default::default()
        },
        CagraSearchParams {
            tuning: CagraSearchTuning {
                team_size: 64,
                ..Default::default()
            },
            ..Default::default()
        },
        CagraSearchParams {
            filter: Some(vec![0; 3]),
            ..Default::default()
        },
    ];
    for p in bad {
        let r = run_search(
            &CagraSearchGpu::new(&ctx),
            &graph,
            base.view(),
            queries.view(),
            Metric::L2Squared,
            10,
            &p,
        )
        .map(|(_, stats)| stats);
        assert!(
            matches!(r, Err(Error::InvalidParams { .. })),
            "{p:?}: {r:?}"
        );
    }
}
