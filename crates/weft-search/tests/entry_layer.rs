//! The entry layer of the beam search: built correctly, deterministic, and on clustered data as
//! good as scoring every entry point at a fraction of the distance evaluations.

use proptest::prelude::*;
use weft_core::{
    BuildCtx, Dataset, Error, FixedDegreeGraph, GraphView, Metric, Neighbors, NodeId, SearchStats,
    Searcher,
};
mod common;

use common::search;
use weft_graph::connect::spread_entry_points;
use weft_search::{
    BeamSearch, BeamSearchParams, BeamSearchTuning, EntryLayer, EntryLayerParams, EntryPoints,
    SearchInputs,
};
use weft_testkit::graph::clustered_set;

/// The exact k-NN graph of `base` as a fixed-degree graph (no entry points): on clustered data
/// one component per cluster, so a query entered in the wrong cluster is stranded.
fn knn_graph(base: &Dataset<f32>, k: usize) -> FixedDegreeGraph {
    let g =
        weft_exact::exact_knn_graph(base.view(), Metric::L2Squared, k, &BuildCtx::new(0)).unwrap();
    let lists: Vec<Vec<NodeId>> = (0..base.rows())
        .map(|v| g.neighbors(v as NodeId).to_vec())
        .collect();
    FixedDegreeGraph::from_lists(&lists, k).unwrap()
}

/// Recall@k of `found` against the exact neighbours of `queries`.
fn recall(found: &Neighbors, base: &Dataset<f32>, queries: &Dataset<f32>, k: usize) -> f64 {
    let truth = weft_exact::exact_search(
        base.view(),
        queries.view(),
        Metric::L2Squared,
        k,
        &BuildCtx::new(0),
    )
    .unwrap();
    weft_exact::recall::search_recall_exact(found, &truth, k, weft_exact::recall::Ties::Distance)
        .unwrap()
        .mean
}

/// Fixed spread entry points, with the layer (`Some`) or without it (`None`: disabled).
fn params(ids: &[NodeId], l: usize, layer: Option<EntryLayerParams>) -> BeamSearchParams {
    BeamSearchParams {
        entry_points: EntryPoints::Fixed { ids: ids.to_vec() },
        tuning: BeamSearchTuning {
            entry_layer: layer.unwrap_or_else(EntryLayerParams::disabled),
            ..BeamSearchTuning::default()
        },
        ..BeamSearchParams::with_beam_width(l)
    }
}

/// Everything reachable from local vertex 0 of `layer`.
fn reachable(layer: &EntryLayer) -> usize {
    let e = layer.ids().len();
    let mut seen = vec![false; e];
    let mut stack = vec![0usize];
    seen[0] = true;
    while let Some(v) = stack.pop() {
        for &u in layer.neighbors(v) {
            if !seen[u as usize] {
                seen[u as usize] = true;
                stack.push(u as usize);
            }
        }
    }
    seen.iter().filter(|&&s| s).count()
}

#[test]
fn layer_matches_scoring_every_entry_point_on_clustered_sets() {
    // weft-testkit's clustered set (40 clusters, 32-d) and weft-io's clustered preset (100
    // clusters, 128-d, 4 diameters apart), each searched on its exact 10-NN graph (one component
    // per cluster) from 256 spread entry points.
    let spec = weft_io::SyntheticSpec::clustered(100, 4.0)
        .generator(3)
        .unwrap();
    let sets = [
        clustered_set(4000, 17),
        (spec.base(6000).unwrap(), spec.queries(200).unwrap()),
    ];
    for (base, queries) in &sets {
        let graph = knn_graph(base, 16);
        let ids = spread_entry_points(base.view(), Metric::L2Squared, 256, 0).unwrap();
        for l in [32, 64] {
            let (all, all_stats) = search(&graph, base, queries, &params(&ids, l, None), 10);
            let layered = params(&ids, l, Some(EntryLayerParams::default()));
            let (found, stats) = search(&graph, base, queries, &layered, 10);
            let (r_all, r) = (
                recall(&all, base, queries, 10),
                recall(&found, base, queries, 10),
            );
            eprintln!(
                "dim {} L={l}: all entries {r_all:.4} ({} distances), layer {r:.4} ({})",
                base.dim(),
                all_stats.distance_computations,
                stats.distance_computations
            );
            assert!(
                r_all >= 0.99,
                "dim {} L={l}: all entries {r_all}",
                base.dim()
            );
            assert!(
                r >= r_all - 0.005,
                "dim {} L={l}: layer {r} against all entries {r_all}",
                base.dim()
            );
            assert!(
                stats.distance_computations + 100 * queries.rows() as u64
                    <= all_stats.distance_computations,
                "dim {} L={l}: the layer saves fewer than 100 of 256 entry distances per query \
                 ({} against {})",
                base.dim(),
                stats.distance_computations,
                all_stats.distance_computations
            );
        }
    }
}

#[test]
fn layer_results_are_independent_of_batch_and_threads_and_reproducible() {
    let (base, queries) = clustered_set(3000, 5);
    let graph = knn_graph(&base, 8);
    let ids = spread_entry_points(base.view(), Metric::L2Squared, 200, 9).unwrap();
    let p = params(&ids, 24, Some(EntryLayerParams::default()));
    let run = |threads: usize, queries: &Dataset<f32>| {
        BuildCtx::new(0)
            .with_threads(Some(threads))
            .install(|| search(&graph, &base, queries, &p, 10).0)
            .unwrap()
    };
    let one = run(1, &queries);
    assert_eq!(one, run(2, &queries));
    assert_eq!(one, run(3, &queries));
    // Split into two batches of different sizes: each query's answer is the same.
    let split = 77;
    let head = Dataset::from_vec(queries.as_slice()[..split * 32].to_vec(), split, 32).unwrap();
    let tail = Dataset::from_vec(
        queries.as_slice()[split * 32..].to_vec(),
        queries.rows() - split,
        32,
    )
    .unwrap();
    let (a, b) = (run(2, &head), run(1, &tail));
    for q in 0..queries.rows() {
        let (ids, dists) = if q < split {
            (a.row_ids(q), a.row_dists(q))
        } else {
            (b.row_ids(q - split), b.row_dists(q - split))
        };
        assert_eq!(ids, one.row_ids(q), "query {q}");
        assert_eq!(dists, one.row_dists(q), "query {q}");
    }
    // A prepared layer gives the same answers as one built by the call.
    let layer = BeamSearch::entry_layer_for(base.view(), Metric::L2Squared, &ids, &p)
        .unwrap()
        .expect("200 entry points use the layer");
    let mut out = Neighbors::new(queries.rows(), 10);
    let inputs = SearchInputs {
        graph: &graph,
        data: base.view(),
        queries: queries.view(),
    };
    BeamSearch
        .search_with_entry_layer(inputs, Metric::L2Squared, &p, Some(&layer), out.as_mut())
        .unwrap();
    assert_eq!(out, one);
}

#[test]
fn layer_is_used_only_where_asked_and_checked_against_the_search() {
    let (base, queries) = clustered_set(1000, 2);
    let graph = knn_graph(&base, 8);
    let ids = spread_entry_points(base.view(), Metric::L2Squared, 100, 0).unwrap();
    let dflt = EntryLayerParams::default();
    // Below min_entries: every entry point is scored, exactly as without the layer.
    let few = &ids[..dflt.min_entries - 1];
    assert_eq!(
        search(&graph, &base, &queries, &params(few, 16, Some(dflt)), 10),
        search(&graph, &base, &queries, &params(few, 16, None), 10)
    );
    let p = params(&ids, 16, Some(dflt));
    assert!(
        BeamSearch::entry_layer_for(base.view(), Metric::L2Squared, few, &p)
            .unwrap()
            .is_none()
    );
    // A layer over other entry points, or for another metric, is refused.
    let other = EntryLayer::build(base.view(), Metric::L2Squared, &ids[..80], &dflt).unwrap();
    let cosine = EntryLayer::build(base.view(), Metric::Cosine, &ids, &dflt).unwrap();
    for layer in [&other, &cosine] {
        let mut out = Neighbors::new(queries.rows(), 10);
        let inputs = SearchInputs {
            graph: &graph,
            data: base.view(),
            queries: queries.view(),
        };
        let r = BeamSearch.search_with_entry_layer(
            inputs,
            Metric::L2Squared,
            &p,
            Some(layer),
            out.as_mut(),
        );
        assert!(matches!(r, Err(Error::InvalidInput(_))), "{r:?}");
    }
    // Invalid parameters are refused, never adjusted.
    for bad in [
        EntryLayerParams {
            min_entries: 1,
            ..dflt
        },
        EntryLayerParams { degree: 0, ..dflt },
        EntryLayerParams {
            beam_width: 0,
            ..dflt
        },
    ] {
        let mut out = Neighbors::new(queries.rows(), 10);
        let r = BeamSearch.search(
            &graph,
            base.view(),
            queries.view(),
            Metric::L2Squared,
            &params(&ids, 16, Some(bad)),
            out.as_mut(),
        );
        assert!(matches!(r, Err(Error::InvalidParams { .. })), "{r:?}");
        assert!(EntryLayer::build(base.view(), Metric::L2Squared, &ids, &bad).is_err());
    }
    assert!(EntryLayer::build(base.view(), Metric::L2Squared, &[], &dflt).is_err());
    assert!(EntryLayer::build(base.view(), Metric::L2Squared, &[5000], &dflt).is_err());
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    /// Any entry list (repeats included) gives a layer over its distinct ids, connected from the
    /// first, built the same on any thread count; with a layer beam as large as the list every
    /// entry point is scored, so the answers match scoring them all.
    #[test]
    fn layer_is_connected_deterministic_and_exhaustive_at_full_beam(
        seed in 0u64..1000,
        n in 40usize..300,
        picks in proptest::collection::vec(0usize..1000, 2..120),
        degree in 1usize..12,
    ) {
        let (base, queries) = clustered_set(n, seed);
        let ids: Vec<NodeId> = picks.iter().map(|&p| (p % n) as NodeId).collect();
        let lp = EntryLayerParams { min_entries: 2, degree, beam_width: 4, ..EntryLayerParams::default() };
        let build = |threads| {
            BuildCtx::new(0)
                .with_threads(Some(threads))
                .install(|| EntryLayer::build(base.view(), Metric::L2Squared, &ids, &lp))
                .unwrap()
                .unwrap()
        };
        let layer = build(1);
        prop_assert_eq!(&layer, &build(2));
        let mut distinct = ids.clone();
        distinct.sort_unstable();
        distinct.dedup();
        let mut got = layer.ids().to_vec();
        prop_assert_eq!(got[0], ids[0]);
        got.sort_unstable();
        prop_assert_eq!(&got, &distinct);
        prop_assert_eq!(reachable(&layer), layer.ids().len());
        for v in 0..layer.ids().len() {
            prop_assert!(layer.neighbors(v).iter().all(|&u| (u as usize) < layer.ids().len() && u as usize != v));
        }

        let k = 5.min(n - 1);
        let full = EntryLayerParams { beam_width: distinct.len(), ..lp };
        let (all, _) = search_generic(&base, &queries, &ids, None, k);
        let (found, _) = search_generic(&base, &queries, &ids, Some(full), k);
        // The same candidates, up to rounding of the distance kernels.
        for q in 0..queries.rows() {
            for (a, b) in all.row_dists(q).iter().zip(found.row_dists(q)) {
                prop_assert!((a - b).abs() <= 1e-3 * (1.0 + a.abs()), "query {}: {} vs {}", q, a, b);
            }
        }
    }
}

/// A beam search over the exact 4-NN graph of `base` (L = 16) from `ids`.
fn search_generic(
    base: &Dataset<f32>,
    queries: &Dataset<f32>,
    ids: &[NodeId],
    layer: Option<EntryLayerParams>,
    k: usize,
) -> (Neighbors, SearchStats) {
    let graph = knn_graph(base, 4.min(base.rows() - 1));
    search(&graph, base, queries, &params(ids, 16, layer), k)
}
