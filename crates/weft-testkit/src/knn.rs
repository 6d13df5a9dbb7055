//! The conformance suite every [`KnnGraphBuilder`] must pass.
//!
//! [`check_knn_builder`] (or [`run_knn_suite`] with a [`KnnSuite`] for the options) builds graphs
//! on seeded Gaussian-mixture sets and checks:
//! - **validity**: [`KnnGraph::validate`] (ids in range, no self, no duplicate, padding last,
//!   distances ascending), full rows (`k < n` so every row can be filled), shape `n x k`, and
//!   the reported distances equal the metric's distances (relative tolerance 1e-3);
//! - **recall** against an exact brute-force k-NN computed here, at least the declared
//!   threshold, for d in {8, 32, 128} under every metric on `f32`, plus `u8` (L2, cosine) and
//!   `f16` (inner product, L2) sets. Inner product may declare its own threshold
//!   ([`KnnSuite::min_recall_ip`]): it is not a metric and neighbour-of-neighbour methods are
//!   weaker there. A returned neighbour counts as a hit when it is no farther than the true
//!   k-th neighbour, so ties (common on `u8`) are not penalised;
//! - **strided views** are honoured (a view with `stride > dim` gives a valid graph of the same
//!   recall; the same graph for deterministic builders);
//! - **determinism** (optional, [`KnnSuite::deterministic`]; GPU builders are not): the same
//!   seed gives the same graph, on 1 and on 3 threads;
//! - **cancellation**: a pre-cancelled [`CancelToken`] gives `Err(Error::Cancelled)`;
//! - **bad input**: `k = 0`, `k >= n`, empty and one-point sets are `InvalidParams` /
//!   `InvalidInput`, never a panic; every entry of [`KnnSuite::invalid_params`] is rejected with
//!   `InvalidParams`.
//!
//! Builders may assume finite data (callers check with `DatasetView::check_finite`); the suite
//! never feeds NaN.
//!
//! Failures panic with a message naming the case, as test assertions do.

use half::f16;
use weft_core::rng::SplitMix64;
use weft_core::{
    BuildCtx, CancelToken, DatasetView, Element, Error, INVALID, KnnGraph, KnnGraphBuilder, Metric,
    NodeId,
};

/// Options of [`run_knn_suite`].
#[derive(Clone, Debug)]
pub struct KnnSuite<P> {
    /// The least graph recall accepted in every recall case.
    pub min_recall: f64,
    /// The least graph recall accepted under [`Metric::InnerProduct`] (not a metric: hubs of
    /// large norm make neighbour-of-neighbour methods weaker there). Default: `min_recall`.
    pub min_recall_ip: f64,
    /// Whether to check that the same seed gives the same graph (also across thread counts).
    pub deterministic: bool,
    /// Points per synthetic set.
    pub n: usize,
    /// Neighbours per point.
    pub k: usize,
    /// The seed of the data and of the builds.
    pub seed: u64,
    /// Parameters the builder must reject with [`Error::InvalidParams`].
    pub invalid_params: Vec<P>,
}

impl<P> KnnSuite<P> {
    /// The full suite: 2000 points, `k = 10`, determinism checked.
    pub fn new(min_recall: f64) -> Self {
        KnnSuite {
            min_recall,
            min_recall_ip: min_recall,
            deterministic: true,
            n: 2000,
            k: 10,
            seed: 42,
            invalid_params: Vec::new(),
        }
    }

    /// A quicker variant: 600 points, `k = 8`.
    pub fn small(min_recall: f64) -> Self {
        KnnSuite {
            n: 600,
            k: 8,
            ..Self::new(min_recall)
        }
    }

    /// Sets [`KnnSuite::deterministic`].
    pub fn deterministic(mut self, yes: bool) -> Self {
        self.deterministic = yes;
        self
    }

    /// Sets [`KnnSuite::min_recall_ip`].
    pub fn with_min_recall_ip(mut self, min: f64) -> Self {
        self.min_recall_ip = min;
        self
    }

    /// Sets [`KnnSuite::invalid_params`].
    pub fn with_invalid_params(mut self, bad: Vec<P>) -> Self {
        self.invalid_params = bad;
        self
    }
}

/// One recall case of a suite run.
#[derive(Clone, Debug)]
pub struct KnnCase {
    /// `dtype/metric/d=..`.
    pub name: String,
    /// The graph recall reached.
    pub recall: f64,
}

/// What a suite run measured (every check passed, or it would have panicked).
#[derive(Clone, Debug, Default)]
pub struct KnnReport {
    /// The recall cases.
    pub cases: Vec<KnnCase>,
}

impl KnnReport {
    /// The lowest recall over the cases.
    pub fn min_recall(&self) -> f64 {
        self.cases
            .iter()
            .map(|c| c.recall)
            .fold(f64::INFINITY, f64::min)
    }
}

/// Runs the full suite ([`KnnSuite::new`]) with determinism checked.
pub fn check_knn_builder<B: KnnGraphBuilder>(
    builder: &B,
    params: &B::Params,
    min_recall: f64,
) -> KnnReport {
    run_knn_suite(builder, params, &KnnSuite::new(min_recall))
}

/// Runs the suite with `suite`'s options; panics on the first failed check.
pub fn run_knn_suite<B: KnnGraphBuilder>(
    builder: &B,
    params: &B::Params,
    suite: &KnnSuite<B::Params>,
) -> KnnReport {
    assert!(suite.k >= 1 && suite.k < suite.n, "suite needs 1 <= k < n");
    let name = builder.name();
    let mut report = KnnReport::default();
    let ctx = BuildCtx::new(suite.seed);

    let min_for = |m: Metric| {
        if m == Metric::InnerProduct {
            suite.min_recall_ip
        } else {
            suite.min_recall
        }
    };
    // Recall on f32, every metric, three dimensions.
    for (i, &dim) in [8usize, 32, 128].iter().enumerate() {
        let data = gaussian_mixture(suite.n, dim, 12, suite.seed ^ (i as u64 + 1));
        let view = DatasetView::new(&data, suite.n, dim).expect("shape");
        for metric in Metric::ALL {
            let case = format!("{name}: f32/{metric}/d={dim}");
            let recall = check_case(builder, params, view, metric, suite.k, &ctx, &case);
            assert_recall(&case, recall, min_for(metric));
            report.cases.push(KnnCase { name: case, recall });
        }
    }
    // u8 (L2 and cosine) and f16 (inner product and L2).
    {
        let dim = 32;
        let data = gaussian_mixture(suite.n, dim, 12, suite.seed ^ 0xa5);
        let bytes: Vec<u8> = data
            .iter()
            .map(|&x| u8::from_f32(x * 12.0 + 128.0))
            .collect();
        let halves: Vec<f16> = data.iter().map(|&x| f16::from_f32(x)).collect();
        let bview = DatasetView::new(&bytes, suite.n, dim).expect("shape");
        let hview = DatasetView::new(&halves, suite.n, dim).expect("shape");
        for metric in [Metric::L2Squared, Metric::Cosine] {
            let case = format!("{name}: u8/{metric}/d={dim}");
            let recall = check_case(builder, params, bview, metric, suite.k, &ctx, &case);
            assert_recall(&case, recall, suite.min_recall);
            report.cases.push(KnnCase { name: case, recall });
        }
        for metric in [Metric::InnerProduct, Metric::L2Squared] {
            let case = format!("{name}: f16/{metric}/d={dim}");
            let recall = check_case(builder, params, hview, metric, suite.k, &ctx, &case);
            assert_recall(&case, recall, min_for(metric));
            report.cases.push(KnnCase { name: case, recall });
        }
    }

    // A strided view (every row padded by 3 elements) behaves like the contiguous copy.
    {
        let (n, dim, pad) = (suite.n, 16, 3);
        let data = gaussian_mixture(n, dim, 12, suite.seed ^ 0x57);
        let mut strided = vec![1e6f32; n * (dim + pad)];
        for r in 0..n {
            strided[r * (dim + pad)..r * (dim + pad) + dim]
                .copy_from_slice(&data[r * dim..(r + 1) * dim]);
        }
        let sview = DatasetView::with_stride(&strided, n, dim, dim + pad).expect("shape");
        let cview = DatasetView::new(&data, n, dim).expect("shape");
        let case = format!("{name}: strided f32/l2/d={dim}");
        let recall = check_case(
            builder,
            params,
            sview,
            Metric::L2Squared,
            suite.k,
            &ctx,
            &case,
        );
        assert_recall(&case, recall, suite.min_recall);
        report.cases.push(KnnCase { name: case, recall });
        if suite.deterministic {
            let a = build_ok(
                builder,
                params,
                sview,
                Metric::L2Squared,
                suite.k,
                &ctx,
                "strided",
            );
            let b = build_ok(
                builder,
                params,
                cview,
                Metric::L2Squared,
                suite.k,
                &ctx,
                "contig",
            );
            assert_same(&a, &b, &format!("{name}: strided view vs contiguous copy"));
        }
    }

    // Determinism: same seed, same graph, whatever the thread count.
    if suite.deterministic {
        let dim = 32;
        let data = gaussian_mixture(suite.n, dim, 12, suite.seed ^ 0xde);
        let view = DatasetView::new(&data, suite.n, dim).expect("shape");
        for metric in [Metric::L2Squared, Metric::Cosine] {
            let c1 = BuildCtx::new(7).with_threads(Some(1));
            let c3 = BuildCtx::new(7).with_threads(Some(3));
            let a = build_ok(builder, params, view, metric, suite.k, &c1, "1 thread");
            let b = build_ok(
                builder,
                params,
                view,
                metric,
                suite.k,
                &c1,
                "1 thread again",
            );
            let c = build_ok(builder, params, view, metric, suite.k, &c3, "3 threads");
            assert_same(&a, &b, &format!("{name}: {metric}: same seed twice"));
            assert_same(&a, &c, &format!("{name}: {metric}: 1 vs 3 threads"));
        }
    }

    check_cancellation(builder, params, suite.seed);
    check_bad_input(builder, params, suite);
    report
}

/// A pre-cancelled token makes the build return `Err(Error::Cancelled)`.
pub fn check_cancellation<B: KnnGraphBuilder>(builder: &B, params: &B::Params, seed: u64) {
    let data = gaussian_mixture(300, 8, 4, seed);
    let view = DatasetView::new(&data, 300, 8).expect("shape");
    let token = CancelToken::new();
    token.cancel();
    let ctx = BuildCtx::new(seed).with_cancel(token);
    match builder.build(view, Metric::L2Squared, 5, params, &ctx) {
        Err(Error::Cancelled) => {}
        other => panic!(
            "{}: a pre-cancelled build must return Err(Cancelled), got {:?}",
            builder.name(),
            other.map(|g| (g.n(), g.k()))
        ),
    }
}

/// Bad `k`, empty and one-point sets, and the suite's invalid parameters are typed errors.
pub fn check_bad_input<B: KnnGraphBuilder>(
    builder: &B,
    params: &B::Params,
    suite: &KnnSuite<B::Params>,
) {
    let name = builder.name();
    let ctx = BuildCtx::new(suite.seed);
    let n = 50;
    let data = gaussian_mixture(n, 4, 3, suite.seed);
    let view = DatasetView::new(&data, n, 4).expect("shape");
    let cases: [(&str, DatasetView<'_, f32>, usize); 5] = [
        ("k = 0", view, 0),
        ("k = n", view, n),
        ("k > n", view, n + 5),
        (
            "empty set",
            DatasetView::new(&data[..0], 0, 4).expect("shape"),
            1,
        ),
        (
            "one point",
            DatasetView::new(&data[..4], 1, 4).expect("shape"),
            1,
        ),
    ];
    for (what, v, k) in cases {
        match builder.build(v, Metric::L2Squared, k, params, &ctx) {
            Err(Error::InvalidParams { .. } | Error::InvalidInput(_)) => {}
            other => panic!(
                "{name}: {what} must be InvalidParams/InvalidInput, got {:?}",
                other.map(|g| (g.n(), g.k()))
            ),
        }
    }
    // The smallest valid input: two points, k = 1.
    let two = DatasetView::new(&data[..8], 2, 4).expect("shape");
    let g = build_ok(
        builder,
        params,
        two,
        Metric::L2Squared,
        1,
        &ctx,
        "n = 2, k = 1",
    );
    assert_eq!(g.ids(), &[1, 0], "{name}: n = 2, k = 1");
    for (i, bad) in suite.invalid_params.iter().enumerate() {
        match builder.build(view, Metric::L2Squared, 5, bad, &ctx) {
            Err(Error::InvalidParams { .. }) => {}
            other => panic!(
                "{name}: invalid_params[{i}] ({bad:?}) must be InvalidParams, got {:?}",
                other.map(|g| (g.n(), g.k()))
            ),
        }
    }
}

fn assert_recall(case: &str, recall: f64, min: f64) {
    assert!(
        recall >= min,
        "{case}: graph recall {recall:.4} is below the declared {min:.4}"
    );
}

fn build_ok<B: KnnGraphBuilder, T: Element>(
    builder: &B,
    params: &B::Params,
    data: DatasetView<'_, T>,
    metric: Metric,
    k: usize,
    ctx: &BuildCtx,
    case: &str,
) -> KnnGraph {
    match builder.build(data, metric, k, params, ctx) {
        Ok(g) => g,
        Err(e) => panic!("{}: {case}: build failed: {e}", builder.name()),
    }
}

fn assert_same(a: &KnnGraph, b: &KnnGraph, what: &str) {
    assert_eq!(a.ids(), b.ids(), "{what}: neighbour ids differ");
    let same_d = a
        .dists()
        .iter()
        .zip(b.dists())
        .all(|(x, y)| x.to_bits() == y.to_bits());
    assert!(same_d, "{what}: distances differ");
}

/// Builds, validates (shape, rows, distances) and returns the graph recall.
fn check_case<B: KnnGraphBuilder, T: Element>(
    builder: &B,
    params: &B::Params,
    data: DatasetView<'_, T>,
    metric: Metric,
    k: usize,
    ctx: &BuildCtx,
    case: &str,
) -> f64 {
    let g = build_ok(builder, params, data, metric, k, ctx, case);
    check_graph_shape(&g, data, metric, k, case);
    let exact = exact_knn(data, metric, k);
    graph_recall(&g, data, metric, &exact)
}

/// Checks `g` against `data`: shape, [`KnnGraph::validate`], full rows, and distances equal to
/// the metric's (relative tolerance 1e-3, absolute 1e-3).
pub fn check_graph_shape<T: Element>(
    g: &KnnGraph,
    data: DatasetView<'_, T>,
    metric: Metric,
    k: usize,
    case: &str,
) {
    assert_eq!((g.n(), g.k()), (data.rows(), k), "{case}: graph shape");
    if let Err(e) = g.validate() {
        panic!("{case}: invalid graph: {e}");
    }
    let dist = metric.distance_fn::<T>();
    for v in 0..g.n() {
        let ids = g.row_ids(v);
        assert!(
            !ids.contains(&INVALID),
            "{case}: row {v} is not full (k < n, so every row can be filled)"
        );
        for (&u, &d) in ids.iter().zip(g.row_dists(v)) {
            let t = dist.eval(data.row(v), data.row(u as usize));
            assert!(
                (t - d).abs() <= 1e-3 * t.abs().max(1.0),
                "{case}: row {v}: distance to {u} is {d}, the metric says {t}"
            );
        }
    }
}

/// Exact k nearest neighbours (self excluded) by brute force: per point, the `k` smallest
/// `(distance, id)`.
pub fn exact_knn<T: Element>(
    data: DatasetView<'_, T>,
    metric: Metric,
    k: usize,
) -> Vec<Vec<(f32, NodeId)>> {
    let dist = metric.distance_fn::<T>();
    let n = data.rows();
    let mut all: Vec<(f32, NodeId)> = Vec::with_capacity(n);
    (0..n)
        .map(|v| {
            all.clear();
            let rv = data.row(v);
            all.extend(
                (0..n)
                    .filter(|&u| u != v)
                    .map(|u| (dist.eval(rv, data.row(u)), u as NodeId)),
            );
            let kk = k.min(all.len());
            if kk < all.len() {
                all.select_nth_unstable_by(kk, |a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
            }
            let mut row = all[..kk].to_vec();
            row.sort_unstable_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
            row
        })
        .collect()
}

/// Graph recall of `g` against `exact` (from [`exact_knn`] with the same `k`): the fraction of
/// returned neighbours no farther than the true k-th neighbour (recomputed distances, so ties
/// are not penalised), over all rows.
pub fn graph_recall<T: Element>(
    g: &KnnGraph,
    data: DatasetView<'_, T>,
    metric: Metric,
    exact: &[Vec<(f32, NodeId)>],
) -> f64 {
    let dist = metric.distance_fn::<T>();
    let mut hits = 0usize;
    let mut total = 0usize;
    for (v, truth) in exact.iter().enumerate() {
        let Some(&(kth, _)) = truth.last() else {
            continue;
        };
        total += truth.len();
        let tol = 1e-5 * kth.abs().max(1e-6);
        hits += g
            .row_ids(v)
            .iter()
            .take(truth.len())
            .filter(|&&u| u != INVALID && (u as usize) < data.rows() && u as usize != v)
            .filter(|&&u| dist.eval(data.row(v), data.row(u as usize)) <= kth + tol)
            .count();
    }
    if total == 0 {
        1.0
    } else {
        hits as f64 / total as f64
    }
}

/// A seeded Gaussian mixture: `clusters` centres drawn from N(0, 3^2) per coordinate, points
/// around a random centre with unit variance; `n * dim` values, row-major.
pub fn gaussian_mixture(n: usize, dim: usize, clusters: usize, seed: u64) -> Vec<f32> {
    let mut rng = SplitMix64::new(seed);
    let clusters = clusters.max(1);
    let centres: Vec<f32> = (0..clusters * dim)
        .map(|_| (rng.next_gaussian() * 3.0) as f32)
        .collect();
    let mut out = Vec::with_capacity(n * dim);
    for _ in 0..n {
        let c = rng.below(clusters as u64) as usize;
        for j in 0..dim {
            out.push(centres[c * dim + j] + rng.next_gaussian() as f32);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_knn_and_recall_agree_on_themselves() {
        let data = gaussian_mixture(200, 6, 3, 1);
        let view = DatasetView::new(&data, 200, 6).unwrap();
        let exact = exact_knn(view, Metric::L2Squared, 5);
        let ids: Vec<NodeId> = exact.iter().flat_map(|r| r.iter().map(|p| p.1)).collect();
        let dists: Vec<f32> = exact.iter().flat_map(|r| r.iter().map(|p| p.0)).collect();
        let g = KnnGraph::from_parts(200, 5, ids, dists).unwrap();
        check_graph_shape(&g, view, Metric::L2Squared, 5, "self");
        assert_eq!(graph_recall(&g, view, Metric::L2Squared, &exact), 1.0);
        let empty = KnnGraph::empty(200, 5);
        assert_eq!(graph_recall(&empty, view, Metric::L2Squared, &exact), 0.0);
    }
}
