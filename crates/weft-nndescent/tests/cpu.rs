//! NnDescentCpu against the weft-testkit conformance suite, plus edge cases.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use weft_core::{BuildCtx, CancelToken, DatasetView, Error, KnnGraphBuilder, Metric, Progress};
use weft_nndescent::{NnDescentCpu, NnDescentParams};
use weft_testkit::knn::{
    KnnSuite, check_graph_shape, exact_knn, gaussian_mixture, graph_recall, run_knn_suite,
};

fn invalid_params() -> Vec<NnDescentParams> {
    let d = NnDescentParams::default();
    vec![
        NnDescentParams {
            rho: 0.0,
            ..d.clone()
        },
        NnDescentParams {
            max_candidates: 0,
            ..d.clone()
        },
        NnDescentParams {
            delta: 2.0,
            ..d.clone()
        },
        NnDescentParams {
            leaf_size: Some(0),
            ..d.clone()
        },
        NnDescentParams { gpu_sample: 0, ..d },
    ]
}

#[test]
fn conformance_default_params() {
    let suite = KnnSuite::new(0.95)
        .with_min_recall_ip(0.9)
        .with_invalid_params(invalid_params());
    let report = run_knn_suite(&NnDescentCpu, &NnDescentParams::default(), &suite);
    for c in &report.cases {
        eprintln!("{}: recall {:.4}", c.name, c.recall);
    }
}

#[test]
fn conformance_random_init() {
    // Dong's original random initialisation (no RP trees), on the smaller suite.
    let params = NnDescentParams {
        n_trees: 0,
        ..Default::default()
    };
    let report = run_knn_suite(&NnDescentCpu, &params, &KnnSuite::small(0.9));
    assert!(report.min_recall() >= 0.9);
}

#[test]
fn exact_builder_passes_the_suite() {
    // Sanity check of the suite itself: the exact builder has recall 1.
    let report = run_knn_suite(
        &weft_exact::ExactKnn,
        &Default::default(),
        &KnnSuite::small(0.999),
    );
    assert!(report.min_recall() >= 0.999);
}

#[test]
fn identical_vectors_give_a_valid_graph() {
    let data = vec![3.0f32; 300 * 8];
    let view = DatasetView::new(&data, 300, 8).unwrap();
    for metric in Metric::ALL {
        let g = NnDescentCpu
            .build(
                view,
                metric,
                10,
                &NnDescentParams::default(),
                &BuildCtx::new(1),
            )
            .unwrap();
        check_graph_shape(&g, view, metric, 10, "identical");
    }
    // Zero vectors under cosine (distance 1 by convention).
    let zeros = vec![0.0f32; 50 * 4];
    let view = DatasetView::new(&zeros, 50, 4).unwrap();
    let g = NnDescentCpu
        .build(
            view,
            Metric::Cosine,
            5,
            &NnDescentParams::default(),
            &BuildCtx::new(1),
        )
        .unwrap();
    g.validate().unwrap();
}

#[test]
fn two_points_k1_and_k_equal_n_minus_1() {
    let data = [0.0f32, 0.0, 1.0, 1.0];
    let view = DatasetView::new(&data, 2, 2).unwrap();
    let g = NnDescentCpu
        .build(
            view,
            Metric::L2Squared,
            1,
            &NnDescentParams::default(),
            &BuildCtx::new(0),
        )
        .unwrap();
    assert_eq!(g.ids(), &[1, 0]);
    assert_eq!(g.dists(), &[2.0, 2.0]);
    // k = n - 1: every row holds every other point.
    let data = gaussian_mixture(40, 3, 2, 5);
    let view = DatasetView::new(&data, 40, 3).unwrap();
    let g = NnDescentCpu
        .build(
            view,
            Metric::L2Squared,
            39,
            &NnDescentParams::default(),
            &BuildCtx::new(0),
        )
        .unwrap();
    check_graph_shape(&g, view, Metric::L2Squared, 39, "k = n - 1");
    let exact = exact_knn(view, Metric::L2Squared, 39);
    assert_eq!(graph_recall(&g, view, Metric::L2Squared, &exact), 1.0);
}

#[test]
fn same_graph_on_one_and_two_threads_and_different_seeds_differ() {
    let (n, dim, k) = (3000, 24, 16);
    let data = gaussian_mixture(n, dim, 20, 9);
    let view = DatasetView::new(&data, n, dim).unwrap();
    for params in [
        NnDescentParams::default(),
        NnDescentParams {
            n_trees: 0,
            rho: 0.5,
            ..Default::default()
        },
    ] {
        let build = |seed, threads| {
            NnDescentCpu
                .build(
                    view,
                    Metric::L2Squared,
                    k,
                    &params,
                    &BuildCtx::new(seed).with_threads(Some(threads)),
                )
                .unwrap()
        };
        let a = build(11, 1);
        let b = build(11, 2);
        assert_eq!(a.ids(), b.ids());
        assert_eq!(a.dists(), b.dists());
        let c = build(12, 2);
        c.validate().unwrap();
        assert_ne!(a.ids(), c.ids(), "another seed should change some rows");
    }
}

/// Counts progress units and cancels after `cancel_after` of them.
struct CancelAfter {
    units: AtomicU64,
    cancel_after: u64,
    token: CancelToken,
}

impl Progress for CancelAfter {
    fn begin(&self, _stage: &str, _total: Option<u64>) {}
    fn advance(&self, delta: u64) {
        if self.units.fetch_add(delta, Ordering::Relaxed) + delta >= self.cancel_after {
            self.token.cancel();
        }
    }
}

#[test]
fn progress_is_reported_and_cancellation_mid_build_is_honoured() {
    let (n, dim) = (2000, 16);
    let data = gaussian_mixture(n, dim, 8, 3);
    let view = DatasetView::new(&data, n, dim).unwrap();
    let params = NnDescentParams {
        delta: 0.0,
        max_iters: 4,
        ..Default::default()
    };
    // Without cancellation: one unit for the initialisation plus one per iteration.
    let token = CancelToken::new();
    let p = Arc::new(CancelAfter {
        units: AtomicU64::new(0),
        cancel_after: u64::MAX,
        token: token.clone(),
    });
    let ctx = BuildCtx::new(0).with_progress(p.clone()).with_cancel(token);
    let (_, stats) = NnDescentCpu
        .build_with_stats(view, Metric::L2Squared, 10, &params, &ctx)
        .unwrap();
    assert_eq!(p.units.load(Ordering::Relaxed), 1 + stats.iterations as u64);
    // Cancelled after the initialisation.
    let token = CancelToken::new();
    let p = Arc::new(CancelAfter {
        units: AtomicU64::new(0),
        cancel_after: 1,
        token: token.clone(),
    });
    let ctx = BuildCtx::new(0).with_progress(p).with_cancel(token);
    assert!(matches!(
        NnDescentCpu.build(view, Metric::L2Squared, 10, &params, &ctx),
        Err(Error::Cancelled)
    ));
}

#[test]
fn zero_iterations_return_the_initial_graph_and_iterations_help() {
    let (n, dim, k) = (2000, 32, 10);
    let data = gaussian_mixture(n, dim, 10, 4);
    let view = DatasetView::new(&data, n, dim).unwrap();
    let exact = exact_knn(view, Metric::L2Squared, k);
    let recall = |params: &NnDescentParams| {
        let g = NnDescentCpu
            .build(view, Metric::L2Squared, k, params, &BuildCtx::new(2))
            .unwrap();
        g.validate().unwrap();
        graph_recall(&g, view, Metric::L2Squared, &exact)
    };
    let random0 = recall(&NnDescentParams {
        n_trees: 0,
        max_iters: 0,
        ..Default::default()
    });
    let random = recall(&NnDescentParams {
        n_trees: 0,
        ..Default::default()
    });
    let trees0 = recall(&NnDescentParams {
        max_iters: 0,
        ..Default::default()
    });
    let full = recall(&NnDescentParams::default());
    assert!(random0 < 0.05, "random graph recall {random0}");
    assert!(random > 0.9, "random init + NN-Descent {random}");
    assert!(trees0 > random0, "RP trees {trees0}");
    assert!(full >= 0.95, "default {full}");
}

#[test]
fn bad_params_are_invalid_params_not_panics() {
    let data = gaussian_mixture(100, 4, 2, 1);
    let view = DatasetView::new(&data, 100, 4).unwrap();
    for bad in invalid_params() {
        assert!(matches!(
            NnDescentCpu.build(view, Metric::L2Squared, 5, &bad, &BuildCtx::new(0)),
            Err(Error::InvalidParams { .. })
        ));
    }
    assert!(matches!(
        NnDescentCpu.build(
            view,
            Metric::L2Squared,
            5,
            &NnDescentParams::default(),
            &BuildCtx::new(0).with_threads(Some(0))
        ),
        Err(Error::InvalidParams { .. })
    ));
}

#[test]
fn i8_and_small_leaves_and_large_k() {
    let (n, dim, k) = (800, 16, 12);
    let data = gaussian_mixture(n, dim, 6, 21);
    let bytes: Vec<i8> = data
        .iter()
        .map(|&x| weft_core::Element::from_f32(x * 10.0))
        .collect();
    let view = DatasetView::new(&bytes, n, dim).unwrap();
    for (params, min) in [
        (NnDescentParams::default(), 0.95),
        (
            NnDescentParams {
                leaf_size: Some(2),
                n_trees: 3,
                ..Default::default()
            },
            0.9,
        ),
        (
            NnDescentParams {
                max_candidates: 1,
                max_iters: 50,
                ..Default::default()
            },
            0.5,
        ),
    ] {
        for metric in [Metric::L2Squared, Metric::Cosine] {
            let g = NnDescentCpu
                .build(view, metric, k, &params, &BuildCtx::new(3))
                .unwrap();
            check_graph_shape(&g, view, metric, k, "i8");
            let exact = exact_knn(view, metric, k);
            let r = graph_recall(&g, view, metric, &exact);
            assert!(r >= min, "{params:?} {metric}: recall {r}");
        }
    }
    // k larger than the leaf size and than max_candidates.
    let view = DatasetView::new(&data, n, dim).unwrap();
    let g = NnDescentCpu
        .build(
            view,
            Metric::L2Squared,
            100,
            &NnDescentParams::default(),
            &BuildCtx::new(3),
        )
        .unwrap();
    check_graph_shape(&g, view, Metric::L2Squared, 100, "k = 100");
    let exact = exact_knn(view, Metric::L2Squared, 100);
    assert!(graph_recall(&g, view, Metric::L2Squared, &exact) >= 0.95);
}
