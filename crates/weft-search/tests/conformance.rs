//! weft-search against the Searcher conformance suite, plus BeamSearch's own options.

use weft_core::{
    BuildCtx, Error, FixedDegreeGraph, GraphView, INVALID, Metric, Neighbors, NoParams, Searcher,
};
mod common;

use common::search;
use weft_exact::ExactSearcher;
use weft_search::{BeamSearch, BeamSearchParams, BeamSearchTuning, EntryPoints, medoid};
use weft_testkit::graph::{gaussian_mixture, ground_truth, recall_at_k};
use weft_testkit::search::{SearchSuite, check_searcher, known_good_graph, run_search_suite};

#[test]
fn beam_search_passes_the_suite() {
    let mut suite = SearchSuite::new(BeamSearchParams::with_beam_width(24), 0.9);
    suite.invalid_params = vec![
        BeamSearchParams::with_beam_width(0),
        BeamSearchParams::with_beam_width(5), // below k = 10
        BeamSearchParams {
            entry_points: EntryPoints::Random { count: 0 },
            ..Default::default()
        },
        BeamSearchParams {
            entry_points: EntryPoints::Fixed { ids: vec![] },
            ..Default::default()
        },
        BeamSearchParams {
            entry_points: EntryPoints::Fixed {
                ids: vec![1_000_000],
            },
            ..Default::default()
        },
        BeamSearchParams {
            tuning: BeamSearchTuning {
                max_hops: Some(0),
                ..Default::default()
            },
            ..Default::default()
        },
    ];
    let report = run_search_suite(&BeamSearch, &suite);
    println!("{report}");
}

#[test]
fn exact_searcher_passes_the_suite() {
    let report = check_searcher(&ExactSearcher, NoParams {}, 0.999);
    println!("{report}");
    assert!(report.cases.iter().all(|c| c.recall >= 0.999));
}

/// A 2000-point f32 set in 16-d, its known-good graph, queries and the exact answer.
fn fixture() -> (
    weft_core::Dataset<f32>,
    weft_core::Dataset<f32>,
    FixedDegreeGraph,
    Neighbors,
) {
    let (base, queries) = gaussian_mixture::<f32>(2000, 50, 16, 8, 5);
    let graph = known_good_graph(base.view(), Metric::L2Squared, 5);
    let truth = ground_truth(base.view(), queries.view(), Metric::L2Squared, 10).unwrap();
    (base, queries, graph, truth)
}

#[test]
fn entry_point_choices_all_work_and_random_ones_are_seeded() {
    let (base, queries, graph, truth) = fixture();
    let bare = FixedDegreeGraph::new(graph.n(), graph.degree(), graph.ids().to_vec()).unwrap();
    assert!(bare.entry_points().is_empty());
    let m = medoid(base.view(), 500, 3).unwrap();
    for (g, entry) in [
        (&graph, EntryPoints::Graph),
        (&bare, EntryPoints::Graph),
        (&bare, EntryPoints::Random { count: 8 }),
        (&bare, EntryPoints::Fixed { ids: vec![m, 0, m] }),
    ] {
        let params = BeamSearchParams {
            entry_points: entry.clone(),
            seed: 11,
            ..BeamSearchParams::with_beam_width(64)
        };
        let (a, stats) = search(g, &base, &queries, &params, 10);
        assert_eq!(stats.queries, queries.rows() as u64);
        assert!(stats.hops > 0 && stats.distance_computations >= stats.hops);
        let r = recall_at_k(&a, &truth, 10);
        assert!(r >= 0.95, "{entry:?}: recall {r}");
        let (b, _) = search(g, &base, &queries, &params, 10);
        assert_eq!(a, b, "{entry:?}: not repeatable");
    }
}

#[test]
fn larger_beams_do_not_lose_recall_and_budgets_cut_work() {
    let (base, queries, graph, truth) = fixture();
    let mut last = 0.0;
    for l in [10, 20, 40, 80] {
        let (out, _) = search(
            &graph,
            &base,
            &queries,
            &BeamSearchParams::with_beam_width(l),
            10,
        );
        let r = recall_at_k(&out, &truth, 10);
        assert!(r + 0.02 >= last, "L = {l}: recall {r} after {last}");
        last = r;
    }
    let (_, full) = search(
        &graph,
        &base,
        &queries,
        &BeamSearchParams::with_beam_width(64),
        10,
    );
    for params in [
        BeamSearchParams {
            tuning: BeamSearchTuning {
                max_hops: Some(3),
                ..Default::default()
            },
            ..BeamSearchParams::with_beam_width(64)
        },
        BeamSearchParams {
            tuning: BeamSearchTuning {
                max_distance_computations: Some(40),
                ..Default::default()
            },
            ..BeamSearchParams::with_beam_width(64)
        },
    ] {
        let (out, stats) = search(&graph, &base, &queries, &params, 10);
        assert!(stats.distance_computations < full.distance_computations);
        if let Some(h) = params.tuning.max_hops {
            assert!(stats.hops <= (h * queries.rows()) as u64);
        }
        if let Some(b) = params.tuning.max_distance_computations {
            assert!(stats.distance_computations <= (b * queries.rows()) as u64);
        }
        // Still sorted, unique, in range.
        for q in 0..out.rows() {
            let ids = out.row_ids(q);
            let d = out.row_dists(q);
            assert!(d.windows(2).all(|w| w[0] <= w[1]));
            let valid: Vec<_> = ids.iter().filter(|&&i| i != INVALID).collect();
            assert!(valid.iter().all(|&&i| (i as usize) < base.rows()));
        }
    }
}

#[test]
fn disconnected_graphs_pad_short_answers() {
    // No edges at all: only the entry point is reachable.
    let (base, queries, _, _) = fixture();
    let empty = FixedDegreeGraph::new(base.rows(), 4, vec![INVALID; base.rows() * 4])
        .unwrap()
        .with_entry_points(vec![7]);
    let (out, stats) = search(
        &empty,
        &base,
        &queries,
        &BeamSearchParams::with_beam_width(16),
        10,
    );
    assert_eq!(stats.distance_computations, queries.rows() as u64);
    for q in 0..out.rows() {
        assert_eq!(out.row_ids(q)[0], 7);
        assert!(out.row_ids(q)[1..].iter().all(|&i| i == INVALID));
        assert!(out.row_dists(q)[1..].iter().all(|d| d.is_infinite()));
    }
}

#[test]
fn bad_graphs_are_rejected() {
    let (base, queries, graph, _) = fixture();
    let wrong_n = FixedDegreeGraph::new(10, 2, vec![INVALID; 20]).unwrap();
    let mut out = Neighbors::new(queries.rows(), 10);
    let r = BeamSearch.search(
        &wrong_n,
        base.view(),
        queries.view(),
        Metric::L2Squared,
        &BeamSearchParams::default(),
        out.as_mut(),
    );
    assert!(matches!(r, Err(Error::DimensionMismatch { .. })));
    let bad_entry = graph.clone().with_entry_points(vec![u32::MAX - 1]);
    let r = BeamSearch.search(
        &bad_entry,
        base.view(),
        queries.view(),
        Metric::L2Squared,
        &BeamSearchParams::default(),
        out.as_mut(),
    );
    assert!(matches!(r, Err(Error::InvalidGraph(_))));
}

#[test]
fn thread_count_does_not_change_results() {
    let (base, queries, graph, _) = fixture();
    let params = BeamSearchParams {
        entry_points: EntryPoints::Random { count: 4 },
        ..BeamSearchParams::with_beam_width(32)
    };
    let run = |threads| {
        BuildCtx::new(0)
            .with_threads(Some(threads))
            .install(|| search(&graph, &base, &queries, &params, 10))
            .unwrap()
    };
    let (a, sa) = run(1);
    let (b, sb) = run(2);
    assert_eq!(a, b);
    assert_eq!(sa, sb);
}

/// The beam search's knobs sit beside its other fields in JSON (flattened), the former `l` and
/// `entry_layer: null` (no layer) still read, and every field round-trips.
#[test]
fn beam_params_read_and_write_flat_json() {
    let p: BeamSearchParams = serde_json::from_str(
        r#"{"l": 32, "max_hops": 5, "max_distance_computations": 900, "entry_layer": null}"#,
    )
    .unwrap();
    assert_eq!(p.beam_width, 32);
    assert_eq!(
        p.tuning,
        BeamSearchTuning {
            max_hops: Some(5),
            max_distance_computations: Some(900),
            entry_layer: weft_search::EntryLayerParams::disabled(),
        }
    );
    let defaults: BeamSearchParams = serde_json::from_str("{}").unwrap();
    assert_eq!(defaults, BeamSearchParams::default());
    let layer: BeamSearchParams =
        serde_json::from_str(r#"{"entry_layer": {"degree": 4}}"#).unwrap();
    assert!(layer.tuning.entry_layer.enabled);
    assert_eq!(layer.tuning.entry_layer.degree, 4);
    let text = serde_json::to_string(&p).unwrap();
    assert!(text.contains(r#""max_hops":5"#), "{text}");
    assert_eq!(serde_json::from_str::<BeamSearchParams>(&text).unwrap(), p);
}
