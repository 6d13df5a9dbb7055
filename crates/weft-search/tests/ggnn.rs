//! GgnnSearch against the Searcher conformance suite, and its own guarantees.

use proptest::prelude::*;
use weft_core::{Error, FixedDegreeGraph, GraphView, INVALID, Metric, Neighbors, NodeId, Searcher};
use weft_graph::hier::{HierGraph, HierLayer};
use weft_search::{GgnnSearch, GgnnSearchParams};
use weft_testkit::graph::{gaussian_mixture, ground_truth, recall_at_k};
use weft_testkit::search::{SearchSuite, known_good_graph, run_search_suite};

#[test]
fn ggnn_search_passes_the_suite() {
    let mut suite = SearchSuite::new(GgnnSearchParams::default(), 0.9);
    suite.invalid_params = vec![
        GgnnSearchParams {
            tau: -1.0,
            ..Default::default()
        },
        GgnnSearchParams {
            tau: f32::NAN,
            ..Default::default()
        },
        GgnnSearchParams {
            best: 0,
            ..Default::default()
        },
        GgnnSearchParams {
            prioq: 0,
            ..Default::default()
        },
        GgnnSearchParams {
            max_iterations: 0,
            ..Default::default()
        },
        GgnnSearchParams {
            max_nn1: Some(f32::INFINITY),
            ..Default::default()
        },
    ];
    let report = run_search_suite(&GgnnSearch, &suite);
    println!("{report}");
}

#[test]
fn larger_tau_never_lowers_recall_much_and_searches_a_hierarchy() {
    let (base, queries) = gaussian_mixture::<f32>(2000, 100, 16, 8, 21);
    let g = known_good_graph(base.view(), Metric::L2Squared, 5);
    let truth = ground_truth(base.view(), queries.view(), Metric::L2Squared, 10).unwrap();
    // A two-layer hierarchy over the same base: every 10th point on top, entered there.
    let top_ids: Vec<NodeId> = (0..200).map(|i| i * 10).collect();
    let top = HierLayer::new(
        FixedDegreeGraph::new(200, 1, vec![INVALID; 200]).unwrap(),
        top_ids.clone(),
    )
    .unwrap();
    let h = HierGraph::new(g.clone(), vec![top], top_ids.clone()).unwrap();
    assert_eq!(GraphView::entry_points(&h), &top_ids[..]);
    let mut recalls = Vec::new();
    for tau in [0.0f32, 0.5, 1.5] {
        let p = GgnnSearchParams {
            tau,
            ..Default::default()
        };
        let mut out = Neighbors::new(100, 10);
        let stats = GgnnSearch
            .search(
                &h,
                base.view(),
                queries.view(),
                Metric::L2Squared,
                &p,
                out.as_mut(),
            )
            .unwrap();
        assert_eq!(stats.queries, 100);
        recalls.push(recall_at_k(&out, &truth, 10));
    }
    assert!(recalls[2] >= 0.99, "{recalls:?}");
    assert!(recalls[2] + 1e-9 >= recalls[0], "{recalls:?}");
}

#[test]
fn bad_shapes_are_typed_errors() {
    let (base, queries) = gaussian_mixture::<f32>(100, 5, 8, 2, 1);
    let g = known_good_graph(base.view(), Metric::L2Squared, 1);
    let mut out = Neighbors::new(5, 200);
    let r = GgnnSearch.search(
        &g,
        base.view(),
        queries.view(),
        Metric::L2Squared,
        &GgnnSearchParams::default(),
        out.as_mut(),
    );
    assert!(r.is_err());
    let bad = g.clone().with_entry_points(vec![1000]);
    let mut out = Neighbors::new(5, 10);
    let r = GgnnSearch.search(
        &bad,
        base.view(),
        queries.view(),
        Metric::L2Squared,
        &GgnnSearchParams::default(),
        out.as_mut(),
    );
    assert!(matches!(r, Err(Error::InvalidGraph(_))));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// Whatever the graph (random rows with padding, repeats and self-loops) and the bounds,
    /// results hold no duplicate, valid ids come first, distances ascend and match the metric.
    #[test]
    fn never_returns_duplicates(
        n in 12usize..120,
        degree in 1usize..12,
        k in 1usize..12,
        prioq in 1usize..20,
        visited in 0usize..16,
        tau in 0.0f32..2.0,
        seed in any::<u64>(),
        metric in prop::sample::select(Metric::ALL.to_vec()),
    ) {
        let k = k.min(n);
        let mut rng = weft_core::rng::SplitMix64::new(seed);
        let data: Vec<f32> = (0..n * 4).map(|_| (rng.below(5) as f32) - 2.0).collect();
        let queries: Vec<f32> = (0..8 * 4).map(|_| (rng.below(5) as f32) - 2.0).collect();
        let ids: Vec<NodeId> = (0..n * degree)
            .map(|_| match rng.below(8) {
                0 => INVALID,
                _ => rng.below(n as u64) as NodeId,
            })
            .collect();
        // Unvalidated rows on purpose: the search must cope with any ids.
        let g = FixedDegreeGraph::new(n, degree, ids).unwrap().with_entry_points(vec![rng.below(n as u64) as NodeId, 0, 0]);
        let base = weft_core::DatasetView::new(&data, n, 4).unwrap();
        let qv = weft_core::DatasetView::new(&queries, 8, 4).unwrap();
        let p = GgnnSearchParams { tau, prioq, visited, best: 1, ..Default::default() };
        let mut out = Neighbors::new(8, k);
        GgnnSearch.search(&g, base, qv, metric, &p, out.as_mut()).unwrap();
        let dist = metric.distance_fn::<f32>();
        for q in 0..8 {
            let ids = out.row_ids(q);
            let dists = out.row_dists(q);
            let valid: Vec<NodeId> = ids.iter().copied().take_while(|&i| i != INVALID).collect();
            prop_assert!(ids[valid.len()..].iter().all(|&i| i == INVALID));
            let mut sorted = valid.clone();
            sorted.sort_unstable();
            sorted.dedup();
            prop_assert_eq!(sorted.len(), valid.len(), "duplicate in {:?}", ids);
            for j in 0..valid.len() {
                prop_assert!((valid[j] as usize) < n);
                prop_assert_eq!(dists[j], dist.eval(qv.row(q), base.row(valid[j] as usize)));
                if j > 0 {
                    prop_assert!(dists[j - 1] <= dists[j]);
                }
            }
        }
    }
}
