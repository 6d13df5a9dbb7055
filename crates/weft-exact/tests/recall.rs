//! Graph and search recall on hand-made and random cases.

use weft_core::rng::SplitMix64;
use weft_core::{
    BuildCtx, DatasetView, Error, FixedDegreeGraph, INVALID, KnnGraph, Metric, Neighbors, NodeId,
};
use weft_exact::cpu::{exact_knn_graph, exact_search};
use weft_exact::recall::{
    SampledTruth, Ties, graph_recall, knn_graph_recall, sample_rows, sampled_graph_recall,
    search_recall, search_recall_exact,
};

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-12
}

/// Points on a line: 0, 1, 3, 6, 10 (distinct gaps, no ties).
fn line() -> Vec<f32> {
    vec![0.0, 1.0, 3.0, 6.0, 10.0]
}

#[test]
fn perfect_and_damaged_knn_graphs() {
    let data = line();
    let view = DatasetView::from_flat(&data, 1).unwrap();
    let ctx = BuildCtx::new(0);
    let exact = exact_knn_graph(view, Metric::L2Squared, 2, &ctx).unwrap();
    // Rows: 0 -> [1, 2], 1 -> [0, 2], 2 -> [1, 0] (0 and 3 tie at 9; the smaller id wins),
    // 3 -> [2, 4], 4 -> [3, 2].
    let r = knn_graph_recall(&exact, &exact, 2, Ties::Ids).unwrap();
    assert_eq!((r.mean, r.min, r.rows, r.k), (1.0, 1.0, 5, 2));
    let r = graph_recall(&exact, &exact, 1).unwrap();
    assert!(close(r.mean, 1.0));

    // Replace row 4's second neighbour with a far point: that row has recall 1/2.
    let (mut ids, mut dists) = exact.clone().into_parts();
    assert_eq!(&ids[8..10], &[3, 2]);
    ids[9] = 0;
    dists[9] = 100.0;
    let approx = KnnGraph::from_parts(5, 2, ids, dists).unwrap();
    approx.validate().unwrap();
    for ties in [Ties::Ids, Ties::Distance] {
        let r = knn_graph_recall(&approx, &exact, 2, ties).unwrap();
        assert!(close(r.mean, 0.9), "{r:?}");
        assert!(close(r.min, 0.5));
    }
    // Recall@1 is untouched.
    assert!(close(
        knn_graph_recall(&approx, &exact, 1, Ties::Ids)
            .unwrap()
            .mean,
        1.0
    ));
    assert!(close(graph_recall(&approx, &exact, 2).unwrap().mean, 0.9));
}

#[test]
fn ties_are_credited_by_distance() {
    // Point 0 at 0 has neighbours 1 (at +1) and 2 (at -1): equally close. The exact graph picks
    // id 1 for k = 1; an approximate graph that picks id 2 is right by distance, wrong by id.
    let data = vec![0.0f32, 1.0, -1.0, 5.0];
    let view = DatasetView::from_flat(&data, 1).unwrap();
    let exact = exact_knn_graph(view, Metric::L2Squared, 1, &BuildCtx::new(0)).unwrap();
    assert_eq!(exact.row_ids(0), &[1]);
    let mut ids = exact.ids().to_vec();
    ids[0] = 2;
    let approx = KnnGraph::from_parts(4, 1, ids, exact.dists().to_vec()).unwrap();
    let by_id = knn_graph_recall(&approx, &exact, 1, Ties::Ids).unwrap();
    let by_dist = knn_graph_recall(&approx, &exact, 1, Ties::Distance).unwrap();
    assert!(close(by_id.mean, 0.75) && close(by_id.min, 0.0));
    assert!(close(by_dist.mean, 1.0));
    // The same through the sampled path, which recomputes distances from the data.
    let g = approx.to_fixed_degree(1).unwrap();
    let ctx = BuildCtx::new(1);
    let s =
        sampled_graph_recall(&g, view, Metric::L2Squared, 1, 100, Ties::Distance, &ctx).unwrap();
    assert_eq!(s.rows, 4);
    assert!(close(s.mean, 1.0));
    let s = sampled_graph_recall(&g, view, Metric::L2Squared, 1, 100, Ties::Ids, &ctx).unwrap();
    assert!(close(s.mean, 0.75));

    // A lying distance is not believed by the sampled path: claim 3 (at 25) is at 1.
    let mut ids = exact.ids().to_vec();
    let mut dists = exact.dists().to_vec();
    ids[0] = 3;
    dists[0] = 1.0;
    let liar = KnnGraph::from_parts(4, 1, ids, dists).unwrap();
    assert!(close(
        knn_graph_recall(&liar, &exact, 1, Ties::Distance)
            .unwrap()
            .mean,
        1.0
    ));
    let g = liar.to_fixed_degree(1).unwrap();
    let s = sampled_graph_recall(&g, view, Metric::L2Squared, 1, 4, Ties::Distance, &ctx).unwrap();
    assert!(close(s.mean, 0.75));
}

#[test]
fn self_loops_and_duplicates_never_count() {
    let data = line();
    let view = DatasetView::from_flat(&data, 1).unwrap();
    let exact = exact_knn_graph(view, Metric::L2Squared, 2, &BuildCtx::new(0)).unwrap();
    // Row 0 lists itself at distance 0 and its true first neighbour twice.
    let mut ids = exact.ids().to_vec();
    let mut dists = exact.dists().to_vec();
    ids[0] = 0;
    dists[0] = 0.0;
    ids[1] = 1;
    dists[1] = 1.0;
    let odd = KnnGraph::from_parts(5, 2, ids.clone(), dists.clone()).unwrap();
    let r = knn_graph_recall(&odd, &exact, 2, Ties::Distance).unwrap();
    assert!(close(r.min, 0.5), "{r:?}");
    ids[0] = 1;
    dists[0] = 1.0;
    let dup = KnnGraph::from_parts(5, 2, ids, dists).unwrap();
    let r = knn_graph_recall(&dup, &exact, 2, Ties::Distance).unwrap();
    assert!(close(r.min, 0.5), "{r:?}");
}

#[test]
fn fixed_degree_graphs_and_padding() {
    let data = line();
    let view = DatasetView::from_flat(&data, 1).unwrap();
    let exact = exact_knn_graph(view, Metric::L2Squared, 2, &BuildCtx::new(0)).unwrap();
    // Every row holds only its nearest neighbour, padded.
    let lists: Vec<Vec<NodeId>> = (0..5).map(|v| vec![exact.row_ids(v)[0]]).collect();
    let g = FixedDegreeGraph::from_lists(&lists, 3).unwrap();
    assert!(close(graph_recall(&g, &exact, 2).unwrap().mean, 0.5));
    assert!(close(graph_recall(&g, &exact, 1).unwrap().mean, 1.0));
    // k above the graph's degree or the exact graph's k is refused.
    let narrow = FixedDegreeGraph::from_lists(&lists, 1).unwrap();
    assert!(matches!(
        graph_recall(&narrow, &exact, 2),
        Err(Error::InvalidParams { .. })
    ));
    assert!(matches!(
        graph_recall(&g, &exact, 3),
        Err(Error::InvalidParams { .. })
    ));
    assert!(matches!(
        graph_recall(&g, &exact, 0),
        Err(Error::InvalidParams { .. })
    ));
    let small = FixedDegreeGraph::from_lists(&lists[..4], 3).unwrap();
    assert!(matches!(
        graph_recall(&small, &exact, 1),
        Err(Error::DimensionMismatch { .. })
    ));
}

fn random_data(n: usize, dim: usize, seed: u64) -> Vec<f32> {
    let mut rng = SplitMix64::new(seed);
    (0..n * dim).map(|_| rng.next_gaussian() as f32).collect()
}

#[test]
fn sampled_recall_matches_full_recall() {
    let (n, dim, k) = (400, 8, 10);
    let data = random_data(n, dim, 3);
    let view = DatasetView::from_flat(&data, dim).unwrap();
    let ctx = BuildCtx::new(42);
    for metric in Metric::ALL {
        let exact = exact_knn_graph(view, metric, k, &ctx).unwrap();
        // Damage: keep the exact rows but shift every odd row's list by one (drop the nearest).
        let mut ids = exact.ids().to_vec();
        for v in (1..n).step_by(2) {
            let row = &mut ids[v * k..(v + 1) * k];
            row.rotate_left(1);
            row[k - 1] = INVALID;
        }
        let g = FixedDegreeGraph::new(n, k, ids).unwrap();
        let full = graph_recall(&g, &exact, k).unwrap();
        assert!(close(full.mean, 1.0 - 0.5 / k as f64), "{metric}: {full:?}");
        let all = sampled_graph_recall(&g, view, metric, k, n, Ties::Ids, &ctx).unwrap();
        assert_eq!(all.rows, n);
        assert!(close(all.mean, full.mean), "{metric}: {all:?} vs {full:?}");
        let some = sampled_graph_recall(&g, view, metric, k, 50, Ties::Distance, &ctx).unwrap();
        assert_eq!(some.rows, 50);
        // Half the rows are perfect, half lose one neighbour: the sample mean lies in between.
        assert!(some.mean >= 1.0 - 1.0 / k as f64 && some.mean <= 1.0);
        // The exact graph itself is perfect on any sample.
        let perfect = sampled_graph_recall(&exact, view, metric, k, 37, Ties::Ids, &ctx).unwrap();
        assert!(close(perfect.mean, 1.0));
    }
    // Errors.
    let exact = exact_knn_graph(view, Metric::L2Squared, k, &ctx).unwrap();
    assert!(sampled_graph_recall(&exact, view, Metric::L2Squared, k, 0, Ties::Ids, &ctx).is_err());
    let short = DatasetView::from_flat(&data[..dim * 10], dim).unwrap();
    assert!(matches!(
        sampled_graph_recall(&exact, short, Metric::L2Squared, 5, 5, Ties::Ids, &ctx),
        Err(Error::DimensionMismatch { .. })
    ));
}

#[test]
fn sampled_truth_is_reusable() {
    let (n, dim) = (300, 6);
    let data = random_data(n, dim, 5);
    let view = DatasetView::from_flat(&data, dim).unwrap();
    let ctx = BuildCtx::new(9);
    let truth = SampledTruth::compute(view, Metric::Cosine, 8, 40, &ctx).unwrap();
    assert_eq!(
        (truth.rows().len(), truth.k(), truth.metric()),
        (40, 8, Metric::Cosine)
    );
    assert_eq!(truth.rows(), sample_rows(n, 40, 9).as_slice());
    let exact = exact_knn_graph(view, Metric::Cosine, 8, &ctx).unwrap();
    for k in [1, 4, 8] {
        let r = truth.recall(&exact, view, k, Ties::Ids).unwrap();
        assert_eq!((r.mean, r.rows, r.k), (1.0, 40, k));
        // A graph of only the 4 nearest: recall@8 is 1/2.
        let four = exact.to_fixed_degree(4).unwrap();
        if k <= 4 {
            assert_eq!(
                truth.recall(&four, view, k, Ties::Distance).unwrap().mean,
                1.0
            );
        } else {
            assert!(truth.recall(&four, view, k, Ties::Ids).is_err());
        }
    }
    let padded = FixedDegreeGraph::new(n, 8, {
        let mut ids = exact.ids().to_vec();
        for v in 0..n {
            for j in 4..8 {
                ids[v * 8 + j] = INVALID;
            }
        }
        ids
    })
    .unwrap();
    assert!(close(
        truth.recall(&padded, view, 8, Ties::Distance).unwrap().mean,
        0.5
    ));
    assert!(truth.recall(&exact, view, 9, Ties::Ids).is_err());
    // Parts from elsewhere.
    let again =
        SampledTruth::from_parts(Metric::Cosine, truth.rows().to_vec(), truth.exact().clone())
            .unwrap();
    assert_eq!(again.recall(&exact, view, 8, Ties::Ids).unwrap().mean, 1.0);
    assert!(SampledTruth::from_parts(Metric::Cosine, vec![1], truth.exact().clone()).is_err());
    let far =
        SampledTruth::from_parts(Metric::Cosine, vec![n as NodeId; 40], truth.exact().clone())
            .unwrap();
    assert!(matches!(
        far.recall(&exact, view, 8, Ties::Ids),
        Err(Error::InvalidInput(_))
    ));
}

#[test]
fn row_samples_are_seeded_distinct_and_sorted() {
    for (n, s) in [
        (10usize, 3usize),
        (1000, 999),
        (1_000_000_000, 1000),
        (5, 5),
        (5, 50),
    ] {
        let a = sample_rows(n, s, 7);
        assert_eq!(a.len(), s.min(n));
        assert!(a.windows(2).all(|w| w[0] < w[1]));
        assert!(a.iter().all(|&r| (r as usize) < n));
        assert_eq!(a, sample_rows(n, s, 7));
    }
    assert_ne!(sample_rows(1000, 10, 1), sample_rows(1000, 10, 2));
    // Roughly uniform: the mean of a large sample is near the middle.
    let big = sample_rows(100_000, 20_000, 3);
    let mean = big.iter().map(|&r| r as f64).sum::<f64>() / big.len() as f64;
    assert!((mean - 50_000.0).abs() < 1_500.0, "{mean}");
}

#[test]
fn search_recall_against_ground_truth() {
    // Two queries, k = 2, ground truth with 3 columns (as an .ivecs file might have).
    let mut found = Neighbors::new(2, 2);
    found.ids.copy_from_slice(&[5, 7, 1, INVALID]);
    found.dists.copy_from_slice(&[0.1, 0.2, 0.3, f32::INFINITY]);
    let gt = [7, 5, 9, 2, 1, 3];
    let r = search_recall(&found, &gt, 3, 2).unwrap();
    assert!(close(r.mean, 0.75) && close(r.min, 0.5) && r.rows == 2);
    // Recall@1: the first found id must be the first true one; neither query's is.
    let r = search_recall(&found, &gt, 3, 1).unwrap();
    assert!(close(r.mean, 0.0));
    assert!(matches!(
        search_recall(&found, &gt, 3, 3),
        Err(Error::InvalidParams { .. })
    ));
    assert!(matches!(
        search_recall(&found, &gt[..5], 3, 2),
        Err(Error::DimensionMismatch { .. })
    ));
    assert!(matches!(
        search_recall(&found, &gt, 2, 2),
        Err(Error::DimensionMismatch { .. })
    ));
}

#[test]
fn search_recall_against_exact_results() {
    let (n, dim, k) = (300, 4, 5);
    let data = random_data(n, dim, 9);
    let queries = random_data(20, dim, 10);
    let base = DatasetView::from_flat(&data, dim).unwrap();
    let q = DatasetView::from_flat(&queries, dim).unwrap();
    let ctx = BuildCtx::new(0);
    let exact = exact_search(base, q, Metric::L2Squared, k, &ctx).unwrap();
    let r = search_recall_exact(&exact, &exact, k, Ties::Distance).unwrap();
    assert_eq!((r.mean, r.rows), (1.0, 20));
    let r = search_recall(&exact, &exact.ids, k, k).unwrap();
    assert_eq!(r.mean, 1.0);
    // Drop the last neighbour of every query.
    let mut worse = exact.clone();
    for qi in 0..20 {
        worse.ids[qi * k + k - 1] = INVALID;
        worse.dists[qi * k + k - 1] = f32::INFINITY;
    }
    let r = search_recall_exact(&worse, &exact, k, Ties::Distance).unwrap();
    assert!(close(r.mean, 0.8));
    let other = Neighbors::new(3, k);
    assert!(matches!(
        search_recall_exact(&other, &exact, k, Ties::Ids),
        Err(Error::DimensionMismatch { .. })
    ));
}
