//! The conformance suite of every [`Searcher`] over a [`FixedDegreeGraph`].
//!
//! The searcher under test runs over a known-good graph: the exact 16-NN graph of a seeded
//! Gaussian mixture plus 8 seeded random long-range edges per vertex (degree 24, navigable from
//! anywhere), with the point nearest the mean as entry point.

use weft_core::rng::{SplitMix64, hash3};
use weft_core::{
    BuildCtx, DType, Dataset, DatasetView, Element, Error, FixedDegreeGraph, Metric, Neighbors,
    NeighborsMut, NodeId, SearchStats, Searcher,
};

use crate::graph::{
    CaseResult, Report, cases, gaussian_mixture, ground_truth, no_panic, recall_at_k,
};

/// Nearest neighbours per vertex in [`known_good_graph`].
const KNN: usize = 16;
/// Random edges per vertex in [`known_good_graph`].
const RANDOM: usize = 8;

/// A navigable search graph over `data`: each vertex's exact `16` nearest neighbours followed
/// by `8` distinct seeded random vertices (degree 24), entry point the point nearest to the mean.
pub fn known_good_graph<T: Element>(
    data: DatasetView<'_, T>,
    metric: Metric,
    seed: u64,
) -> FixedDegreeGraph {
    let n = data.rows();
    let k = KNN.min(n.saturating_sub(1));
    let mut lists: Vec<Vec<NodeId>> = if k > 0 {
        let knn = weft_exact::exact_knn_graph(data, metric, k, &BuildCtx::new(seed))
            .expect("exact k-NN graph");
        (0..n)
            .map(|v| {
                knn.row_ids(v)
                    .iter()
                    .copied()
                    .filter(|&u| u != weft_core::INVALID)
                    .collect()
            })
            .collect()
    } else {
        vec![Vec::new(); n]
    };
    for (v, list) in lists.iter_mut().enumerate() {
        let mut rng = SplitMix64::new(hash3(seed, v as u64, 0x6b67));
        let want = (list.len() + RANDOM).min(n - 1);
        let mut tries = 0;
        while list.len() < want && tries < 100 * RANDOM {
            tries += 1;
            let u = rng.below(n as u64) as NodeId;
            if u as usize != v && !list.contains(&u) {
                list.push(u);
            }
        }
    }
    let mut mean = vec![0f64; data.dim()];
    for row in data.iter() {
        for (m, x) in mean.iter_mut().zip(row) {
            *m += x.to_f32() as f64;
        }
    }
    let centre: Vec<T> = mean
        .iter()
        .map(|&s| T::from_f32((s / n.max(1) as f64) as f32))
        .collect();
    let l2 = Metric::L2Squared.distance_fn::<T>();
    let entry = (0..n)
        .min_by(|&a, &b| {
            l2.eval(data.row(a), &centre)
                .total_cmp(&l2.eval(data.row(b), &centre))
        })
        .unwrap_or(0) as NodeId;
    FixedDegreeGraph::from_lists(&lists, KNN + RANDOM)
        .expect("lists fit")
        .with_entry_points(vec![entry])
}

/// Options of [`run_search_suite`]. [`SearchSuite::new`] sets the defaults.
#[derive(Clone, Debug)]
pub struct SearchSuite<P> {
    /// Search parameters (must allow `k = 10`).
    pub params: P,
    /// Minimum recall@10 for L2 and cosine cases.
    pub min_recall: f64,
    /// Minimum recall@10 for inner-product cases (default: `min_recall / 2`).
    pub min_recall_ip: f64,
    /// Points per case (default 2000; 100 queries each).
    pub n: usize,
    /// Parameters that must be rejected with [`Error::InvalidParams`].
    pub invalid_params: Vec<P>,
}

impl<P> SearchSuite<P> {
    /// The default suite for `params` with recall threshold `min_recall`.
    pub fn new(params: P, min_recall: f64) -> Self {
        SearchSuite {
            params,
            min_recall,
            min_recall_ip: min_recall / 2.0,
            n: 2000,
            invalid_params: Vec::new(),
        }
    }
}

/// Runs the [`SearchSuite`] defaults for `searcher` with `params`: see [`run_search_suite`].
pub fn check_searcher<S: Searcher<FixedDegreeGraph>>(
    searcher: &S,
    params: S::Params,
    min_recall: f64,
) -> Report {
    run_search_suite(searcher, &SearchSuite::new(params, min_recall))
}

/// Runs `searcher` over `graph` with `params` for every row of `queries`, `k` neighbours each,
/// into a fresh [`Neighbors`]; returns it with the search's statistics.
pub fn run_search<G: ?Sized, S: Searcher<G>, T: Element>(
    searcher: &S,
    graph: &G,
    base: DatasetView<'_, T>,
    queries: DatasetView<'_, T>,
    metric: Metric,
    k: usize,
    params: &S::Params,
) -> weft_core::Result<(Neighbors, SearchStats)> {
    let mut out = Neighbors::new(queries.rows(), k);
    let stats = searcher.search(graph, base, queries, metric, params, out.as_mut())?;
    Ok((out, stats))
}

/// Checks the rows of one result set over `n` points: ids in range, no duplicates, distances
/// ascending, padding only at the end. Panics with a message naming `what` and the query.
pub fn check_result_rows(what: &str, res: &Neighbors, n: usize) {
    for q in 0..res.rows() {
        let (ids, dists) = (res.row_ids(q), res.row_dists(q));
        let valid = valid_len(ids);
        assert!(
            ids[valid..].iter().all(|&i| i == weft_core::INVALID),
            "{what}: query {q}: id after padding"
        );
        for j in 0..valid {
            let id = ids[j] as usize;
            assert!(id < n, "{what}: query {q}: id {id} out of range");
            assert!(
                !ids[..j].contains(&ids[j]),
                "{what}: query {q}: id {id} returned twice"
            );
            if j > 0 {
                assert!(
                    dists[j - 1] <= dists[j],
                    "{what}: query {q}: distances not ascending at {j}"
                );
            }
        }
    }
}

/// Checks one result set: [`check_result_rows`], and every distance equal to the metric's
/// distance between the query and the returned point (relative tolerance 1e-3).
pub fn check_results<T: Element>(
    what: &str,
    res: &Neighbors,
    base: DatasetView<'_, T>,
    queries: DatasetView<'_, T>,
    metric: Metric,
) {
    check_result_rows(what, res, base.rows());
    let dist = metric.distance_fn::<T>();
    for q in 0..res.rows() {
        let (ids, dists) = (res.row_ids(q), res.row_dists(q));
        for j in 0..valid_len(ids) {
            let id = ids[j] as usize;
            let d = dist.eval(queries.row(q), base.row(id));
            let tol = 1e-3 * (1.0 + d.abs());
            assert!(
                (d - dists[j]).abs() <= tol,
                "{what}: query {q}: reported distance {} for id {id}, recomputed {d}",
                dists[j]
            );
        }
    }
}

/// The number of ids before the first padding entry.
fn valid_len(ids: &[NodeId]) -> usize {
    ids.iter()
        .position(|&i| i == weft_core::INVALID)
        .unwrap_or(ids.len())
}

fn search_case<S: Searcher<FixedDegreeGraph>, T: Element>(
    searcher: &S,
    suite: &SearchSuite<S::Params>,
    dim: usize,
    metric: Metric,
    seed: u64,
) -> CaseResult {
    let name = format!("{} {} d={dim} {metric}", searcher.name(), T::DTYPE);
    let (base, queries): (Dataset<T>, Dataset<T>) = gaussian_mixture(suite.n, 100, dim, 12, seed);
    let graph = known_good_graph(base.view(), metric, seed);
    let truth = ground_truth(base.view(), queries.view(), metric, 10).expect("ground truth");
    let mut found = Neighbors::new(queries.rows(), 10);
    let stats = no_panic(&name, || {
        searcher.search(
            &graph,
            base.view(),
            queries.view(),
            metric,
            &suite.params,
            found.as_mut(),
        )
    })
    .unwrap_or_else(|e| panic!("{name}: search failed: {e}"));
    assert!(
        stats.queries == 0 || stats.queries == queries.rows() as u64,
        "{name}: stats count {} queries, ran {}",
        stats.queries,
        queries.rows()
    );
    check_results(&name, &found, base.view(), queries.view(), metric);
    let recall = recall_at_k(&found, &truth, 10);
    let min_recall = if metric == Metric::InnerProduct {
        suite.min_recall_ip
    } else {
        suite.min_recall
    };
    assert!(
        recall >= min_recall,
        "{name}: recall@10 {recall:.4} below {min_recall}"
    );
    // Same inputs, same answer.
    let mut again = Neighbors::new(queries.rows(), 10);
    searcher
        .search(
            &graph,
            base.view(),
            queries.view(),
            metric,
            &suite.params,
            again.as_mut(),
        )
        .expect("second search");
    assert_eq!(
        found.ids, again.ids,
        "{name}: two identical searches differ"
    );
    CaseResult {
        name,
        recall,
        min_recall,
    }
}

/// The searcher suite: for every case of f32 (d in {8, 32, 128}, every metric), `u8` and `f16`,
/// searches 100 queries (k = 10) over [`known_good_graph`] and checks that results are in range,
/// unique, ascending, carry the metric's distances, reach the recall threshold and repeat
/// exactly; then that a query dimension mismatch, a wrong output shape, `k` above the number of
/// points, empty data and the `invalid_params` are rejected with typed errors, never a panic.
pub fn run_search_suite<S: Searcher<FixedDegreeGraph>>(
    searcher: &S,
    suite: &SearchSuite<S::Params>,
) -> Report {
    let mut report = Report::default();
    for (i, (dtype, dim, metric)) in cases().into_iter().enumerate() {
        let seed = 2000 + i as u64;
        let case = match dtype {
            DType::U8 => search_case::<S, u8>(searcher, suite, dim, metric, seed),
            DType::I8 => search_case::<S, i8>(searcher, suite, dim, metric, seed),
            DType::F16 => search_case::<S, half::f16>(searcher, suite, dim, metric, seed),
            _ => search_case::<S, f32>(searcher, suite, dim, metric, seed),
        };
        report.cases.push(case);
    }

    let name = searcher.name();
    let p = &suite.params;
    let (base, queries) = gaussian_mixture::<f32>(200, 5, 8, 4, 9);
    let graph = known_good_graph(base.view(), Metric::L2Squared, 9);
    let (_, queries4) = gaussian_mixture::<f32>(1, 5, 4, 4, 9);

    let typed = |what: &str,
                 r: weft_core::Result<weft_core::SearchStats>,
                 ok: fn(&Error) -> bool| {
        match r {
            Err(e) if ok(&e) => {}
            other => panic!("{name}: {what}: expected a typed error, got {other:?}"),
        }
    };

    let mut out = Neighbors::new(5, 10);
    let r = no_panic("dimension mismatch", || {
        searcher.search(
            &graph,
            base.view(),
            queries4.view(),
            Metric::L2Squared,
            p,
            out.as_mut(),
        )
    });
    typed("query dimension mismatch", r, |e| {
        matches!(e, Error::DimensionMismatch { .. })
    });

    let mut out = Neighbors::new(4, 10);
    let r = no_panic("output rows", || {
        searcher.search(
            &graph,
            base.view(),
            queries.view(),
            Metric::L2Squared,
            p,
            out.as_mut(),
        )
    });
    typed("output rows != queries", r, |e| {
        matches!(e, Error::DimensionMismatch { .. } | Error::InvalidInput(_))
    });

    let small = base.view().slice_rows(0..8).expect("rows");
    let small_graph = known_good_graph(small, Metric::L2Squared, 9);
    let mut out = Neighbors::new(5, 10);
    let r = no_panic("k > n", || {
        searcher.search(
            &small_graph,
            small,
            queries.view(),
            Metric::L2Squared,
            p,
            out.as_mut(),
        )
    });
    typed("k above the number of points", r, |e| {
        matches!(e, Error::InvalidParams { .. } | Error::InvalidInput(_))
    });

    let empty: Vec<f32> = Vec::new();
    let empty_view = DatasetView::new(&empty, 0, 8).expect("view");
    let empty_graph = FixedDegreeGraph::new(0, 4, Vec::new()).expect("graph");
    let mut out = Neighbors::new(5, 10);
    let r = no_panic("empty data", || {
        searcher.search(
            &empty_graph,
            empty_view,
            queries.view(),
            Metric::L2Squared,
            p,
            out.as_mut(),
        )
    });
    typed("empty data", r, |e| {
        matches!(e, Error::InvalidInput(_) | Error::InvalidParams { .. })
    });

    // Zero queries is not an error.
    let none = queries.view().slice_rows(0..0).expect("rows");
    let (mut ids, mut dists) = (Vec::new(), Vec::new());
    let out = NeighborsMut::new(&mut ids, &mut dists, 10).expect("buffers");
    no_panic("no queries", || {
        searcher.search(&graph, base.view(), none, Metric::L2Squared, p, out)
    })
    .unwrap_or_else(|e| panic!("{name}: zero queries must succeed: {e}"));

    for bad in &suite.invalid_params {
        let mut out = Neighbors::new(5, 10);
        let r = no_panic("invalid params", || {
            searcher.search(
                &graph,
                base.view(),
                queries.view(),
                Metric::L2Squared,
                bad,
                out.as_mut(),
            )
        });
        typed(&format!("invalid params {bad:?}"), r, |e| {
            matches!(e, Error::InvalidParams { .. })
        });
    }
    report
}

#[cfg(test)]
mod tests {
    use super::*;
    use weft_core::{NoParams, SearchStats};

    /// A searcher that returns the first k ids, unsorted by distance.
    struct Bogus;
    impl Searcher<FixedDegreeGraph> for Bogus {
        type Params = NoParams;
        fn name(&self) -> &'static str {
            "bogus"
        }
        fn search<T: Element>(
            &self,
            _graph: &FixedDegreeGraph,
            data: DatasetView<'_, T>,
            queries: DatasetView<'_, T>,
            metric: Metric,
            _params: &NoParams,
            mut out: NeighborsMut<'_>,
        ) -> weft_core::Result<SearchStats> {
            data.check_same_dim(&queries, "dims")?;
            let k = out.k();
            weft_core::error::check_k(k, data.rows())?;
            let dist = metric.distance_fn::<T>();
            for q in 0..out.rows() {
                let (ids, dists) = out.row_mut(q);
                for j in 0..k {
                    ids[j] = j as NodeId;
                    dists[j] = dist.eval(queries.row(q), data.row(j));
                }
            }
            Ok(SearchStats::default())
        }
    }

    #[test]
    fn the_suite_fails_a_bogus_searcher() {
        let r = std::panic::catch_unwind(|| check_searcher(&Bogus, NoParams {}, 0.5));
        assert!(r.is_err());
    }
}
