//! The graph-builder conformance suite of weft-testkit, run on the CAGRA pipeline over the exact
//! k-NN graph ([`CagraPipeline`] with `weft_exact::ExactKnn`; the facade's `cagra` entry
//! registers NN-Descent instead), with a floor per case; the suite's 128-d case checked for
//! stranded queries; and (ignored) the measurement over seeds the floors come from.

use weft_cagra::{CagraCpu, CagraParams, CagraPipeline};
use weft_core::{
    BuildCtx, DType, Element, FixedDegreeGraph, GraphBuilder, GraphView, KnnGraphBuilder, Metric,
    Neighbors, NoParams, NodeId,
};
use weft_exact::ExactKnn;
use weft_testkit::graph::{
    CASE_CLUSTERS, CASE_QUERIES, CASE_SEED_BASE, GraphSuite, case_names, gaussian_mixture,
    ground_truth, recall_at_k, reference_beam_search, run_graph_suite,
};

/// The suite's parameters: the paper's degree for SIFT (128-d) and DEEP (96-d), 32, and an
/// intermediate degree of about 2x that. 63, not 64: the suite's 64 identical vectors must
/// build, and `intermediate_degree` must stay below the number of vectors (params are checked,
/// never clamped).
fn suite_params() -> CagraParams {
    CagraParams {
        graph_degree: 32,
        intermediate_degree: 63,
        ..Default::default()
    }
}

/// The queries (rows of `found`) none of whose true 10 nearest neighbours was found: a search
/// stranded away from the query's cluster.
fn stranded(found: &Neighbors, truth: &Neighbors) -> usize {
    (0..found.rows())
        .filter(|&q| {
            found.row_ids(q)[..10]
                .iter()
                .all(|id| !truth.row_ids(q)[..10].contains(id))
        })
        .count()
}

#[test]
fn conformance() {
    // Floors per case, recall@10 of the suite's reference beam search at beam 20 (2000 points, 12
    // well-separated clusters of ~167 points, 100 queries). What a correct build reaches: the 256
    // spread entry points hold some of every cluster, so a search starts in the query's own; there
    // a beam of 20 over out-degree 32 scores nearly all of the cluster (measured on the 128-d case
    // and `f32 d=32 l2`: 164 and 162 of the query's ~166 cluster points, 400 distances per query
    // with the entries), so recall is ~1.0 in every case, the 128-d one included (it is not hard
    // for a rank-pruned graph at beam 20: no wider beam). Measured over 12 seeds per case
    // (`floors_over_seeds` below, on d96fa9d): worst 0.999 (mean >= 0.9992) in every L2 and cosine
    // case and in `f32 d=32 ip`; worst 0.996 in `f32 d=8 ip`; no query stranded. The floors leave
    // 20x the worst miss count (0.98: 20 of 1000 true neighbours; one stranded query costs 10), 7x
    // for `f32 d=8 ip` (0.97). The paper gives no recall figure to hold these to (its recall
    // results are plots, on 1M-point sets). At this size the suite does not tell CAGRA's
    // optimisation from the plain k-NN graph (cut to 32: worst 0.974-0.999), only a correct,
    // connected, well-seeded graph from a broken one. The 0.75 used before was fitted to one run at
    // 0e429df, whose 32 random entry points missed 2 of the 12 clusters of the 128-d case: 22
    // queries stranded at recall 0, 0.779 (`mixture_128_strands_no_query`).
    let floors: &[(&str, f64)] = &[
        ("f32 d=8 l2", 0.98),      // worst of 12 seeds 0.999
        ("f32 d=32 l2", 0.98),     // 0.999
        ("f32 d=8 ip", 0.97),      // 0.996 (inner product: rows are not a metric's neighbours)
        ("f32 d=32 ip", 0.98),     // 0.999
        ("f32 d=8 cosine", 0.98),  // 1.000
        ("f32 d=32 cosine", 0.98), // 0.999
        ("f32 d=128 l2", 0.98),    // 0.999 (worst 0.974 at beam 10)
        ("u8 d=32 l2", 0.98),      // 0.999
        ("f16 d=32 cosine", 0.98), // 0.999
    ];
    let mut suite = GraphSuite::new(suite_params(), 0.98);
    suite.min_recall_ip = 0.97;
    suite.case_min_recall = floors.iter().map(|&(n, f)| (n.to_string(), f)).collect();
    suite.invalid_params = vec![
        CagraParams {
            graph_degree: 0,
            ..Default::default()
        },
        CagraParams {
            graph_degree: 32,
            intermediate_degree: 16,
            ..Default::default()
        },
    ];
    let pipeline = CagraPipeline::new(ExactKnn, NoParams {});
    let report = run_graph_suite(&pipeline, &suite);
    eprintln!("{report}");
}

/// The entry points the optimiser stored at 0e429df: `count` distinct seeded random vertices,
/// ascending (replaced by spread entry points and the connectivity repair in c32841e).
fn random_entry_points_of_0e429df(n: usize, count: usize, seed: u64) -> Vec<NodeId> {
    use weft_core::rng::{SplitMix64, hash3};
    let mut rng = SplitMix64::new(hash3(seed, n as u64, 0xca_62a));
    let mut out: Vec<NodeId> = Vec::with_capacity(count);
    while out.len() < count {
        let x = rng.below(n as u64) as NodeId;
        if !out.contains(&x) {
            out.push(x);
        }
    }
    out.sort_unstable();
    out
}

/// The suite's 128-d case, the one that measured 0.78: the optimised graph has no edge between
/// clusters (one strongly connected component per cluster), so a query is answered only if an
/// entry point lies in its cluster. The pipeline's spread entry points do, for every query; the
/// 32 random entry points it stored before did not (2 clusters without one, 22 queries
/// stranded at recall 0), which is all the 0.78 was: the graph itself reaches ~1.0.
#[test]
fn mixture_128_strands_no_query() {
    let index = case_names()
        .iter()
        .position(|n| n == "f32 d=128 l2")
        .unwrap();
    let seed = CASE_SEED_BASE + index as u64;
    let (base, queries) = gaussian_mixture::<f32>(2000, CASE_QUERIES, 128, CASE_CLUSTERS, seed);
    let metric = Metric::L2Squared;
    let truth = ground_truth(base.view(), queries.view(), metric, 10).unwrap();
    let ctx = BuildCtx::new(seed);
    let params = suite_params();
    let graph = CagraPipeline::new(ExactKnn, NoParams {})
        .build(base.view(), metric, &params, &ctx)
        .unwrap();
    let stats = weft_graph::graph_stats(&graph, None).unwrap();
    assert_eq!(stats.reachable, 2000, "{stats}");
    let search = |g: &FixedDegreeGraph, beam| {
        reference_beam_search(g, base.view(), queries.view(), metric, 10, beam)
    };
    let found = search(&graph, 20);
    let recall = recall_at_k(&found, &truth, 10);
    eprintln!(
        "128-d mixture: {} SCCs, all {} vertices reachable from {} entry points; beam 20: \
         recall@10 {recall:.4}, {} queries stranded",
        stats.scc_count,
        stats.reachable,
        graph.entry_points().len(),
        stranded(&found, &truth)
    );
    assert_eq!(stranded(&found, &truth), 0);
    assert!(recall >= 0.98, "recall@10 {recall}");
    assert!(recall_at_k(&search(&graph, 32), &truth, 10) >= 0.99);

    // The same optimised rows with the 0e429df entry points: what measured 0.78.
    let knn = ExactKnn
        .build(base.view(), metric, 63, &NoParams {}, &ctx)
        .unwrap();
    let old = CagraCpu
        .optimize_knn(&knn, 32, &ctx)
        .unwrap()
        .with_entry_points(random_entry_points_of_0e429df(2000, 32, seed));
    let old_stats = weft_graph::graph_stats(&old, None).unwrap();
    let old_found = search(&old, 20);
    let old_recall = recall_at_k(&old_found, &truth, 10);
    eprintln!(
        "with 0e429df's 32 random entry points: {} of 2000 vertices reachable; beam 20: \
         recall@10 {old_recall:.4}, {} queries stranded",
        old_stats.reachable,
        stranded(&old_found, &truth)
    );
    assert!(old_stats.reachable < 2000);
    assert!(stranded(&old_found, &truth) > 0);
    assert!(old_recall < 0.9);
}

/// One case of the suite at `seed` (its data and build seed): recall@10 of the CAGRA graph at
/// beams 20 and 10, its stranded queries at beam 20, and the recall at beam 20 of the exact
/// k-NN graph cut to 32 with the same entry points and repair (for comparison).
fn case_over_seed<T: Element>(dim: usize, metric: Metric, seed: u64) -> (f64, f64, usize, f64) {
    let (base, queries) = gaussian_mixture::<T>(2000, CASE_QUERIES, dim, CASE_CLUSTERS, seed);
    let truth = ground_truth(base.view(), queries.view(), metric, 10).unwrap();
    let ctx = BuildCtx::new(seed);
    let params = suite_params();
    let graph = CagraPipeline::new(ExactKnn, NoParams {})
        .build(base.view(), metric, &params, &ctx)
        .unwrap();
    let search = |g: &FixedDegreeGraph, l| {
        reference_beam_search(g, base.view(), queries.view(), metric, 10, l)
    };
    let found = search(&graph, 20);
    let knn = ExactKnn
        .build(base.view(), metric, 32, &NoParams {}, &ctx)
        .unwrap();
    let cut = knn.to_fixed_degree(32).unwrap();
    let (cut, _) = ctx
        .install(|| {
            weft_graph::connect_graph(cut, base.view(), metric, params.entry_points, true, &ctx)
        })
        .unwrap()
        .unwrap();
    (
        recall_at_k(&found, &truth, 10),
        recall_at_k(&search(&graph, 10), &truth, 10),
        stranded(&found, &truth),
        recall_at_k(&search(&cut, 20), &truth, 10),
    )
}

/// The measurement behind the floors of `conformance`: every case of the suite over 12 seeds
/// (`seed + 100 s`, s < 12, the suite's own first). About two minutes in release:
/// `cargo test -p weft-cagra --release --test conformance -- --ignored --nocapture`.
#[test]
#[ignore = "measurement (about two minutes in release), not a check"]
fn floors_over_seeds() {
    let cases: Vec<(DType, usize, Metric)> = case_names()
        .iter()
        .map(|name| {
            let mut it = name.split(' ');
            let dtype = match it.next().unwrap() {
                "u8" => DType::U8,
                "f16" => DType::F16,
                _ => DType::F32,
            };
            let dim = it.next().unwrap()[2..].parse().unwrap();
            let metric: Metric = it.next().unwrap().parse().unwrap();
            (dtype, dim, metric)
        })
        .collect();
    for (i, (name, (dtype, dim, metric))) in case_names().iter().zip(cases).enumerate() {
        let runs: Vec<_> = (0..12u64)
            .map(|s| {
                let seed = CASE_SEED_BASE + i as u64 + 100 * s;
                match dtype {
                    DType::U8 => case_over_seed::<u8>(dim, metric, seed),
                    DType::F16 => case_over_seed::<half::f16>(dim, metric, seed),
                    _ => case_over_seed::<f32>(dim, metric, seed),
                }
            })
            .collect();
        let worst = |f: fn(&(f64, f64, usize, f64)) -> f64| {
            runs.iter().map(f).fold(f64::INFINITY, f64::min)
        };
        let mean = runs.iter().map(|r| r.0).sum::<f64>() / runs.len() as f64;
        eprintln!(
            "{name:<16} beam 20: worst {:.4} mean {mean:.4} | beam 10: worst {:.4} | stranded \
             (max) {} | k-NN cut to 32, beam 20: worst {:.4}",
            worst(|r| r.0),
            worst(|r| r.1),
            runs.iter().map(|r| r.2).max().unwrap(),
            worst(|r| r.3)
        );
    }
}
