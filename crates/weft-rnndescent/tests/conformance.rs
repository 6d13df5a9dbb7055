//! weft-rnndescent against the GraphBuilder conformance suite, and end to end with BeamSearch.

use weft_core::{BuildCtx, GraphBuilder, GraphView, Metric, Neighbors, Searcher};
use weft_rnndescent::{RnnDescentCpu, RnnDescentParams};
use weft_search::{BeamSearch, BeamSearchParams};
use weft_testkit::graph::{
    GraphSuite, gaussian_mixture, ground_truth, recall_at_k, run_graph_suite,
};

#[test]
fn rnndescent_passes_the_suite() {
    let mut suite = GraphSuite::new(RnnDescentParams::default(), 0.93);
    suite.min_recall_ip = 0.7;
    suite.invalid_params = vec![
        RnnDescentParams {
            r: 0,
            ..Default::default()
        },
        RnnDescentParams {
            s: 0,
            ..Default::default()
        },
        RnnDescentParams {
            s: 65,
            ..Default::default()
        },
        RnnDescentParams {
            t1: 0,
            ..Default::default()
        },
        RnnDescentParams {
            t2: 0,
            ..Default::default()
        },
        RnnDescentParams {
            degree: 0,
            ..Default::default()
        },
        RnnDescentParams {
            degree: 65,
            ..Default::default()
        },
        RnnDescentParams {
            rho: 1.5,
            ..Default::default()
        },
        RnnDescentParams {
            fill_fraction: 2.0,
            ..Default::default()
        },
    ];
    let report = run_graph_suite(&RnnDescentCpu, &suite);
    println!("{report}");
}

#[test]
fn reference_variants_build_valid_graphs() {
    // The faithful reference settings (no truncation, R = 96, `<=` pruning, no flags) all work.
    let (base, queries) = gaussian_mixture::<f32>(1200, 50, 16, 8, 3);
    let truth = ground_truth(base.view(), queries.view(), Metric::L2Squared, 10).unwrap();
    for (params, min_recall) in [
        (
            RnnDescentParams {
                r: 96,
                truncate_updates: false,
                t1: 2,
                t2: 6,
                ..Default::default()
            },
            0.9,
        ),
        (
            RnnDescentParams {
                strict_prune: false,
                ..Default::default()
            },
            0.9,
        ),
        (
            RnnDescentParams {
                new_old_flags: false,
                t1: 2,
                t2: 4,
                ..Default::default()
            },
            0.9,
        ),
        // Tiny lists: a valid graph, not expected to search well.
        (
            RnnDescentParams {
                s: 1,
                r: 4,
                degree: 4,
                ..Default::default()
            },
            0.0,
        ),
        // The reference code's export: RNG-kept entries only.
        (
            RnnDescentParams {
                fill_fraction: 0.0,
                ..Default::default()
            },
            0.9,
        ),
    ] {
        let (graph, stats) = RnnDescentCpu
            .build_with_stats(base.view(), Metric::L2Squared, &params, &BuildCtx::new(9))
            .unwrap();
        graph.validate().unwrap();
        assert_eq!(stats.rounds, (params.t1 * params.t2) as u64);
        assert!(stats.distance_computations > 0);
        assert!((0..1200).all(|v| graph.neighbors(v).len() <= params.degree));
        let mut out = Neighbors::new(queries.rows(), 10);
        BeamSearch
            .search(
                &graph,
                base.view(),
                queries.view(),
                Metric::L2Squared,
                &BeamSearchParams::with_beam_width(64),
                out.as_mut(),
            )
            .unwrap();
        let r = recall_at_k(&out, &truth, 10);
        assert!(r >= min_recall, "{params:?}: recall {r}");
    }
}

#[test]
fn builds_end_to_end_with_beam_search_and_rows_are_sorted() {
    let (base, queries) = gaussian_mixture::<f32>(2000, 100, 24, 10, 4);
    let params = RnnDescentParams::default();
    let graph = RnnDescentCpu
        .build(base.view(), Metric::L2Squared, &params, &BuildCtx::new(4))
        .unwrap();
    graph.validate().unwrap();
    assert_eq!(graph.entry_points().len(), params.entry_points);
    // Rows are ascending by distance from their vertex (nothing was unreachable here, so the
    // connectivity repair changed no row).
    let dist = Metric::L2Squared.distance_fn::<f32>();
    for v in 0..2000u32 {
        let d: Vec<f32> = graph
            .neighbors(v)
            .iter()
            .map(|&u| dist.eval(base.row(v as usize), base.row(u as usize)))
            .collect();
        assert!(d.windows(2).all(|w| w[0] <= w[1]), "row {v} not sorted");
    }
    let truth = ground_truth(base.view(), queries.view(), Metric::L2Squared, 10).unwrap();
    let mut out = Neighbors::new(queries.rows(), 10);
    BeamSearch
        .search(
            &graph,
            base.view(),
            queries.view(),
            Metric::L2Squared,
            &BeamSearchParams::with_beam_width(48),
            out.as_mut(),
        )
        .unwrap();
    let r = recall_at_k(&out, &truth, 10);
    assert!(r >= 0.95, "recall {r}");
}

#[test]
fn filled_rows_add_pruned_candidates_to_the_same_kept_rows() {
    // `fill_fraction` changes only the export: the kept rows are those of an unfilled build
    // (same seed), and every added neighbour is a vertex the row lacked. Deterministic whatever
    // the thread count.
    let (base, queries) = gaussian_mixture::<f32>(3000, 100, 32, 6, 11);
    let build = |fill_fraction: f32, threads: usize| {
        let params = RnnDescentParams {
            fill_fraction,
            ..Default::default()
        };
        let ctx = BuildCtx::new(21).with_threads(Some(threads));
        RnnDescentCpu
            .build_with_stats(base.view(), Metric::L2Squared, &params, &ctx)
            .unwrap()
    };
    let (plain, plain_stats) = build(0.0, 2);
    let (filled, stats) = build(0.5, 2);
    let (filled_1, stats_1) = build(0.5, 1);
    let (filled_3, _) = build(0.5, 3);
    filled.validate().unwrap();
    assert_eq!(filled.ids(), filled_1.ids());
    assert_eq!(filled.ids(), filled_3.ids());
    assert_eq!(filled.entry_points(), filled_3.entry_points());
    assert_eq!(stats, stats_1);
    assert_eq!(plain_stats.filled_edges, 0);
    // Same lists, same work: filling computes no distance.
    assert_eq!(
        stats.distance_computations,
        plain_stats.distance_computations
    );
    assert_eq!(stats.edges_before_cut, plain_stats.edges_before_cut);
    // Nothing was unreachable in either, so the repair left every row as exported.
    assert_eq!(plain_stats.repair.unreachable_before, 0);
    assert_eq!(stats.repair.unreachable_before, 0);
    let fill_len = RnnDescentParams::default().fill_len();
    let (mut added, mut short_rows) = (0u64, 0usize);
    for v in 0..3000u32 {
        let (p, f) = (plain.neighbors(v), filled.neighbors(v));
        assert!(p.iter().all(|u| f.contains(u)), "row {v} lost a kept entry");
        let mut sorted = f.to_vec();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(sorted.len(), f.len(), "row {v} repeats a neighbour");
        assert!(!f.contains(&v), "row {v} links to itself");
        if p.len() < fill_len {
            assert!(f.len() <= fill_len, "row {v} filled beyond {fill_len}");
            short_rows += 1;
        } else {
            assert_eq!(p, f, "row {v} was long enough and must not change");
        }
        added += (f.len() - p.len()) as u64;
    }
    assert!(short_rows > 0, "no row was short: the test checks nothing");
    assert_eq!(added, stats.filled_edges);
    assert!(added > 0);
    // More edges from the same lists: at least the unfilled graph's recall at the same beam.
    let truth = ground_truth(base.view(), queries.view(), Metric::L2Squared, 10).unwrap();
    let recall = |graph: &weft_core::FixedDegreeGraph| {
        let mut out = Neighbors::new(queries.rows(), 10);
        BeamSearch
            .search(
                graph,
                base.view(),
                queries.view(),
                Metric::L2Squared,
                &BeamSearchParams::with_beam_width(16),
                out.as_mut(),
            )
            .unwrap();
        recall_at_k(&out, &truth, 10)
    };
    let (r_plain, r_filled) = (recall(&plain), recall(&filled));
    assert!(r_filled >= r_plain, "{r_filled} < {r_plain}");
}

#[test]
fn progress_is_reported() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU64, Ordering};
    #[derive(Default)]
    struct Count(AtomicU64);
    impl weft_core::Progress for Count {
        fn begin(&self, _stage: &str, _total: Option<u64>) {}
        fn advance(&self, delta: u64) {
            self.0.fetch_add(delta, Ordering::Relaxed);
        }
    }
    let (base, _) = gaussian_mixture::<f32>(300, 0, 8, 4, 1);
    let count = Arc::new(Count::default());
    let params = RnnDescentParams::default();
    RnnDescentCpu
        .build(
            base.view(),
            Metric::L2Squared,
            &params,
            &BuildCtx::new(1).with_progress(count.clone()),
        )
        .unwrap();
    assert_eq!(
        count.0.load(Ordering::Relaxed),
        (params.t1 * params.t2) as u64
    );
}
