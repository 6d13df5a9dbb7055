//! Oracle tests: every result must equal a naive scan with the metric's `DistanceFn`.

use half::f16;
use proptest::prelude::*;
use weft_core::rng::SplitMix64;
use weft_core::{CancelToken, Dataset};

use super::kernel;
use super::topk::before;
use super::*;

/// The naive answer: every candidate, sorted by `(distance, id)`.
fn oracle<T: Element>(
    base: DatasetView<'_, T>,
    q: &[T],
    skip: NodeId,
    metric: Metric,
    k: usize,
) -> Vec<(f32, NodeId)> {
    let dist = DistanceFn::<T>::new(metric);
    let mut all: Vec<(f32, NodeId)> = base
        .iter()
        .enumerate()
        .filter(|&(i, _)| i as NodeId != skip)
        .map(|(i, x)| (dist.eval(q, x), i as NodeId))
        .collect();
    all.sort_by(|a, b| {
        if before(a.0, a.1, b.0, b.1) {
            std::cmp::Ordering::Less
        } else {
            std::cmp::Ordering::Greater
        }
    });
    all.truncate(k);
    all
}

fn assert_rows_match(ids: &[NodeId], dists: &[f32], want: &[(f32, NodeId)], what: &str) {
    let got: Vec<(f32, NodeId)> = dists.iter().copied().zip(ids.iter().copied()).collect();
    assert_eq!(got, want, "{what}");
}

/// Random data of each element type; `dup` makes some rows exact copies of earlier ones and
/// `levels` quantises values so that distances tie.
trait Gen: Element {
    fn gen_value(r: &mut SplitMix64, levels: u32) -> Self;
}
fn level(r: &mut SplitMix64, levels: u32) -> f32 {
    if levels == 0 {
        r.next_f32() * 2.0 - 1.0
    } else {
        (r.next_u64() % levels as u64) as f32 - (levels / 2) as f32
    }
}
impl Gen for f32 {
    fn gen_value(r: &mut SplitMix64, levels: u32) -> Self {
        level(r, levels)
    }
}
impl Gen for f16 {
    fn gen_value(r: &mut SplitMix64, levels: u32) -> Self {
        f16::from_f32(level(r, levels))
    }
}
impl Gen for u8 {
    fn gen_value(r: &mut SplitMix64, levels: u32) -> Self {
        if levels == 0 {
            r.next_u64() as u8
        } else {
            (r.next_u64() % levels as u64) as u8
        }
    }
}
impl Gen for i8 {
    fn gen_value(r: &mut SplitMix64, levels: u32) -> Self {
        if levels == 0 {
            r.next_u64() as i8
        } else {
            ((r.next_u64() % levels as u64) as i64 - (levels / 2) as i64) as i8
        }
    }
}

fn random_set<T: Gen>(rows: usize, dim: usize, seed: u64, levels: u32, dup: bool) -> Dataset<T> {
    let mut r = SplitMix64::new(seed);
    let mut v: Vec<T> = Vec::with_capacity(rows * dim);
    for i in 0..rows {
        if dup && i > 0 && r.next_u64().is_multiple_of(4) {
            let src = (r.next_u64() % i as u64) as usize;
            let copy: Vec<T> = v[src * dim..(src + 1) * dim].to_vec();
            v.extend_from_slice(&copy);
        } else {
            for _ in 0..dim {
                v.push(T::gen_value(&mut r, levels));
            }
        }
    }
    Dataset::from_vec(v, rows, dim).unwrap()
}

/// Checks search, graph and neighbours-of against the oracle with `plan`.
fn check_all<T: Gen>(
    plan: Plan,
    base: &Dataset<T>,
    queries: &Dataset<T>,
    metric: Metric,
    k: usize,
) {
    let ctx = BuildCtx::default();
    let b = base.view();
    let what = format!(
        "{:?} {:?} {metric:?} n={} dim={} k={k}",
        plan,
        T::DTYPE,
        b.rows(),
        b.dim()
    );
    let k_search = k.min(b.rows());
    let res = run_with_kernel(
        b,
        Queries::Rows(queries.view()),
        queries.rows(),
        metric,
        k_search,
        &ctx,
        plan,
    )
    .unwrap();
    for q in 0..queries.rows() {
        let want = oracle(b, queries.row(q), INVALID, metric, k_search);
        assert_rows_match(res.row_ids(q), res.row_dists(q), &want, &what);
    }
    if b.rows() >= 2 {
        let kg = k.min(b.rows() - 1);
        let res = run_with_kernel(b, Queries::AllOf, b.rows(), metric, kg, &ctx, plan).unwrap();
        for v in 0..b.rows() {
            let want = oracle(b, b.row(v), v as NodeId, metric, kg);
            assert_rows_match(res.row_ids(v), res.row_dists(v), &want, &what);
        }
    }
}

fn check_every_kernel<T: Gen>(base: &Dataset<T>, queries: &Dataset<T>, metric: Metric, k: usize) {
    for kern in kernel::supported() {
        // The default blocking, and tiny blocks and superblocks (several of each, split ranges).
        for (block_bytes, superblock_bytes) in [(BLOCK_BYTES, SUPERBLOCK_BYTES), (1024, 4096)] {
            let plan = Plan {
                kern,
                block_bytes,
                superblock_bytes,
            };
            check_all(plan, base, queries, metric, k);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, .. ProptestConfig::default() })]

    #[test]
    fn matches_oracle_f32(n in 1usize..260, nq in 1usize..30, dim in 1usize..40, k in 1usize..100,
                          seed in any::<u64>(), levels in prop_oneof![Just(0u32), Just(3u32)],
                          dup in any::<bool>()) {
        let base = random_set::<f32>(n, dim, seed, levels, dup);
        let queries = random_set::<f32>(nq, dim, seed ^ 1, levels, false);
        for m in Metric::ALL {
            check_every_kernel(&base, &queries, m, k);
        }
    }

    #[test]
    fn matches_oracle_u8(n in 1usize..70, nq in 1usize..20, dim in 1usize..35, k in 1usize..80,
                         seed in any::<u64>(), levels in prop_oneof![Just(0u32), Just(3u32)],
                         dup in any::<bool>()) {
        let base = random_set::<u8>(n, dim, seed, levels, dup);
        let queries = random_set::<u8>(nq, dim, seed ^ 1, levels, false);
        for m in Metric::ALL {
            check_every_kernel(&base, &queries, m, k);
        }
    }

    #[test]
    fn matches_oracle_i8(n in 1usize..70, nq in 1usize..20, dim in 1usize..35, k in 1usize..80,
                         seed in any::<u64>(), levels in prop_oneof![Just(0u32), Just(3u32)],
                         dup in any::<bool>()) {
        let base = random_set::<i8>(n, dim, seed, levels, dup);
        let queries = random_set::<i8>(nq, dim, seed ^ 1, levels, false);
        for m in Metric::ALL {
            check_every_kernel(&base, &queries, m, k);
        }
    }

    #[test]
    fn matches_oracle_f16(n in 1usize..70, nq in 1usize..20, dim in 1usize..35, k in 1usize..80,
                          seed in any::<u64>(), levels in prop_oneof![Just(0u32), Just(3u32)],
                          dup in any::<bool>()) {
        let base = random_set::<f16>(n, dim, seed, levels, dup);
        let queries = random_set::<f16>(nq, dim, seed ^ 1, levels, false);
        for m in Metric::ALL {
            check_every_kernel(&base, &queries, m, k);
        }
    }
}

#[test]
fn block_boundaries_and_large_k() {
    // Sizes around the tile, block and task edges of every kernel, and k above 32 and 1024.
    for &(n, nq, dim, k) in &[
        (31usize, 13usize, 3usize, 5usize),
        (32, 12, 16, 32),
        (33, 25, 17, 33),
        (64, 193, 8, 40),
        (1100, 7, 5, 1030),
        (700, 40, 129, 64),
    ] {
        let base = random_set::<f32>(n, dim, n as u64, 0, false);
        let queries = random_set::<f32>(nq, dim, 7, 0, false);
        check_every_kernel(&base, &queries, Metric::L2Squared, k);
    }
}

#[test]
fn superblocks_and_splits() {
    // Enough rows for several cache blocks with few queries (the base is split across threads).
    // 40 queries take the blocked path; 3 take the direct scan.
    let base = random_set::<f32>(9000, 24, 3, 0, true);
    let queries = random_set::<f32>(40, 24, 4, 0, false);
    let ctx = BuildCtx::default().with_threads(Some(2));
    for m in Metric::ALL {
        let res = exact_search(base.view(), queries.view(), m, 50, &ctx).unwrap();
        for q in 0..40 {
            let want = oracle(base.view(), queries.row(q), INVALID, m, 50);
            assert_rows_match(res.row_ids(q), res.row_dists(q), &want, "split");
        }
        let few = DatasetView::new(&queries.as_slice()[..3 * 24], 3, 24).unwrap();
        let res = exact_search(base.view(), few, m, 50, &ctx).unwrap();
        for q in 0..3 {
            let want = oracle(base.view(), queries.row(q), INVALID, m, 50);
            assert_rows_match(res.row_ids(q), res.row_dists(q), &want, "direct");
        }
    }
}

#[test]
fn heavy_ties_spill_to_exact() {
    // Few distinct values: far more near-ties than the candidate list holds.
    for &(n, k) in &[(600usize, 3usize), (600, 40), (300, 150)] {
        let base = random_set::<f32>(n, 3, n as u64 + k as u64, 2, true);
        let queries = random_set::<f32>(9, 3, 99, 2, false);
        for m in Metric::ALL {
            check_every_kernel(&base, &queries, m, k);
        }
        let bytes = random_set::<u8>(n, 2, 5, 3, true);
        check_every_kernel(&bytes, &bytes, Metric::L2Squared, k);
    }
}

#[test]
fn all_equal_points_tie_by_id() {
    let base = Dataset::from_vec(vec![1.5f32; 400 * 3], 400, 3).unwrap();
    let ctx = BuildCtx::default();
    for m in Metric::ALL {
        let g = exact_knn_graph(base.view(), m, 5, &ctx).unwrap();
        assert_eq!(g.row_ids(0), &[1, 2, 3, 4, 5]);
        assert_eq!(g.row_ids(7), &[0, 1, 2, 3, 4]);
        g.validate().unwrap();
    }
}

#[test]
fn zero_and_extreme_vectors() {
    // Zero vectors (cosine 1), tiny and huge norms (which bypass the filter).
    let mut v = vec![0f32; 6 * 2];
    v[2..4].copy_from_slice(&[1e-25, 2e-25]);
    v[4..6].copy_from_slice(&[3e18, -1e18]);
    v[6..8].copy_from_slice(&[1.0, 0.5]);
    v[8..10].copy_from_slice(&[-2.0, 0.25]);
    v[10..12].copy_from_slice(&[1e-30, 0.0]);
    let base = Dataset::from_vec(v, 6, 2).unwrap();
    for m in Metric::ALL {
        check_every_kernel(&base, &base, m, 6);
    }
}

#[test]
fn neighbors_of_matches_graph_rows() {
    let data = random_set::<u8>(300, 20, 11, 0, true);
    let ctx = BuildCtx::default().with_threads(Some(2));
    let g = ExactKnn
        .build(data.view(), Metric::L2Squared, 12, &NoParams {}, &ctx)
        .unwrap();
    g.validate().unwrap();
    // A few rows (direct scan) and many, with repeats (blocked path).
    let many: Vec<u32> = (0..120u32).map(|i| (i * 37) % 300).collect();
    for rows in [&[5u32, 299, 0, 5][..], &many[..]] {
        let nb = exact_neighbors_of(data.view(), Metric::L2Squared, rows, 12, &ctx).unwrap();
        for (i, &r) in rows.iter().enumerate() {
            assert_eq!(nb.row_ids(i), g.row_ids(r as usize));
            assert_eq!(nb.row_dists(i), g.row_dists(r as usize));
        }
    }
    assert_eq!(ExactKnn.name(), "exact");
}

#[test]
fn same_result_for_any_thread_count() {
    let base = random_set::<f32>(900, 33, 5, 0, true);
    let queries = random_set::<f32>(250, 33, 6, 0, false);
    let one = BuildCtx::default().with_threads(Some(1));
    let two = BuildCtx::default().with_threads(Some(2));
    let a = exact_search(base.view(), queries.view(), Metric::Cosine, 20, &one).unwrap();
    let b = exact_search(base.view(), queries.view(), Metric::Cosine, 20, &two).unwrap();
    assert_eq!(a, b);
}

#[test]
fn cancellation_is_reported() {
    let base = random_set::<f32>(200, 8, 1, 0, false);
    let cancel = CancelToken::new();
    cancel.cancel();
    let ctx = BuildCtx::default().with_cancel(cancel);
    assert!(matches!(
        exact_search(base.view(), base.view(), Metric::L2Squared, 3, &ctx),
        Err(Error::Cancelled)
    ));
    assert!(matches!(
        exact_knn_graph(base.view(), Metric::L2Squared, 3, &ctx),
        Err(Error::Cancelled)
    ));
    assert!(matches!(
        exact_neighbors_of(base.view(), Metric::L2Squared, &[1], 3, &ctx),
        Err(Error::Cancelled)
    ));
}

#[test]
fn cancellation_midway_stops_the_work() {
    use std::sync::Arc;
    /// Cancels its token at the first progress report.
    struct CancelOnAdvance(CancelToken);
    impl weft_core::Progress for CancelOnAdvance {
        fn begin(&self, _: &str, _: Option<u64>) {}
        fn advance(&self, _: u64) {
            self.0.cancel();
        }
    }
    let base = random_set::<f32>(20_000, 8, 1, 0, false);
    let queries = random_set::<f32>(1000, 8, 2, 0, false);
    for nq in [1000, 3] {
        let q = DatasetView::new(&queries.as_slice()[..nq * 8], nq, 8).unwrap();
        let cancel = CancelToken::new();
        let ctx = BuildCtx::default()
            .with_threads(Some(2))
            .with_cancel(cancel.clone())
            .with_progress(Arc::new(CancelOnAdvance(cancel)));
        assert!(matches!(
            exact_search(base.view(), q, Metric::L2Squared, 5, &ctx),
            Err(Error::Cancelled)
        ));
    }
}

#[test]
fn progress_is_reported() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU64, Ordering};
    struct Count(AtomicU64, AtomicU64);
    impl weft_core::Progress for Count {
        fn begin(&self, _: &str, total: Option<u64>) {
            self.0.store(total.unwrap_or(0), Ordering::Relaxed);
        }
        fn advance(&self, d: u64) {
            self.1.fetch_add(d, Ordering::Relaxed);
        }
    }
    let p = Arc::new(Count(AtomicU64::new(0), AtomicU64::new(0)));
    let ctx = BuildCtx::default().with_progress(p.clone());
    let base = random_set::<f32>(500, 8, 1, 0, false);
    exact_knn_graph(base.view(), Metric::L2Squared, 4, &ctx).unwrap();
    let total = p.0.load(Ordering::Relaxed);
    assert!(total > 0);
    assert_eq!(p.1.load(Ordering::Relaxed), total);
}

#[test]
fn bad_inputs_are_typed_errors() {
    let ctx = BuildCtx::default();
    let base = random_set::<f32>(10, 4, 1, 0, false);
    let q3 = random_set::<f32>(2, 3, 1, 0, false);
    let empty = DatasetView::<f32>::new(&[], 0, 4).unwrap();
    let b = base.view();
    assert!(matches!(
        exact_search(b, q3.view(), Metric::L2Squared, 1, &ctx),
        Err(Error::DimensionMismatch { .. })
    ));
    assert!(matches!(
        exact_search(b, b, Metric::L2Squared, 0, &ctx),
        Err(Error::InvalidParams { .. })
    ));
    assert!(matches!(
        exact_search(b, b, Metric::L2Squared, 11, &ctx),
        Err(Error::InvalidParams { .. })
    ));
    assert!(exact_search(b, b, Metric::L2Squared, 10, &ctx).is_ok());
    assert!(matches!(
        exact_search(empty, b, Metric::L2Squared, 1, &ctx),
        Err(Error::InvalidInput(_))
    ));
    assert!(matches!(
        exact_search(b, empty, Metric::L2Squared, 1, &ctx),
        Err(Error::InvalidInput(_))
    ));
    assert!(matches!(
        exact_knn_graph(b, Metric::L2Squared, 10, &ctx),
        Err(Error::InvalidParams { .. })
    ));
    assert!(matches!(
        exact_knn_graph(b, Metric::L2Squared, 0, &ctx),
        Err(Error::InvalidParams { .. })
    ));
    assert!(matches!(
        exact_knn_graph(empty, Metric::L2Squared, 1, &ctx),
        Err(Error::InvalidInput(_))
    ));
    assert!(matches!(
        exact_neighbors_of(b, Metric::L2Squared, &[10], 2, &ctx),
        Err(Error::InvalidInput(_))
    ));
    assert!(matches!(
        exact_neighbors_of(b, Metric::L2Squared, &[], 2, &ctx),
        Err(Error::InvalidInput(_))
    ));
    assert!(matches!(
        exact_neighbors_of(b, Metric::L2Squared, &[1], 10, &ctx),
        Err(Error::InvalidParams { .. })
    ));
    let mut nan = base.clone();
    nan.as_mut_slice()[4 * 3 + 2] = f32::NAN;
    assert!(matches!(
        exact_search(nan.view(), b, Metric::L2Squared, 1, &ctx),
        Err(Error::NonFinite { row: 3, col: 2, .. })
    ));
    assert!(matches!(
        exact_search(b, nan.view(), Metric::L2Squared, 1, &ctx),
        Err(Error::NonFinite { row: 3, col: 2, .. })
    ));
    let zero_threads = BuildCtx::default().with_threads(Some(0));
    assert!(matches!(
        exact_search(b, b, Metric::L2Squared, 1, &zero_threads),
        Err(Error::InvalidParams { .. })
    ));
}

#[test]
fn strided_views_work() {
    // A view whose rows are 5 apart but 3 wide.
    let raw: Vec<f32> = (0..50).map(|i| ((i * 7) % 11) as f32).collect();
    let v = DatasetView::with_stride(&raw, 10, 3, 5).unwrap();
    let owned = v.to_dataset();
    let ctx = BuildCtx::default();
    for m in Metric::ALL {
        let a = exact_knn_graph(v, m, 4, &ctx).unwrap();
        let b = exact_knn_graph(owned.view(), m, 4, &ctx).unwrap();
        assert_eq!(a.ids(), b.ids());
        assert_eq!(a.dists(), b.dists());
    }
}
