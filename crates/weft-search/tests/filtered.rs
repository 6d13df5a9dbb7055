//! Filtered search on the CPU: the beam search, the GGNN search and the exact search with a
//! `Filter`, against the exact filtered ground truth (`exact_search_filtered`, itself checked
//! against a plain scan), on random and strongly clustered data. Hard properties: only allowed
//! ids, no duplicates, ascending distances, padding (`INVALID`, `+inf`) when fewer than k
//! allowed points exist, an empty filter gives padding only, a filter of the wrong length is a
//! typed error.

mod common;

use proptest::prelude::*;
use weft_core::Filter;
use weft_core::{Dataset, Error, INVALID, Metric, Neighbors, NodeId};
use weft_exact::exact_search_filtered;
use weft_search::{BeamSearch, BeamSearchParams, FILTER_EXACT_PER_L, GgnnSearch, GgnnSearchParams};
use weft_testkit::graph::{clustered_set, gaussian_mixture, recall_at_k};
use weft_testkit::search::{known_good_graph, run_search};

use common::check_filtered;

fn exact(
    base: &Dataset<f32>,
    queries: &Dataset<f32>,
    m: Metric,
    k: usize,
    f: &Filter,
) -> Neighbors {
    let mut out = Neighbors::new(queries.rows(), k);
    exact_search_filtered(base.view(), queries.view(), m, f, out.as_mut()).unwrap();
    out
}

/// The smallest beam width the GGNN search runs at in [`filtered_recalls`].
const GGNN_MIN_BEAM: usize = 54;

/// A seeded random filter allowing about `frac` of `n` ids.
fn random_filter(n: usize, frac: f64, seed: u64) -> Filter {
    Filter::from_predicate(n, |i| {
        (weft_core::rng::hash3(seed, i as u64, 0xf1) % 10_000) as f64 / 10_000.0 < frac
    })
}

#[test]
fn exact_filtered_equals_a_plain_scan_and_pads() {
    let (base, queries) = gaussian_mixture::<f32>(500, 20, 8, 3, 1);
    let filter = random_filter(500, 0.1, 2);
    let k = 10;
    let found = exact(&base, &queries, Metric::L2Squared, k, &filter);
    let dist = Metric::L2Squared.distance_fn::<f32>();
    for q in 0..queries.rows() {
        let mut all: Vec<(f32, NodeId)> = filter
            .ids()
            .map(|i| (dist.eval(queries.row(q), base.row(i as usize)), i))
            .collect();
        all.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
        let want: Vec<NodeId> = all.iter().take(k).map(|p| p.1).collect();
        assert_eq!(found.row_ids(q), &want[..]);
    }
    // Three allowed ids, k = 10: those three, then padding; none allowed: padding only.
    let three = Filter::from_ids(500, &[7, 300, 42]).unwrap();
    let found = exact(&base, &queries, Metric::L2Squared, k, &three);
    assert_eq!(check_filtered("exact", &found, &three), 3 * queries.rows());
    for q in 0..queries.rows() {
        let mut got = found.row_ids(q)[..3].to_vec();
        got.sort_unstable();
        assert_eq!(got, [7, 42, 300]);
    }
    let none = exact(&base, &queries, Metric::L2Squared, k, &Filter::none(500));
    assert!(none.ids.iter().all(|&i| i == INVALID));
    assert!(none.dists.iter().all(|&d| d == f32::INFINITY));
}

#[test]
fn a_filter_of_the_wrong_length_is_a_typed_error() {
    let (base, queries) = gaussian_mixture::<f32>(300, 5, 4, 2, 3);
    let graph = known_good_graph(base.view(), Metric::L2Squared, 3);
    let wrong = Filter::all(299);
    let is_filter_error = |r: weft_core::Result<_>| matches!(r, Err(Error::InvalidParams { name, .. }) if name == "filter");
    let beam = BeamSearchParams {
        filter: Some(wrong.clone()),
        ..BeamSearchParams::with_beam_width(32)
    };
    let r = run_search(
        &BeamSearch,
        &graph,
        base.view(),
        queries.view(),
        Metric::L2Squared,
        5,
        &beam,
    );
    assert!(is_filter_error(r.map(|_| ())));
    let ggnn = GgnnSearchParams {
        filter: Some(wrong.clone()),
        ..Default::default()
    };
    let r = run_search(
        &GgnnSearch,
        &graph,
        base.view(),
        queries.view(),
        Metric::L2Squared,
        5,
        &ggnn,
    );
    assert!(is_filter_error(r.map(|_| ())));
    let mut out = Neighbors::new(queries.rows(), 5);
    let r = exact_search_filtered(
        base.view(),
        queries.view(),
        Metric::L2Squared,
        &wrong,
        out.as_mut(),
    );
    assert!(is_filter_error(r.map(|_| ())));
}

/// Runs the three CPU searches with `filter` and checks the hard properties; returns the
/// recalls of the beam search and the GGNN search against the exact filtered truth (as a
/// fraction of the truth's own recall, which padding keeps below 1 when fewer than `k` ids are
/// allowed).
///
/// The GGNN search runs at beam width `l`, at least [`GGNN_MIN_BEAM`].
fn filtered_recalls(
    base: &Dataset<f32>,
    queries: &Dataset<f32>,
    metric: Metric,
    k: usize,
    l: usize,
    filter: &Filter,
    seed: u64,
) -> (f64, f64) {
    let graph = known_good_graph(base.view(), metric, seed);
    let truth = exact(base, queries, metric, k, filter);
    let wanted = filter.count().min(k) * queries.rows();
    assert_eq!(check_filtered("exact", &truth, filter), wanted);
    let beam = BeamSearchParams {
        filter: Some(filter.clone()),
        ..BeamSearchParams::with_beam_width(l)
    };
    let (found, _) = run_search(
        &BeamSearch,
        &graph,
        base.view(),
        queries.view(),
        metric,
        k,
        &beam,
    )
    .unwrap();
    check_filtered("beam", &found, filter);
    let ggnn = GgnnSearchParams {
        filter: Some(filter.clone()),
        beam_width: l.max(GGNN_MIN_BEAM),
        ..Default::default()
    };
    let (g, _) = run_search(
        &GgnnSearch,
        &graph,
        base.view(),
        queries.view(),
        metric,
        k,
        &ggnn,
    )
    .unwrap();
    check_filtered("ggnn", &g, filter);
    // Recall relative to the truth's own (below 1 when fewer than k ids are allowed: padding).
    let best = recall_at_k(&truth, &truth, k);
    (
        recall_at_k(&found, &truth, k) / best,
        recall_at_k(&g, &truth, k) / best,
    )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 12, ..ProptestConfig::default() })]

    /// Random data and random filters large enough that both searches walk the graph
    /// (more than `FILTER_EXACT_PER_L` times either beam width allowed ids): only allowed ids,
    /// no duplicates, and recall@10 against the exact filtered truth.
    #[test]
    fn filtered_graph_searches_find_the_allowed_neighbours(
        n in 1500usize..3000,
        dim in 4usize..24,
        clusters in 1usize..5,
        frac in prop::sample::select(vec![0.3f64, 0.5, 0.8]),
        metric_i in 0usize..3,
        seed in 0u64..1000,
    ) {
        let metric = [Metric::L2Squared, Metric::InnerProduct, Metric::Cosine][metric_i];
        let (base, queries) = gaussian_mixture::<f32>(n, 40, dim, clusters, seed);
        let filter = random_filter(n, frac, seed);
        let l = 32;
        prop_assume!(filter.count() > FILTER_EXACT_PER_L * l.max(GGNN_MIN_BEAM));
        let (rb, rg) = filtered_recalls(&base, &queries, metric, 10, l, &filter, seed);
        let min = if metric == Metric::InnerProduct { 0.5 } else { 0.75 };
        prop_assert!(rb >= min, "beam recall {} ({:?}, {} allowed)", rb, metric, filter.count());
        // The GGNN search stops on its unfiltered best list (default 10), of which only the
        // allowed part is kept: lower recall with the defaults.
        let min = min - 0.25;
        prop_assert!(rg >= min, "ggnn recall {} ({:?}, {} allowed)", rg, metric, filter.count());
    }

    /// Selective random filters (1% to 5% of the ids): the beam and the GGNN searches score
    /// the allowed ids exactly (recall 1).
    #[test]
    fn selective_filters_are_exact_in_the_graph_searches(
        n in 500usize..3000,
        frac in prop::sample::select(vec![0.01f64, 0.05]),
        k in 1usize..20,
        seed in 0u64..1000,
    ) {
        let (base, queries) = gaussian_mixture::<f32>(n, 30, 8, 3, seed);
        let filter = random_filter(n, frac, seed ^ 9);
        let (rb, rg) = filtered_recalls(&base, &queries, Metric::L2Squared, k.min(n), 64, &filter, seed);
        prop_assert!(rb == 1.0, "beam recall {}", rb);
        prop_assert!(rg == 1.0, "ggnn recall {}", rg);
    }
}

/// Strongly clustered data (40 clusters far apart), a filter allowing exactly one cluster (the
/// points near point 0). Queries inside that cluster: the graph searches (beam width small
/// enough that the beam search walks the graph) find their allowed neighbours. Queries from
/// every cluster: a graph search that stays in its own cluster cannot find allowed points in
/// another, so a filter this small is answered exactly by the beam search (recall 1) once
/// `FILTER_EXACT_PER_L * l` covers it; a 1% random filter likewise.
#[test]
fn clustered_data_one_allowed_cluster() {
    let n = 12_000;
    let (base, queries) = clustered_set(n, 4);
    let dist = Metric::L2Squared.distance_fn::<f32>();
    // A cluster's points lie about 8 apart, clusters about 24: radius 12 around point 0.
    let one = Filter::from_predicate(n, |i| dist.eval(base.row(0), base.row(i)) < 144.0);
    assert!(one.count() > FILTER_EXACT_PER_L * 16, "{}", one.count());
    // Queries near allowed points: allowed rows moved by N(0, 0.5^2) per coordinate.
    let mut rng = weft_core::rng::SplitMix64::new(11);
    let inside: Vec<f32> = one
        .ids()
        .take(60)
        .flat_map(|i| base.row(i as usize).to_vec())
        .map(|x| x + 0.5 * rng.next_gaussian() as f32)
        .collect();
    let inside = Dataset::from_vec(inside, 60, base.dim()).unwrap();
    // The widest beam that still walks the graph.
    let l = (one.count() - 1) / FILTER_EXACT_PER_L;
    let (rb, rg) = filtered_recalls(&base, &inside, Metric::L2Squared, 10, l, &one, 4);
    println!(
        "one cluster ({} ids), queries inside, l = {l}: beam {rb}, ggnn {rg}",
        one.count()
    );
    assert!(rb >= 0.85, "beam recall {rb}");
    assert!(rg >= 0.9, "ggnn recall {rg}");
    let l = one.count().div_ceil(FILTER_EXACT_PER_L);
    let (rb, rg) = filtered_recalls(&base, &queries, Metric::L2Squared, 10, l, &one, 4);
    assert_eq!((rb, rg), (1.0, 1.0));
    let sparse = random_filter(n, 0.01, 5);
    let (rb, rg) = filtered_recalls(&base, &queries, Metric::L2Squared, 10, 64, &sparse, 4);
    println!("1% ({} ids): beam {rb}, ggnn {rg}", sparse.count());
    assert_eq!((rb, rg), (1.0, 1.0));
}

#[test]
fn fewer_allowed_than_k_pads_and_none_allowed_is_all_padding() {
    let n = 2000;
    let (base, queries) = gaussian_mixture::<f32>(n, 25, 8, 2, 6);
    let graph = known_good_graph(base.view(), Metric::L2Squared, 6);
    let k = 10;
    let few = Filter::from_ids(n, &[5, 1500, 999, 5]).unwrap();
    for filter in [few, Filter::none(n)] {
        let beam = BeamSearchParams {
            filter: Some(filter.clone()),
            ..BeamSearchParams::with_beam_width(16)
        };
        let (found, _) = run_search(
            &BeamSearch,
            &graph,
            base.view(),
            queries.view(),
            Metric::L2Squared,
            k,
            &beam,
        )
        .unwrap();
        // The beam search scores a filter this small exactly: every allowed id, then padding.
        assert_eq!(
            check_filtered("beam", &found, &filter),
            filter.count() * queries.rows()
        );
        let ggnn = GgnnSearchParams {
            filter: Some(filter.clone()),
            ..Default::default()
        };
        let (g, _) = run_search(
            &GgnnSearch,
            &graph,
            base.view(),
            queries.view(),
            Metric::L2Squared,
            k,
            &ggnn,
        )
        .unwrap();
        // So does the GGNN search.
        assert_eq!(
            check_filtered("ggnn", &g, &filter),
            filter.count() * queries.rows()
        );
        for q in 0..queries.rows() {
            assert!(g.row_ids(q)[filter.count()..].iter().all(|&i| i == INVALID));
        }
    }
}

#[test]
fn an_all_allowing_filter_changes_nothing_in_the_ggnn_search() {
    // GGNN's traversal is the unfiltered one; with every id allowed its result list holds the
    // best k scored, which is what the unfiltered best list returns.
    let (base, queries) = gaussian_mixture::<f32>(1500, 30, 12, 3, 8);
    let graph = known_good_graph(base.view(), Metric::L2Squared, 8);
    let plain = GgnnSearchParams::default();
    let all = GgnnSearchParams {
        filter: Some(Filter::all(1500)),
        ..Default::default()
    };
    let (a, _) = run_search(
        &GgnnSearch,
        &graph,
        base.view(),
        queries.view(),
        Metric::L2Squared,
        10,
        &plain,
    )
    .unwrap();
    let (b, _) = run_search(
        &GgnnSearch,
        &graph,
        base.view(),
        queries.view(),
        Metric::L2Squared,
        10,
        &all,
    )
    .unwrap();
    let truth = exact(&base, &queries, Metric::L2Squared, 10, &Filter::all(1500));
    assert!(recall_at_k(&b, &truth, 10) >= recall_at_k(&a, &truth, 10) - 1e-9);
}
