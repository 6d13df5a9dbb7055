//! The filtered GPU GGNN query against the filtered CPU GGNN query and the exact filtered
//! ground truth, on random data with random filters: every returned id is allowed, no
//! duplicates, distances ascending and exact, padding (`INVALID`, `+inf`) only at the end, and
//! recall@k within 0.05 of the CPU search's (and exact for a filter of at most
//! `FILTER_EXACT_PER_L * beam_width` ids). Fewer allowed ids than k, an empty filter and a
//! filter of the wrong length are checked too. Every test skips visibly without a GPU and
//! fails with WEFT_REQUIRE_GPU=1.
#![cfg(feature = "cuda")]

mod common;

use proptest::prelude::*;
use weft_core::Filter;
use weft_core::{Error, INVALID, Metric, Neighbors};
use weft_exact::exact_search_filtered;
use weft_gpu::testing::gpu_or_skip;
use weft_search::{
    FILTER_EXACT_PER_L, GgnnSearch, GgnnSearchGpu, GgnnSearchParams, GgnnSearchTuning,
};
use weft_testkit::gpu_cases;
use weft_testkit::graph::{gaussian_mixture, recall_at_k};
use weft_testkit::search::{check_results, known_good_graph, run_search};

use common::check_filtered;

/// A seeded random filter allowing about `frac` of `n` ids.
fn random_filter(n: usize, frac: f64, seed: u64) -> Filter {
    Filter::from_predicate(n, |i| {
        (weft_core::rng::hash3(seed, i as u64, 0xf2) % 10_000) as f64 / 10_000.0 < frac
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: gpu_cases(12), ..ProptestConfig::default() })]

    /// The oracle: random data, metric, filter density, list sizes and block size.
    #[test]
    fn ggnn_gpu_filtered_matches_cpu_and_allows_only_allowed_ids(
        n in 300usize..3000,
        dim in 2usize..48,
        clusters in 1usize..6,
        metric_i in 0usize..3,
        frac in prop::sample::select(vec![0.01f64, 0.1, 0.5, 0.9]),
        k in 1usize..32,
        beam_width in 16usize..96,
        visited in prop::sample::select(vec![0usize, 16, 64, 384]),
        block in prop::sample::select(vec![0usize, 32, 64, 128]),
        seed in 0u64..1000,
    ) {
        let Some(ctx) = gpu_or_skip("ggnn_gpu_filtered_matches_cpu_and_allows_only_allowed_ids") else {
            return Ok(());
        };
        let metric = [Metric::L2Squared, Metric::InnerProduct, Metric::Cosine][metric_i];
        let (base, queries) = gaussian_mixture::<f32>(n, 50, dim, clusters, seed);
        let graph = known_good_graph(base.view(), metric, seed);
        let filter = random_filter(n, frac, seed ^ 3);
        let p = GgnnSearchParams { beam_width, seed, filter: Some(filter.clone()), tuning: GgnnSearchTuning { visited, max_iterations: 400, ..Default::default() }, ..Default::default() };
        let mut truth = Neighbors::new(queries.rows(), k);
        exact_search_filtered(base.view(), queries.view(), metric, &filter, truth.as_mut()).unwrap();
        let (cpu, _) = run_search(&GgnnSearch, &graph, base.view(), queries.view(), metric, k, &p).unwrap();
        let s = GgnnSearchGpu::new(&ctx).with_block_threads(block);
        let (gpu, st) = run_search(&s, &graph, base.view(), queries.view(), metric, k, &p).unwrap();
        prop_assert_eq!(st.queries, 50);
        check_filtered("ggnn_gpu filtered", &gpu, &filter);
        check_filtered("ggnn filtered", &cpu, &filter);
        check_results("ggnn_gpu filtered", &gpu, base.view(), queries.view(), metric);
        let (rc, rg) = (recall_at_k(&cpu, &truth, k), recall_at_k(&gpu, &truth, k));
        prop_assert!(rg >= rc - 0.05, "GPU recall {} < CPU {} ({:?}, {} allowed)", rg, rc, metric, filter.count());
        // A small filter is scored exactly on both (up to distance near-ties on the GPU).
        if filter.count() <= FILTER_EXACT_PER_L * beam_width {
            let best = recall_at_k(&truth, &truth, k);
            prop_assert!(rc == best, "CPU recall {} of {} with {} allowed", rc, best, filter.count());
            prop_assert!(rg >= best - 0.01, "GPU recall {} of {} with {} allowed", rg, best, filter.count());
        }
    }
}

/// A filter with every id allowed gives results at least as good as the unfiltered search (the
/// traversal is the same; the result list keeps the best k scored); fewer allowed ids than k
/// give padding after them; none allowed gives padding only; a wrong length is a typed error.
#[test]
fn ggnn_gpu_filter_edge_cases() {
    let Some(ctx) = gpu_or_skip("ggnn_gpu_filter_edge_cases") else {
        return;
    };
    let n = 2000;
    let (base, queries) = gaussian_mixture::<f32>(n, 40, 16, 3, 5);
    let graph = known_good_graph(base.view(), Metric::L2Squared, 5);
    let s = GgnnSearchGpu::new(&ctx);
    let k = 10;
    let with = |filter: Filter| GgnnSearchParams {
        filter: Some(filter),
        ..Default::default()
    };
    let run = |p: &GgnnSearchParams| {
        run_search(
            &s,
            &graph,
            base.view(),
            queries.view(),
            Metric::L2Squared,
            k,
            p,
        )
    };
    let (plain, _) = run(&GgnnSearchParams::default()).unwrap();
    let all = Filter::all(n);
    let (filtered, _) = run(&with(all.clone())).unwrap();
    let mut truth = Neighbors::new(queries.rows(), k);
    exact_search_filtered(
        base.view(),
        queries.view(),
        Metric::L2Squared,
        &all,
        truth.as_mut(),
    )
    .unwrap();
    assert!(recall_at_k(&filtered, &truth, k) >= recall_at_k(&plain, &truth, k) - 1e-9);

    let few = Filter::from_ids(n, &[3, 1999, 1000]).unwrap();
    let (got, _) = run(&with(few.clone())).unwrap();
    check_filtered("few", &got, &few);
    for q in 0..queries.rows() {
        assert!(got.row_ids(q)[3..].iter().all(|&i| i == INVALID));
    }
    let (got, _) = run(&with(Filter::none(n))).unwrap();
    assert!(got.ids.iter().all(|&i| i == INVALID));
    assert!(got.dists.iter().all(|&d| d == f32::INFINITY));
    assert!(matches!(
        run(&with(Filter::all(n - 1))),
        Err(Error::InvalidParams { name, .. }) if name == "filter"
    ));
}
