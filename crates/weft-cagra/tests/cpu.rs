//! The CPU optimiser: invariants on random k-NN graphs, determinism, errors, and search quality
//! against the k-NN graph cut to the same degree.

use proptest::prelude::*;
use weft_cagra::{CagraCpu, CagraParams, optimize_stages};
use weft_core::{
    BuildCtx, CancelToken, Error, GraphOptimizer, INVALID, KnnGraph, KnnGraphBuilder, Metric,
    Neighbors, NodeId, Searcher,
};
use weft_search::{BeamSearch, BeamSearchParams};

/// A random valid k-NN graph: `k` distinct random neighbours per row (a quarter of the rows
/// shorter when `short`), distances ascending by position.
fn random_knn(n: usize, k: usize, seed: u64, short: bool) -> KnnGraph {
    let mut rng = weft_core::rng::SplitMix64::new(seed);
    let mut ids = vec![INVALID; n * k];
    let mut dists = vec![f32::INFINITY; n * k];
    for v in 0..n {
        let m = if short && rng.below(4) == 0 {
            rng.below(k as u64 + 1) as usize
        } else {
            k
        };
        let mut row: Vec<NodeId> = Vec::with_capacity(m);
        while row.len() < m {
            let x = rng.below(n as u64) as NodeId;
            if x as usize != v && !row.contains(&x) {
                row.push(x);
            }
        }
        for (j, x) in row.into_iter().enumerate() {
            ids[v * k + j] = x;
            dists[v * k + j] = j as f32;
        }
    }
    KnnGraph::from_parts(n, k, ids, dists).unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn output_is_a_valid_fixed_degree_graph(
        n in 2usize..300, k in 1usize..24, frac in 0.1f64..1.0, seed: u64, short: bool
    ) {
        let k = k.min(n - 1);
        let d = ((k as f64 * frac).ceil() as usize).clamp(1, k);
        let knn = random_knn(n, k, seed, short);
        let g = CagraCpu.optimize_knn(&knn, d, &BuildCtx::new(0)).unwrap();
        g.validate().unwrap();
        prop_assert_eq!(g.degree(), d);
        let stages = optimize_stages(&knn, d, &BuildCtx::new(0)).unwrap();
        prop_assert_eq!(g.ids(), &stages.graph[..]);
        for v in 0..n {
            let row = g.row(v);
            let valid: Vec<NodeId> = row.iter().copied().filter(|&x| x != INVALID).collect();
            // No self-loops, no duplicates (validate checks), padding only at the end.
            prop_assert!(row[..valid.len()].iter().all(|&x| x != INVALID));
            let m = knn.row_ids(v).iter().filter(|&&x| x != INVALID).count();
            if m >= d {
                prop_assert_eq!(valid.len(), d, "row {} has {} neighbours", v, valid.len());
            }
            // Every edge is a pruned forward edge or a reverse edge.
            let pruned = &stages.pruned[v * d..(v + 1) * d];
            for &x in &valid {
                let reverse = stages.pruned[x as usize * d..(x as usize + 1) * d].contains(&(v as NodeId));
                prop_assert!(pruned.contains(&x) || reverse);
            }
            // The protected half of the pruned row comes first.
            let h = (d / 2).min(m.min(d));
            prop_assert_eq!(&row[..h], &pruned[..h]);
            // Reverse rows are capped and ordered by (position in the source row, source).
            let rc = stages.reverse_counts[v] as usize;
            prop_assert!(rc <= d);
            let keys: Vec<(usize, NodeId)> = stages.reverse[v * d..v * d + rc]
                .iter()
                .map(|&s| {
                    let c = stages.pruned[s as usize * d..(s as usize + 1) * d]
                        .iter()
                        .position(|&y| y == v as NodeId)
                        .expect("a reverse edge has its forward edge");
                    (c, s)
                })
                .collect();
            prop_assert!(keys.windows(2).all(|w| w[0] < w[1]));
        }
    }

    #[test]
    fn pruned_rows_are_ordered_by_detours_then_rank(n in 2usize..120, k in 1usize..16, seed: u64) {
        let k = k.min(n - 1);
        let knn = random_knn(n, k, seed, false);
        let s = optimize_stages(&knn, k, &BuildCtx::new(0)).unwrap();
        for v in 0..n {
            let keys: Vec<(u32, usize)> = s.pruned[v * k..(v + 1) * k]
                .iter()
                .map(|&x| {
                    let r = knn.row_ids(v).iter().position(|&y| y == x).unwrap();
                    (s.detours[v * k + r], r)
                })
                .collect();
            prop_assert!(keys.windows(2).all(|w| w[0] < w[1]));
            // A count never exceeds the rank.
            for r in 0..k {
                prop_assert!(s.detours[v * k + r] as usize <= r);
            }
        }
    }
}

#[test]
fn same_graph_on_one_and_three_threads() {
    let knn = random_knn(3000, 32, 7, true);
    let one = BuildCtx::new(0).with_threads(Some(1));
    let three = BuildCtx::new(0).with_threads(Some(3));
    let a = CagraCpu.optimize_knn(&knn, 16, &one).unwrap();
    let b = CagraCpu.optimize_knn(&knn, 16, &three).unwrap();
    assert_eq!(a.ids(), b.ids());
}

#[test]
fn bad_input_is_a_typed_error() {
    let knn = random_knn(50, 8, 1, false);
    let ctx = BuildCtx::new(0);
    for d in [0, 9] {
        assert!(matches!(
            CagraCpu.optimize_knn(&knn, d, &ctx),
            Err(Error::InvalidParams { .. })
        ));
    }
    // A self-loop.
    let (mut ids, dists) = knn.clone().into_parts();
    ids[3 * 8] = 3;
    let bad = KnnGraph::from_parts(50, 8, ids, dists).unwrap();
    assert!(matches!(
        CagraCpu.optimize_knn(&bad, 4, &ctx),
        Err(Error::InvalidGraph(_))
    ));
    // Empty.
    assert!(
        CagraCpu
            .optimize_knn(&KnnGraph::empty(0, 4), 2, &ctx)
            .is_err()
    );
    // Cancelled.
    let cancel = CancelToken::new();
    cancel.cancel();
    assert!(matches!(
        CagraCpu.optimize_knn(&knn, 4, &BuildCtx::new(0).with_cancel(cancel)),
        Err(Error::Cancelled)
    ));
    // Params and data shape through the trait.
    let data = vec![0f32; 49 * 4];
    let view = weft_core::DatasetView::new(&data, 49, 4).unwrap();
    let p = CagraParams {
        graph_degree: 4,
        intermediate_degree: 8,
        ..Default::default()
    };
    assert!(
        CagraCpu
            .optimize(view, Metric::L2Squared, &knn, 4, &p, &ctx)
            .is_err()
    );
}

/// Recall@10 of a beam search of beam `l` over `graph` from 4 random entry points per query.
fn recall<G: weft_core::GraphView>(
    graph: &G,
    base: &weft_core::Dataset<f32>,
    queries: &weft_core::Dataset<f32>,
    truth: &Neighbors,
    l: usize,
) -> f64 {
    let mut found = Neighbors::new(queries.rows(), 10);
    let params = BeamSearchParams {
        beam_width: l,
        entry_points: weft_search::EntryPoints::Random { count: 4 },
        ..Default::default()
    };
    BeamSearch
        .search(
            graph,
            base.view(),
            queries.view(),
            Metric::L2Squared,
            &params,
            found.as_mut(),
        )
        .unwrap();
    weft_testkit::graph::recall_at_k(&found, truth, 10)
}

#[test]
fn optimised_graph_searches_at_least_as_well_as_the_cut_knn_graph() {
    let generator = weft_io::synthetic::Preset::Sift.generator(3).unwrap();
    let base = generator.base(4000).unwrap();
    let queries = generator.queries(200).unwrap();
    let ctx = BuildCtx::new(0);
    let knn = weft_exact::ExactKnn
        .build(
            base.view(),
            Metric::L2Squared,
            64,
            &weft_core::NoParams {},
            &ctx,
        )
        .unwrap();
    let p = CagraParams {
        graph_degree: 32,
        intermediate_degree: 64,
        ..Default::default()
    };
    let cagra = CagraCpu
        .optimize(base.view(), Metric::L2Squared, &knn, 32, &p, &ctx)
        .unwrap();
    cagra.validate().unwrap();
    let cut = knn.to_fixed_degree(32).unwrap();
    let truth =
        weft_testkit::graph::ground_truth(base.view(), queries.view(), Metric::L2Squared, 10)
            .unwrap();
    for l in [10, 20, 40] {
        let r_cagra = recall(&cagra, &base, &queries, &truth, l);
        let r_knn = recall(&cut, &base, &queries, &truth, l);
        eprintln!("beam {l}: cagra recall@10 {r_cagra:.4}, k-NN cut to 32 {r_knn:.4}");
        assert!(
            r_cagra >= r_knn,
            "beam {l}: optimised graph {r_cagra:.4} below the cut k-NN graph {r_knn:.4}"
        );
    }
    assert!(recall(&cagra, &base, &queries, &truth, 40) > 0.9);
}
