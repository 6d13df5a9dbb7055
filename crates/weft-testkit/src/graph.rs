//! The conformance suite of every [`GraphBuilder`], and the helpers the suites share: seeded
//! Gaussian-mixture data, exact ground truth, recall, a plain reference beam search and a
//! structural check of any [`GraphView`].
//!
//! ```text
//! let report = weft_testkit::graph::check_graph_builder(&MyBuilder, MyParams::default(), 0.9);
//! println!("{report}");
//! ```
//!
//! Every check panics with a message naming the case that failed, so the suites are meant to be
//! called from `#[test]` functions.

use std::fmt;
use std::panic::{AssertUnwindSafe, catch_unwind};

use weft_core::rng::SplitMix64;
use weft_core::{
    BuildCtx, CancelToken, DType, Dataset, DatasetView, Element, Error, GraphBuilder, GraphView,
    INVALID, Metric, Neighbors, NodeId, Result,
};

/// `n` base and `nq` query vectors of dimension `dim` from one seeded mixture of `clusters`
/// Gaussians (unit variance around centres drawn from N(0, 3^2) per coordinate).
///
/// Integer types get an affine image of the same data (`u8`: `128 + 16 x`, `i8`: `16 x`, both
/// saturated), so their neighbourhoods are those of the `f32` set up to rounding.
pub fn gaussian_mixture<T: Element>(
    n: usize,
    nq: usize,
    dim: usize,
    clusters: usize,
    seed: u64,
) -> (Dataset<T>, Dataset<T>) {
    let clusters = clusters.max(1);
    let mut rng = SplitMix64::new(weft_core::rng::hash3(seed, 0x006d_6978, dim as u64));
    let centres: Vec<f32> = (0..clusters * dim)
        .map(|_| 3.0 * rng.next_gaussian() as f32)
        .collect();
    let map = |x: f32| -> T {
        match T::DTYPE {
            DType::U8 => T::from_f32(128.0 + 16.0 * x),
            DType::I8 => T::from_f32(16.0 * x),
            _ => T::from_f32(x),
        }
    };
    let mut draw = |rows: usize| -> Dataset<T> {
        let mut v = Vec::with_capacity(rows * dim);
        for _ in 0..rows {
            let c = rng.below(clusters as u64) as usize;
            for j in 0..dim {
                v.push(map(centres[c * dim + j] + rng.next_gaussian() as f32));
            }
        }
        Dataset::from_vec(v, rows, dim).expect("consistent shape")
    };
    let base = draw(n);
    let queries = draw(nq);
    (base, queries)
}

/// The exact `k` nearest base vectors of every query (ties to the lower id).
pub fn ground_truth<T: Element>(
    base: DatasetView<'_, T>,
    queries: DatasetView<'_, T>,
    metric: Metric,
    k: usize,
) -> Result<Neighbors> {
    weft_exact::exact_search(base, queries, metric, k, &BuildCtx::new(0))
}

/// Recall@k of `found` against `truth`: the fraction of each query's true `k` nearest ids that
/// appear among its first `k` found ids, averaged over queries. A found id counts as a hit when its
/// distance ties the `k`-th true distance, so that equidistant points do not count as misses.
pub fn recall_at_k(found: &Neighbors, truth: &Neighbors, k: usize) -> f64 {
    let rows = found.rows().min(truth.rows());
    if rows == 0 || k == 0 {
        return 1.0;
    }
    let k = k.min(found.k()).min(truth.k());
    let mut hits = 0usize;
    for q in 0..rows {
        let t = &truth.row_ids(q)[..k];
        let kth = truth.row_dists(q)[k - 1];
        for (j, id) in found.row_ids(q)[..k].iter().enumerate() {
            if *id == INVALID {
                continue;
            }
            if t.contains(id) || found.row_dists(q)[j] <= kth {
                hits += 1;
            }
        }
    }
    hits as f64 / (rows * k) as f64
}

/// A plain, unoptimised greedy best-first beam search (beam width at least `k`) over `graph`, starting from
/// the graph's entry points, or vertex 0 when it has none. The yardstick the builder suite
/// measures graphs with, independent of `weft-search`.
pub fn reference_beam_search<G: GraphView + ?Sized, T: Element>(
    graph: &G,
    data: DatasetView<'_, T>,
    queries: DatasetView<'_, T>,
    metric: Metric,
    k: usize,
    beam_width: usize,
) -> Neighbors {
    let n = data.rows();
    let l = beam_width.max(k);
    let dist = metric.distance_fn::<T>();
    let mut out = Neighbors::new(queries.rows(), k);
    let mut visited = vec![false; n];
    for q in 0..queries.rows() {
        let query = queries.row(q);
        visited.iter_mut().for_each(|v| *v = false);
        // (distance, id, expanded), ascending.
        let mut pool: Vec<(f32, NodeId, bool)> = Vec::new();
        let entries: Vec<NodeId> = if graph.entry_points().is_empty() {
            vec![0]
        } else {
            graph.entry_points().to_vec()
        };
        for e in entries {
            if (e as usize) < n && !visited[e as usize] {
                visited[e as usize] = true;
                pool.push((dist.eval(query, data.row(e as usize)), e, false));
            }
        }
        pool.sort_by(|a, b| a.0.total_cmp(&b.0));
        pool.truncate(l);
        while let Some(i) = pool.iter().position(|c| !c.2) {
            pool[i].2 = true;
            let v = pool[i].1;
            for &u in graph.neighbors(v) {
                if (u as usize) >= n || visited[u as usize] {
                    continue;
                }
                visited[u as usize] = true;
                let d = dist.eval(query, data.row(u as usize));
                if pool.len() < l || d < pool[pool.len() - 1].0 {
                    let pos = pool.partition_point(|c| c.0 <= d);
                    pool.insert(pos, (d, u, false));
                    pool.truncate(l);
                }
            }
        }
        let mut rows = out.as_mut();
        let (ids, dists) = rows.row_mut(q);
        for (j, c) in pool.iter().take(k).enumerate() {
            ids[j] = c.1;
            dists[j] = c.0;
        }
    }
    out
}

/// Checks the structure of a graph over `n` vertices: `num_nodes() == n`, every row within
/// `max_degree()`, ids in range, no self-loop, no duplicate, entry points in range.
pub fn check_graph_view<G: GraphView + ?Sized>(
    graph: &G,
    n: usize,
) -> std::result::Result<(), String> {
    if graph.num_nodes() != n {
        return Err(format!(
            "graph has {} vertices, data has {n}",
            graph.num_nodes()
        ));
    }
    let mut row = Vec::new();
    for v in 0..n {
        let nb = graph.neighbors(v as NodeId);
        if nb.len() > graph.max_degree() {
            return Err(format!(
                "vertex {v} has {} neighbours, above max_degree {}",
                nb.len(),
                graph.max_degree()
            ));
        }
        row.clear();
        row.extend_from_slice(nb);
        if let Some(&u) = row.iter().find(|&&u| u as usize >= n) {
            return Err(format!("vertex {v}: neighbour {u} out of range"));
        }
        if row.contains(&(v as NodeId)) {
            return Err(format!("vertex {v}: self-loop"));
        }
        row.sort_unstable();
        if let Some(w) = row.windows(2).find(|w| w[0] == w[1]) {
            return Err(format!("vertex {v}: neighbour {} twice", w[0]));
        }
    }
    if let Some(&e) = graph.entry_points().iter().find(|&&e| e as usize >= n) {
        return Err(format!("entry point {e} out of range"));
    }
    Ok(())
}

/// One measured case of a suite.
#[derive(Clone, Debug)]
pub struct CaseResult {
    /// What was run (`f32 d=32 l2`, ...).
    pub name: String,
    /// Recall@10 reached.
    pub recall: f64,
    /// The threshold it had to reach.
    pub min_recall: f64,
}

/// What a suite measured (it has already panicked if anything failed).
#[derive(Clone, Debug, Default)]
pub struct Report {
    /// The recall cases.
    pub cases: Vec<CaseResult>,
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for c in &self.cases {
            writeln!(
                f,
                "{:<24} recall@10 {:.4} (min {:.2})",
                c.name, c.recall, c.min_recall
            )?;
        }
        Ok(())
    }
}

/// Options of [`run_graph_suite`]. [`GraphSuite::new`] sets the defaults.
#[derive(Clone, Debug)]
pub struct GraphSuite<P> {
    /// Parameters of the builds (their seeds come from the suite).
    pub params: P,
    /// Minimum recall@10 for L2 and cosine cases.
    pub min_recall: f64,
    /// Minimum recall@10 for inner-product cases (pruned proximity graphs are not designed for
    /// maximum inner product search; default: `min_recall / 2`).
    pub min_recall_ip: f64,
    /// Per-case floors: `(case name, minimum recall@10)` pairs that replace `min_recall` /
    /// `min_recall_ip` for the named cases ([`case_names`] lists them). Default empty. A name
    /// that is not a case of the suite, or one given twice, fails the suite.
    pub case_min_recall: Vec<(String, f64)>,
    /// Beam width of the reference search used to measure recall (default 20). On the cases'
    /// 12 clusters of ~167 points, a beam of 20 over a degree-32 graph seeded in the query's
    /// cluster scores nearly all of that cluster (weft-cagra measured 164 of 166 points), so
    /// the recall cases tell a correct, connected, well-seeded graph from a broken one (a
    /// random graph of degree 4 fails), not a good graph from a merely correct one.
    pub search_beam_width: usize,
    /// Points per case (default 2000; 100 queries each).
    pub n: usize,
    /// Check that the same seed gives the same graph on 1 and 2 threads (default true).
    pub check_determinism: bool,
    /// Parameters that must be rejected with [`Error::InvalidParams`].
    pub invalid_params: Vec<P>,
}

impl<P> GraphSuite<P> {
    /// The default suite for `params` with recall threshold `min_recall`.
    pub fn new(params: P, min_recall: f64) -> Self {
        GraphSuite {
            params,
            min_recall,
            min_recall_ip: min_recall / 2.0,
            case_min_recall: Vec::new(),
            search_beam_width: 20,
            n: 2000,
            check_determinism: true,
            invalid_params: Vec::new(),
        }
    }

    /// The recall@10 floor of the case named `name` (its metric `metric`): its entry in
    /// [`GraphSuite::case_min_recall`], else `min_recall_ip` for inner product, else
    /// `min_recall`.
    pub fn min_recall_of(&self, name: &str, metric: Metric) -> f64 {
        if let Some((_, floor)) = self.case_min_recall.iter().find(|(n, _)| n == name) {
            *floor
        } else if metric == Metric::InnerProduct {
            self.min_recall_ip
        } else {
            self.min_recall
        }
    }

    /// Panics unless every name in [`GraphSuite::case_min_recall`] is a case of the suite,
    /// named once.
    fn check_case_floors(&self) {
        let names = case_names();
        for (i, (name, _)) in self.case_min_recall.iter().enumerate() {
            assert!(
                names.contains(name),
                "case_min_recall: {name:?} is not a case of the suite (cases: {names:?})"
            );
            assert!(
                !self.case_min_recall[..i].iter().any(|(n, _)| n == name),
                "case_min_recall: {name:?} given twice"
            );
        }
    }
}

/// The name of the case of element type `dtype`, dimension `dim` and `metric`.
fn case_name(dtype: DType, dim: usize, metric: Metric) -> String {
    format!("{dtype} d={dim} {metric}")
}

/// The seed of the first recall case of [`run_graph_suite`]: the case at position `i` of
/// [`case_names`] draws its data ([`gaussian_mixture`] of [`CASE_CLUSTERS`] clusters,
/// [`GraphSuite::n`] base and [`CASE_QUERIES`] query vectors) and builds with seed
/// `CASE_SEED_BASE + i`.
pub const CASE_SEED_BASE: u64 = 1000;
/// Clusters of the mixture of every recall case of [`run_graph_suite`].
pub const CASE_CLUSTERS: usize = 12;
/// Queries of every recall case of [`run_graph_suite`].
pub const CASE_QUERIES: usize = 100;

/// The names of the recall cases of [`run_graph_suite`], in the order they run (`f32 d=8 l2`,
/// ..., `f16 d=32 cosine`): the keys of [`GraphSuite::case_min_recall`].
pub fn case_names() -> Vec<String> {
    cases()
        .into_iter()
        .map(|(dtype, dim, metric)| case_name(dtype, dim, metric))
        .collect()
}

/// The (element type, dimension, metric) cases of the suites: f32 at d in {8, 32, 128} with
/// every metric at d = 8 and d = 32, plus `u8` and `f16`.
pub(crate) fn cases() -> Vec<(DType, usize, Metric)> {
    let mut v = Vec::new();
    for m in Metric::ALL {
        v.push((DType::F32, 8, m));
        v.push((DType::F32, 32, m));
    }
    v.push((DType::F32, 128, Metric::L2Squared));
    v.push((DType::U8, 32, Metric::L2Squared));
    v.push((DType::F16, 32, Metric::Cosine));
    v
}

/// Runs `f`, turning a panic into an `Err` naming `what`.
pub(crate) fn no_panic<R>(what: &str, f: impl FnOnce() -> R) -> R {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(r) => r,
        Err(_) => panic!("{what}: panicked instead of returning a typed result"),
    }
}

/// Runs the [`GraphSuite`] defaults for `builder` with `params`: see [`run_graph_suite`].
pub fn check_graph_builder<B: GraphBuilder>(
    builder: &B,
    params: B::Params,
    min_recall: f64,
) -> Report {
    run_graph_suite(builder, &GraphSuite::new(params, min_recall))
}

fn graph_case<B: GraphBuilder, T: Element>(
    builder: &B,
    suite: &GraphSuite<B::Params>,
    dim: usize,
    metric: Metric,
    seed: u64,
) -> CaseResult {
    let name = case_name(T::DTYPE, dim, metric);
    let (base, queries) = gaussian_mixture::<T>(suite.n, CASE_QUERIES, dim, CASE_CLUSTERS, seed);
    let ctx = BuildCtx::new(seed);
    let graph = no_panic(&name, || {
        builder.build(base.view(), metric, &suite.params, &ctx)
    })
    .unwrap_or_else(|e| panic!("{name}: build failed: {e}"));
    if let Err(e) = check_graph_view(&graph, suite.n) {
        panic!("{name}: invalid graph: {e}");
    }
    let truth = ground_truth(base.view(), queries.view(), metric, 10).expect("ground truth");
    let found = reference_beam_search(
        &graph,
        base.view(),
        queries.view(),
        metric,
        10,
        suite.search_beam_width,
    );
    let recall = recall_at_k(&found, &truth, 10);
    let min_recall = suite.min_recall_of(&name, metric);
    assert!(
        recall >= min_recall,
        "{name}: recall@10 {recall:.4} below {min_recall}"
    );
    if suite.check_determinism && dim == 32 && metric == Metric::L2Squared {
        let one = BuildCtx::new(seed).with_threads(Some(1));
        let two = BuildCtx::new(seed).with_threads(Some(2));
        let a = builder
            .build(base.view(), metric, &suite.params, &one)
            .expect("build");
        let b = builder
            .build(base.view(), metric, &suite.params, &two)
            .expect("build");
        for v in 0..suite.n as NodeId {
            assert_eq!(
                a.neighbors(v),
                b.neighbors(v),
                "{name}: same seed, 1 vs 2 threads: vertex {v} differs"
            );
            assert_eq!(
                a.neighbors(v),
                graph.neighbors(v),
                "{name}: same seed, two runs: vertex {v} differs"
            );
        }
        assert_eq!(
            a.entry_points(),
            b.entry_points(),
            "{name}: entry points differ"
        );
    }
    CaseResult {
        name,
        recall,
        min_recall,
    }
}

/// Clusters of the strongly clustered case of [`run_graph_suite`].
pub const CLUSTERED_CLUSTERS: usize = 40;
/// The beams the clustered case tries, in order, until one reaches [`CLUSTERED_MIN_RECALL`].
pub const CLUSTERED_BEAMS: [usize; 5] = [16, 32, 64, 128, 256];
/// The recall@10 the clustered case requires at some beam of [`CLUSTERED_BEAMS`].
pub const CLUSTERED_MIN_RECALL: f64 = 0.99;

/// A strongly clustered set: `n` base and 200 query vectors of dimension 32 from
/// [`CLUSTERED_CLUSTERS`] unit-variance Gaussians whose centres are drawn from N(0, 3^2) per
/// coordinate, so two centres lie about 24 apart and a cluster's points about 8 apart: the
/// exact k-NN graph falls apart into one component per cluster.
pub fn clustered_set(n: usize, seed: u64) -> (Dataset<f32>, Dataset<f32>) {
    gaussian_mixture::<f32>(n, 200, 32, CLUSTERED_CLUSTERS, seed)
}

/// The strongly clustered case every search-graph builder must pass: over [`clustered_set`],
/// the built graph has no vertex unreachable from its entry points (vertex 0 when it has none),
/// and the reference beam search reaches recall@10 >= [`CLUSTERED_MIN_RECALL`] at some beam of
/// [`CLUSTERED_BEAMS`]. Returns the recall at the first beam that does.
pub fn check_clustered<B: GraphBuilder>(builder: &B, params: &B::Params, n: usize) -> CaseResult {
    let name = format!(
        "{}: clustered ({CLUSTERED_CLUSTERS} clusters, n = {n})",
        builder.name()
    );
    let (base, queries) = clustered_set(n, 4242);
    let ctx = BuildCtx::new(4242);
    let graph = no_panic(&name, || {
        builder.build(base.view(), Metric::L2Squared, params, &ctx)
    })
    .unwrap_or_else(|e| panic!("{name}: build failed: {e}"));
    if let Err(e) = check_graph_view(&graph, n) {
        panic!("{name}: invalid graph: {e}");
    }
    let stats = weft_graph::graph_stats(&graph, None).expect("graph statistics");
    assert_eq!(
        stats.reachable,
        n,
        "{name}: {} of {n} vertices unreachable from the entry points",
        n - stats.reachable
    );
    let truth = ground_truth(base.view(), queries.view(), Metric::L2Squared, 10).expect("truth");
    let mut tried = Vec::new();
    for l in CLUSTERED_BEAMS {
        let found = reference_beam_search(
            &graph,
            base.view(),
            queries.view(),
            Metric::L2Squared,
            10,
            l,
        );
        let recall = recall_at_k(&found, &truth, 10);
        if recall >= CLUSTERED_MIN_RECALL {
            return CaseResult {
                name: format!("{name} beam {l}"),
                recall,
                min_recall: CLUSTERED_MIN_RECALL,
            };
        }
        tried.push(format!("beam {l}: {recall:.4}"));
    }
    panic!(
        "{name}: recall@10 below {CLUSTERED_MIN_RECALL} at every beam ({})",
        tried.join(", ")
    );
}

/// Expects `r` to be `Ok` with a structurally valid graph over `n` vertices, or a typed error
/// other than a panic.
fn expect_valid_or_typed<G: GraphView>(what: &str, r: Result<G>, n: usize, must_succeed: bool) {
    match r {
        Ok(g) => {
            if let Err(e) = check_graph_view(&g, n) {
                panic!("{what}: invalid graph: {e}");
            }
        }
        Err(e) if must_succeed => panic!("{what}: failed: {e}"),
        Err(_) => {}
    }
}

/// The builder suite: for every case of f32 (d in {8, 32, 128}, every metric), `u8` and `f16`,
/// builds a graph over a seeded Gaussian mixture, checks its structure and that the reference
/// beam search over it reaches the recall threshold (the case's own in
/// [`GraphSuite::case_min_recall`], else `min_recall` or `min_recall_ip`); then the strongly
/// clustered case
/// ([`check_clustered`]: no unreachable vertex, recall@10 >= 0.99 at some beam <= 256); then
/// checks determinism (same seed on 1
/// and 2 threads), a pre-cancelled token (`Error::Cancelled`), empty data, NaN data, a single
/// point, two points and all-identical vectors (a valid graph, never a panic) and the
/// `invalid_params` (`Error::InvalidParams`).
pub fn run_graph_suite<B: GraphBuilder>(builder: &B, suite: &GraphSuite<B::Params>) -> Report {
    suite.check_case_floors();
    let mut report = Report::default();
    for (i, (dtype, dim, metric)) in cases().into_iter().enumerate() {
        let seed = CASE_SEED_BASE + i as u64;
        let case = match dtype {
            DType::U8 => graph_case::<B, u8>(builder, suite, dim, metric, seed),
            DType::I8 => graph_case::<B, i8>(builder, suite, dim, metric, seed),
            DType::F16 => graph_case::<B, half::f16>(builder, suite, dim, metric, seed),
            _ => graph_case::<B, f32>(builder, suite, dim, metric, seed),
        };
        report.cases.push(case);
    }
    report
        .cases
        .push(check_clustered(builder, &suite.params, suite.n.max(2000)));
    let p = &suite.params;
    let name = builder.name();

    // Cancellation.
    let (base, _) = gaussian_mixture::<f32>(300, 0, 8, 4, 7);
    let cancel = CancelToken::new();
    cancel.cancel();
    let ctx = BuildCtx::new(1).with_cancel(cancel);
    let r = no_panic("cancelled build", || {
        builder.build(base.view(), Metric::L2Squared, p, &ctx)
    });
    assert!(
        matches!(r, Err(Error::Cancelled)),
        "{name}: a pre-cancelled build must return Error::Cancelled, got {:?}",
        r.err()
    );

    // Degenerate inputs.
    let ctx = BuildCtx::new(1);
    let empty: Vec<f32> = Vec::new();
    let view = DatasetView::new(&empty, 0, 8).expect("view");
    let r = no_panic("empty data", || {
        builder.build(view, Metric::L2Squared, p, &ctx)
    });
    assert!(
        matches!(
            r,
            Err(Error::InvalidInput(_)) | Err(Error::InvalidParams { .. })
        ),
        "{name}: empty data must be rejected with a typed error, got {:?}",
        r.err()
    );
    let mut nan = base.as_slice().to_vec();
    nan[17] = f32::NAN;
    let view = DatasetView::new(&nan, 300, 8).expect("view");
    let r = no_panic("NaN data", || {
        builder.build(view, Metric::L2Squared, p, &ctx)
    });
    assert!(r.is_err(), "{name}: NaN data must be rejected");
    for rows in [1usize, 2] {
        let view = base.view().slice_rows(0..rows).expect("rows");
        let what = format!("{name}: {rows} point(s)");
        let r = no_panic(&what, || builder.build(view, Metric::L2Squared, p, &ctx));
        expect_valid_or_typed(&what, r, rows, false);
    }
    let same = vec![0.25f32; 64 * 8];
    let view = DatasetView::new(&same, 64, 8).expect("view");
    let what = format!("{name}: identical vectors");
    let r = no_panic(&what, || builder.build(view, Metric::L2Squared, p, &ctx));
    expect_valid_or_typed(&what, r, 64, true);

    // Invalid parameters.
    for bad in &suite.invalid_params {
        let r = no_panic("invalid params", || {
            builder.build(base.view(), Metric::L2Squared, bad, &ctx)
        });
        assert!(
            matches!(r, Err(Error::InvalidParams { .. })),
            "{name}: {bad:?} must be rejected with Error::InvalidParams, got {:?}",
            r.err().map(|e| e.to_string())
        );
    }
    report
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::search::known_good_graph;
    use weft_core::{FixedDegreeGraph, KnnGraphBuilder, NoParams};

    #[test]
    fn clustered_set_falls_apart_into_clusters() {
        // The case is only meaningful if the exact k-NN graph is not connected.
        let (base, _) = clustered_set(2000, 4242);
        let knn = weft_exact::ExactKnn
            .build(
                base.view(),
                Metric::L2Squared,
                10,
                &NoParams {},
                &BuildCtx::new(1),
            )
            .unwrap();
        let g = knn.to_fixed_degree(10).unwrap();
        let stats = weft_graph::graph_stats(&g, Some(&[0])).unwrap();
        assert!(stats.scc_count >= CLUSTERED_CLUSTERS / 2, "{stats}");
        assert!(stats.reachable < 2000 / 10, "{stats}");
    }

    /// A correct builder: exact 16-NN plus random long edges.
    struct GoodBuilder;
    impl GraphBuilder for GoodBuilder {
        type Params = NoParams;
        type Output = FixedDegreeGraph;
        fn name(&self) -> &'static str {
            "good"
        }
        fn build<T: Element>(
            &self,
            data: DatasetView<'_, T>,
            metric: Metric,
            _params: &NoParams,
            ctx: &BuildCtx,
        ) -> Result<FixedDegreeGraph> {
            ctx.check_cancelled()?;
            if data.is_empty() {
                return Err(Error::InvalidInput("empty".into()));
            }
            data.check_finite()?;
            Ok(known_good_graph(data, metric, ctx.seed()))
        }
    }

    /// A useless builder: a random graph of degree 4.
    struct RandomBuilder;
    impl GraphBuilder for RandomBuilder {
        type Params = NoParams;
        type Output = FixedDegreeGraph;
        fn name(&self) -> &'static str {
            "random"
        }
        fn build<T: Element>(
            &self,
            data: DatasetView<'_, T>,
            _metric: Metric,
            _params: &NoParams,
            ctx: &BuildCtx,
        ) -> Result<FixedDegreeGraph> {
            ctx.check_cancelled()?;
            let n = data.rows();
            let mut rng = SplitMix64::new(ctx.seed());
            let lists: Vec<Vec<NodeId>> = (0..n)
                .map(|v| {
                    let mut l: Vec<NodeId> = Vec::new();
                    for _ in 0..4 {
                        let u = rng.below(n.max(1) as u64) as NodeId;
                        if u as usize != v && !l.contains(&u) {
                            l.push(u);
                        }
                    }
                    l
                })
                .collect();
            FixedDegreeGraph::from_lists(&lists, 4)
        }
    }

    #[test]
    fn the_suite_passes_a_good_builder() {
        let report = check_graph_builder(&GoodBuilder, NoParams {}, 0.9);
        // Every (type, dimension, metric) case, then the clustered one.
        assert_eq!(report.cases.len(), cases().len() + 1);
        assert!(report.cases.last().unwrap().name.contains("clustered"));
    }

    #[test]
    fn case_floors_replace_the_default_and_must_name_a_case() {
        let names = case_names();
        assert_eq!(names.len(), cases().len());
        assert_eq!(names[0], "f32 d=8 l2");
        assert!(names.contains(&"f32 d=128 l2".to_string()));
        let mut suite = GraphSuite::new(NoParams {}, 0.9);
        suite.min_recall_ip = 0.5;
        suite.case_min_recall = vec![("f32 d=128 l2".into(), 0.8), ("f32 d=8 ip".into(), 0.7)];
        assert_eq!(suite.min_recall_of("f32 d=128 l2", Metric::L2Squared), 0.8);
        assert_eq!(suite.min_recall_of("f32 d=8 ip", Metric::InnerProduct), 0.7);
        assert_eq!(
            suite.min_recall_of("f32 d=32 ip", Metric::InnerProduct),
            0.5
        );
        assert_eq!(suite.min_recall_of("f32 d=32 l2", Metric::L2Squared), 0.9);
        // A floor above what any graph reaches fails the good builder at its case (the first).
        suite.case_min_recall = vec![("f32 d=8 l2".into(), 1.01)];
        let r = catch_unwind(|| run_graph_suite(&GoodBuilder, &suite));
        assert!(r.is_err(), "a case floor of 1.01 must fail");
        // Typos and repeats are refused before anything is built.
        for floors in [
            vec![("f32 d=128 L2".to_string(), 0.5)],
            vec![
                ("u8 d=32 l2".to_string(), 0.5),
                ("u8 d=32 l2".to_string(), 0.6),
            ],
        ] {
            suite.case_min_recall = floors;
            let r = catch_unwind(AssertUnwindSafe(|| suite.check_case_floors()));
            assert!(r.is_err(), "{:?} must be refused", suite.case_min_recall);
        }
    }

    #[test]
    fn the_suite_fails_a_random_graph() {
        let r = catch_unwind(|| check_graph_builder(&RandomBuilder, NoParams {}, 0.9));
        assert!(r.is_err(), "a random graph must not pass the recall check");
    }
}
