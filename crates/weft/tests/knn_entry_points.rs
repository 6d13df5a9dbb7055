//! A k-NN graph is not a search graph: on strongly clustered data it falls apart into one
//! component per cluster. `Index` searches it from entry points spread over the data (the search
//! graphs' mechanism), computed once per index and seed, instead of one random vertex per query.

use std::sync::Arc;

use weft::core::Searcher;
use weft::core::rng::SplitMix64;
use weft::graph::connect::{DEFAULT_ENTRY_POINTS, spread_entry_points};
use weft::graph::storage::GraphKind;
use weft::index::EntrySource;
use weft::search::{BeamSearch, BeamSearchParams, EntryPoints};
use weft::{Backend, BuildCtx, Dataset, Index, Metric, Neighbors, SearchParams};

/// A Gaussian mixture as `weft_testkit::graph::gaussian_mixture` draws it: `clusters` centres
/// N(0, 9) per coordinate, unit spread around them (at d = 32 the clusters are far apart:
/// centres ~24 apart, diameters ~8), base and queries from the same clusters.
fn gaussian_mixture(
    n: usize,
    nq: usize,
    dim: usize,
    clusters: usize,
    seed: u64,
) -> (Dataset<f32>, Dataset<f32>) {
    let mut rng = SplitMix64::new(seed);
    let centres: Vec<f32> = (0..clusters * dim)
        .map(|_| 3.0 * rng.next_gaussian() as f32)
        .collect();
    let mut draw = |rows: usize| {
        let mut v = Vec::with_capacity(rows * dim);
        for _ in 0..rows {
            let c = rng.below(clusters as u64) as usize;
            for j in 0..dim {
                v.push(centres[c * dim + j] + rng.next_gaussian() as f32);
            }
        }
        Dataset::from_vec(v, rows, dim).unwrap()
    };
    let base = draw(n);
    let queries = draw(nq);
    (base, queries)
}

/// A clustered base of 6,000 x 32 (30 clusters), 200 queries, their exact 10 nearest and an
/// nndescent k-NN graph index of the base (k = 16).
fn clustered_knn_index(
    seed: u64,
    ctx: &BuildCtx,
) -> (Dataset<f32>, Dataset<f32>, Neighbors, Index) {
    let (base, queries) = gaussian_mixture(6000, 200, 32, 30, seed);
    let truth =
        weft::exact::exact_search(base.view(), queries.view(), Metric::L2Squared, 10, ctx).unwrap();
    let index = Index::build_from_view(
        base.view(),
        Metric::L2Squared,
        "nndescent",
        &serde_json::json!({}),
        Some(16),
        ctx,
    )
    .unwrap();
    (base, queries, truth, index)
}

fn recall(found: &Neighbors, truth: &Neighbors) -> f64 {
    weft::exact::recall::search_recall(found, &truth.ids, truth.k(), 10)
        .unwrap()
        .mean
}

#[test]
fn knn_graph_of_clustered_data_is_searched_from_spread_entry_points() {
    let ctx = BuildCtx::new(3);
    let (base, queries, truth, index) = clustered_knn_index(7, &ctx);
    assert_eq!(index.graph_kind(), GraphKind::Knn);
    assert!(index.graph().as_view().entry_points().is_empty());

    // The entry points: spread ones, computed once per seed and kept. (The CPU search,
    // compared with the beam search's own below.)
    let params = SearchParams::with_beam_width(64).with_backend(Backend::Cpu);
    let entries = index.search_entry_points(params.seed).unwrap();
    assert_eq!(entries.source, EntrySource::Spread { seed: 0 });
    assert_eq!(entries.ids.len(), DEFAULT_ENTRY_POINTS);
    let want =
        spread_entry_points(base.view(), Metric::L2Squared, DEFAULT_ENTRY_POINTS, 0).unwrap();
    assert_eq!(&entries.ids[..], &want[..]);
    assert!(Arc::ptr_eq(
        &entries.ids,
        &index.search_entry_points(0).unwrap().ids
    ));

    // Spread entry points against what a search gets without them: one seeded random vertex
    // per query (the beam search's fallback for a graph without entry points).
    let spread = index.search(queries.view(), 10, &params).unwrap();
    assert_eq!(spread.backend, "cpu");
    let r_spread = recall(&spread.neighbors, &truth);
    let mut random = Neighbors::new(queries.rows(), 10);
    ctx.install(|| {
        BeamSearch.search(
            index.graph().as_view(),
            base.view(),
            queries.view(),
            Metric::L2Squared,
            &BeamSearchParams {
                entry_points: EntryPoints::Graph,
                ..BeamSearchParams::with_beam_width(64)
            },
            random.as_mut(),
        )
    })
    .unwrap()
    .unwrap();
    let r_random = recall(&random, &truth);
    println!(
        "k-NN graph, 30 clusters, L = 64: recall@10 {r_spread:.4} from spread entry points, {r_random:.4} from one random entry"
    );
    assert!(
        r_spread >= 0.95,
        "spread entry points: recall@10 {r_spread}"
    );
    assert!(
        r_random + 0.5 < r_spread,
        "one random entry: recall@10 {r_random}, spread {r_spread}"
    );

    // A query's answer does not depend on its batch, and a seed repeats.
    let few = Dataset::from_vec(queries.as_slice()[..7 * 32].to_vec(), 7, 32).unwrap();
    let alone = index.search(few.view(), 10, &params).unwrap();
    assert_eq!(alone.neighbors.ids, spread.neighbors.ids[..70]);
    assert_eq!(
        index.search(queries.view(), 10, &params).unwrap().neighbors,
        spread.neighbors
    );
    // Another seed: the points of that seed, computed again (a clone keeps the cache).
    let other = SearchParams {
        seed: 9,
        ..params.clone()
    };
    let r_other = recall(
        &index.search(queries.view(), 10, &other).unwrap().neighbors,
        &truth,
    );
    assert!(r_other >= 0.95, "seed 9: recall@10 {r_other}");
    let e9 = index.search_entry_points(9).unwrap();
    assert_eq!(e9.source, EntrySource::Spread { seed: 9 });
    // (On 6000 rows the sample is every row, so the seed does not change them.)
    let want9 =
        spread_entry_points(base.view(), Metric::L2Squared, DEFAULT_ENTRY_POINTS, 9).unwrap();
    assert_eq!(&e9.ids[..], &want9[..]);
    assert!(!Arc::ptr_eq(&e9.ids, &entries.ids));
    assert_eq!(index.clone().search_entry_points(9).unwrap().ids, e9.ids);
}

#[test]
fn search_graphs_start_from_their_own_entry_points() {
    let (base, _) = gaussian_mixture(800, 0, 16, 5, 1);
    let index = Index::build_from_view(
        base.view(),
        Metric::L2Squared,
        "rnndescent",
        &serde_json::json!({}),
        None,
        &BuildCtx::new(1),
    )
    .unwrap();
    assert_eq!(index.graph_kind(), GraphKind::Fixed);
    let entries = index.search_entry_points(0).unwrap();
    assert_eq!(entries.source, EntrySource::Graph);
    assert_eq!(&entries.ids[..], index.graph().as_view().entry_points());
}

/// On the GPU the CAGRA search session of a k-NN graph starts from the same spread entry points
/// (besides its random ones): high recall, independent of the batch (single-CTA), and a search
/// with another seed remakes the session with that seed's points.
#[cfg(feature = "cuda")]
#[test]
fn knn_graph_gpu_search_starts_from_spread_entry_points() {
    use weft::index::SearchBackend;
    use weft::search::{CagraSearchGpu, CagraSearchMode, CagraSearchParams, CagraSearchTuning};
    let Some(ctx) =
        weft::gpu::testing::gpu_or_skip("knn_graph_gpu_search_starts_from_spread_entry_points")
    else {
        return;
    };
    let (base, queries) = gaussian_mixture(20_000, 300, 32, 30, 11);
    let truth = weft::exact::exact_search(
        base.view(),
        queries.view(),
        Metric::L2Squared,
        10,
        &BuildCtx::new(0),
    )
    .unwrap();
    let index = Index::build_from_view(
        base.view(),
        Metric::L2Squared,
        "nndescent",
        &serde_json::json!({}),
        Some(16),
        &BuildCtx::new(3),
    )
    .unwrap();
    let mut params = SearchParams::with_beam_width(64);
    params.backend = SearchBackend::Gpu;
    params.cagra.mode = CagraSearchMode::SingleCta;
    let a = index.search(queries.view(), 10, &params).unwrap();
    assert_eq!(a.backend, "gpu");
    let r_spread = recall(&a.neighbors, &truth);

    // The same GPU search over the graph without entry points: random starting vertices only.
    let weft::StoredGraph::Knn(knn) = index.graph() else {
        panic!("a k-NN graph expected")
    };
    let bare = knn.to_fixed_degree(knn.k()).unwrap();
    let mut random = Neighbors::new(queries.rows(), 10);
    CagraSearchGpu::new(&ctx)
        .search(
            &bare,
            base.view(),
            queries.view(),
            Metric::L2Squared,
            &CagraSearchParams {
                beam_width: 64,
                tuning: CagraSearchTuning {
                    mode: CagraSearchMode::SingleCta,
                    ..Default::default()
                },
                ..Default::default()
            },
            random.as_mut(),
        )
        .unwrap();
    let r_random = recall(&random, &truth);
    println!(
        "GPU, k-NN graph, 30 clusters, beam_width 64: recall@10 {r_spread:.4} with spread entry points, {r_random:.4} with random ones only"
    );
    assert!(r_spread >= 0.95, "GPU, spread entry points: {r_spread}");
    assert!(r_spread > r_random, "{r_spread} vs {r_random}");

    let few = Dataset::from_vec(queries.as_slice()[..9 * 32].to_vec(), 9, 32).unwrap();
    let b = index.search(few.view(), 10, &params).unwrap();
    assert_eq!(b.neighbors.ids, a.neighbors.ids[..90]);
    let other = SearchParams {
        seed: 5,
        ..params.clone()
    };
    let c = index.search(queries.view(), 10, &other).unwrap();
    assert!(recall(&c.neighbors, &truth) >= 0.95);
    assert_eq!(
        index.search_entry_points(5).unwrap().source,
        EntrySource::Spread { seed: 5 }
    );
    // Back to seed 0: the first answers again.
    let d = index.search(queries.view(), 10, &params).unwrap();
    assert_eq!(d.neighbors, a.neighbors);
}

/// The CPU search's entry layer (the default): built once per index and seed, as good as scoring
/// every spread entry point at a fraction of their distances, and a query's answer is the same
/// alone or in a batch and equal to the beam search's own with the same entry points.
#[test]
fn index_searches_many_entry_points_through_the_entry_layer() {
    let ctx = BuildCtx::new(3);
    let (base, queries, truth, index) = clustered_knn_index(11, &ctx);
    let layered = SearchParams::with_beam_width(48).with_backend(Backend::Cpu);
    assert!(layered.beam.entry_layer.enabled);
    let mut all = layered.clone();
    all.beam.entry_layer = weft::search::EntryLayerParams::disabled();
    let a = index.search(queries.view(), 10, &all).unwrap();
    let b = index.search(queries.view(), 10, &layered).unwrap();
    let (r_all, r_layer) = (recall(&a.neighbors, &truth), recall(&b.neighbors, &truth));
    let per_query = |o: &weft::index::SearchOutput| {
        o.stats.distance_computations as f64 / o.stats.queries as f64
    };
    println!(
        "k-NN graph, 30 clusters, L = 48: recall@10 {r_all:.4} scoring all {DEFAULT_ENTRY_POINTS} entry points ({:.0} distances per query), {r_layer:.4} through the entry layer ({:.0})",
        per_query(&a),
        per_query(&b)
    );
    assert!(
        r_all >= 0.95 && r_layer >= r_all - 0.005,
        "{r_layer} against {r_all}"
    );
    assert!(per_query(&b) + 64.0 <= per_query(&a));

    // The same as the beam search's own layer over the same entry points.
    let ids = index.search_entry_points(0).unwrap().ids.to_vec();
    let mut direct = Neighbors::new(queries.rows(), 10);
    BeamSearch
        .search(
            index.graph().as_view(),
            base.view(),
            queries.view(),
            Metric::L2Squared,
            &BeamSearchParams {
                entry_points: EntryPoints::Fixed { ids },
                ..BeamSearchParams::with_beam_width(48)
            },
            direct.as_mut(),
        )
        .unwrap();
    assert_eq!(direct, b.neighbors);
    // One query per call (the cached layer) gives each query's batch answer; so does a clone.
    let clone = index.clone();
    for q in [0usize, 57, 199] {
        let one = Dataset::from_vec(queries.row(q).to_vec(), 1, 32).unwrap();
        let alone = clone.search(one.view(), 10, &layered).unwrap().neighbors;
        assert_eq!(alone.row_ids(0), b.neighbors.row_ids(q), "query {q}");
        assert_eq!(alone.row_dists(0), b.neighbors.row_dists(q), "query {q}");
    }
}
