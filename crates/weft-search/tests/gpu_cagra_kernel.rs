//! The CAGRA search kernels at the device level: the launch plan (no GPU needed), a search
//! over a graph the GPU optimiser left on the device against the exact GPU search, and the
//! entry points beyond the first candidate buffer (proptest against a CPU brute force over the
//! entry points; two clusters with no edge between them). The oracle tests against the CPU beam
//! search, filters, k up to 1024 and batch independence are in `weft-search/tests/gpu_cagra.rs`.

#![cfg(feature = "cuda")]

use proptest::prelude::*;
use weft_cagra::gpu::CagraOptimizer;
use weft_core::{BuildCtx, Dataset, DatasetView, Error, FixedDegreeGraph, INVALID, Metric, NodeId};
use weft_exact::ExactGpu;
use weft_gpu::testing::gpu_or_skip;
use weft_gpu::{DeviceKnnGraph, DeviceMatrix};
use weft_search::gpu::DeviceSearchInputs;
use weft_search::gpu::cagra::{
    CagraSearchDevice, CagraSearchMode, CagraSearchParams, CagraSearchShape, CagraSearchTuning,
    auto_team_size, plan, plan_with_entries,
};

/// The shape of a search of `n` points of `dim` elements of `elem_bytes` bytes, a graph of
/// `degree`, `nq` queries and `k` results.
fn shape(
    n: usize,
    dim: usize,
    elem_bytes: usize,
    degree: usize,
    nq: usize,
    k: usize,
    filtered: bool,
) -> CagraSearchShape {
    CagraSearchShape {
        n,
        dim,
        elem_bytes,
        degree,
        nq,
        k,
        filtered,
    }
}

fn cfg(beam_width: usize, mode: CagraSearchMode) -> CagraSearchParams {
    CagraSearchParams {
        beam_width,
        tuning: CagraSearchTuning {
            mode,
            ..Default::default()
        },
        ..Default::default()
    }
}

#[test]
fn cagra_search_plan_rules() {
    assert_eq!(auto_team_size(128, 4), 8);
    assert_eq!(auto_team_size(960, 4), 32);
    assert_eq!(auto_team_size(128, 2), 4);
    assert_eq!(auto_team_size(3, 4), 4);
    // Auto: multi-CTA for a batch below 2 x SMs or beam_width > 512.
    let p = plan(
        132,
        shape(10_000, 128, 4, 64, 1, 10, false),
        &cfg(64, CagraSearchMode::Auto),
    )
    .unwrap();
    assert_eq!(p.mode, CagraSearchMode::MultiCta);
    assert_eq!(
        (p.ctas_per_query, p.block_list_len, p.table_mode),
        (2, 32, 2)
    );
    // One block per query (beam_width 32, width 1): nothing to share, so the table is in shared
    // memory (no fill kernel, no global atomics), and the block has one team per candidate.
    let p = plan(
        132,
        shape(10_000, 128, 4, 64, 1, 10, false),
        &cfg(32, CagraSearchMode::Auto),
    )
    .unwrap();
    assert_eq!(p.mode, CagraSearchMode::MultiCta);
    assert_eq!(
        (p.ctas_per_query, p.table_mode, p.block_threads),
        (1, 0, 512)
    );
    let p = plan(
        132,
        shape(10_000, 128, 4, 64, 10_000, 10, false),
        &cfg(64, CagraSearchMode::Auto),
    )
    .unwrap();
    assert_eq!(p.mode, CagraSearchMode::SingleCta);
    assert_eq!((p.team_size, p.candidates, p.table_mode), (8, 64, 0));
    assert_eq!(p.max_iterations, 72); // 1 + min(ceil(1.1 x 64), 64 + 10)
    assert!(p.shared_bytes <= 48 * 1024);
    let p = plan(
        132,
        shape(10_000, 128, 4, 64, 10_000, 10, false),
        &cfg(600, CagraSearchMode::Auto),
    )
    .unwrap();
    assert_eq!((p.mode, p.ctas_per_query), (CagraSearchMode::MultiCta, 19));
    // Large lists with a filter move the visited table to global memory.
    let p = plan(
        132,
        shape(10_000, 128, 4, 64, 10_000, 10, true),
        &cfg(1024, CagraSearchMode::SingleCta),
    )
    .unwrap();
    assert_eq!(p.table_mode, 1);
    assert!(p.shared_bytes <= 48 * 1024);
    // Entry points: up to the candidate buffer they change nothing; beyond it only the
    // multi-CTA table (never cleared) grows to hold them, while the forgettable single-CTA
    // table keeps its size (the kernel checks it between batches of entry points).
    for mode in [CagraSearchMode::SingleCta, CagraSearchMode::MultiCta] {
        let c = cfg(64, mode);
        let base = plan(132, shape(100_000, 128, 4, 64, 10_000, 10, false), &c).unwrap();
        let at =
            |e: usize| plan_with_entries(132, shape(100_000, 128, 4, 64, 10_000, 10, false), &c, e);
        assert_eq!(at(0).unwrap(), base);
        assert_eq!(at(base.candidates).unwrap(), base);
        let many = at(50_000).unwrap();
        assert_eq!(many.max_iterations, base.max_iterations);
        if mode == CagraSearchMode::MultiCta {
            assert_eq!(base.hash_bits, 14); // 2 x 2 x (32 + 64 x 36) slots
            assert_eq!(many.hash_bits, 17); // and 2 x (50,000 - 64) more
        } else {
            assert_eq!(many, base);
        }
    }
    // Bad parameters.
    let bad = |c: CagraSearchParams, k: usize| {
        plan(132, shape(1000, 16, 4, 32, 100, k, false), &c).unwrap_err()
    };
    assert!(matches!(
        bad(cfg(8, CagraSearchMode::Auto), 10),
        Error::InvalidParams { .. }
    ));
    assert!(matches!(
        bad(cfg(2000, CagraSearchMode::Auto), 10),
        Error::InvalidParams { .. }
    ));
    assert!(matches!(
        bad(
            CagraSearchParams {
                tuning: CagraSearchTuning {
                    search_width: 0,
                    ..Default::default()
                },
                ..Default::default()
            },
            10
        ),
        Error::InvalidParams { .. }
    ));
    assert!(matches!(
        bad(
            CagraSearchParams {
                tuning: CagraSearchTuning {
                    team_size: 3,
                    ..Default::default()
                },
                ..Default::default()
            },
            10
        ),
        Error::InvalidParams { .. }
    ));
    assert!(matches!(
        bad(
            CagraSearchParams {
                tuning: CagraSearchTuning {
                    search_width: 33,
                    ..Default::default()
                },
                ..Default::default()
            },
            10
        ),
        Error::InvalidParams { .. }
    ));
    assert!(matches!(
        bad(
            CagraSearchParams {
                tuning: CagraSearchTuning {
                    max_iterations: 3,
                    min_iterations: 4,
                    ..Default::default()
                },
                ..Default::default()
            },
            10
        ),
        Error::InvalidParams { .. }
    ));
    // A row too long for shared memory is a typed error, not a launch failure.
    assert!(matches!(
        plan(
            132,
            shape(1000, 20_000, 4, 32, 100, 10, false),
            &CagraSearchParams::default()
        ),
        Err(Error::InvalidParams { .. })
    ));
}

#[test]
fn cagra_search_device_graph_against_exact() {
    let Some(ctx) = gpu_or_skip("cagra_search_device_graph_against_exact") else {
        return;
    };
    let (n, nq, dim) = (3000, 64, 20);
    let mut rng = weft_core::rng::SplitMix64::new(3);
    let mut vals = |rows: usize| {
        let v: Vec<f32> = (0..rows * dim)
            .map(|_| rng.next_gaussian() as f32)
            .collect();
        Dataset::from_vec(v, rows, dim).unwrap()
    };
    let (base, queries) = (vals(n), vals(nq));
    let exact = ExactGpu::new(&ctx);
    let knn = exact
        .knn_graph(base.view(), Metric::L2Squared, 32, &BuildCtx::new(1))
        .unwrap();
    let dknn = DeviceKnnGraph::upload(&ctx, &knn).unwrap();
    let graph = CagraOptimizer::new(&ctx)
        .optimize_device(&dknn, 16)
        .unwrap();
    let d = DeviceMatrix::upload(&ctx, base.view()).unwrap();
    let q = DeviceMatrix::upload(&ctx, queries.view()).unwrap();
    let truth = exact
        .search(base.view(), queries.view(), Metric::L2Squared, 10)
        .unwrap();
    for mode in [CagraSearchMode::SingleCta, CagraSearchMode::MultiCta] {
        let inputs = DeviceSearchInputs {
            data: &d,
            graph: &graph,
            entries: &[0],
            queries: &q,
        };
        let (found, stats) = CagraSearchDevice::new(&ctx)
            .search_device(inputs, Metric::L2Squared, 10, &cfg(64, mode))
            .unwrap();
        assert_eq!(stats.queries, nq as u64);
        assert!(stats.distance_computations > 0 && stats.hops > 0);
        let mut hits = 0;
        for i in 0..nq {
            let ids = found.row_ids(i);
            assert!(ids.iter().all(|&x| x != INVALID && (x as usize) < n));
            let t = truth.row_ids(i);
            hits += ids.iter().filter(|x| t.contains(x)).count();
            // Distances are the metric's (squared L2), ascending.
            assert!(found.row_dists(i).windows(2).all(|w| w[0] <= w[1]));
            let d0 = found.row_dists(i)[0];
            let row = base.view().row(ids[0] as usize);
            let want: f32 = row
                .iter()
                .zip(queries.view().row(i))
                .map(|(a, b)| (a - b) * (a - b))
                .sum();
            assert!((d0 - want).abs() <= 1e-3 * want.max(1.0), "{d0} vs {want}");
        }
        let recall = hits as f64 / (nq * 10) as f64;
        println!("{mode:?}: recall@10 {recall:.3}");
        assert!(recall >= 0.9, "{mode:?}: recall {recall}");
    }
}

/// Proptest cases per oracle test (`WEFT_GPU_CASES`, default 12).
fn cases() -> u32 {
    std::env::var("WEFT_GPU_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(12)
}

/// `rows x dim` values that are small non-zero integers (so L2 and inner-product distances are
/// exact in f32 on both sides, and no row is zero, for cosine).
fn small_ints(rows: usize, dim: usize, rng: &mut weft_core::rng::SplitMix64) -> Vec<f32> {
    (0..rows * dim)
        .map(|_| {
            let v = rng.below(8) as f32 + 1.0;
            if rng.below(2) == 0 { v } else { -v }
        })
        .collect()
}

/// Per query, the (distance, id) pairs of the distinct entry points (allowed by `filter`), best
/// first (ties by id, as the kernel orders them).
fn entries_by_distance(
    base: DatasetView<'_, f32>,
    queries: DatasetView<'_, f32>,
    metric: Metric,
    entries: &[NodeId],
    filter: Option<&[u32]>,
) -> Vec<Vec<(f32, NodeId)>> {
    let mut distinct: Vec<NodeId> = entries
        .iter()
        .copied()
        .filter(|&e| filter.is_none_or(|f| (f[e as usize / 32] >> (e % 32)) & 1 == 1))
        .collect();
    distinct.sort_unstable();
    distinct.dedup();
    (0..queries.rows())
        .map(|q| {
            let mut v: Vec<(f32, NodeId)> = distinct
                .iter()
                .map(|&e| (metric.distance(queries.row(q), base.row(e as usize)), e))
                .collect();
            v.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
            v
        })
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), ..ProptestConfig::default() })]

    /// With more entry points than the candidate buffer holds (`mult x C + extra`, duplicates
    /// possible), every one of them is scored. On a graph with no edges a single-CTA search
    /// returns exactly the k nearest (allowed) entry points, ties by id (the same ids for a
    /// query searched alone); otherwise (random edges, or multi-CTA, whose other blocks start
    /// from random points) the i-th result is at least as near as the i-th nearest entry point.
    /// Entry counts up to 20 x C push the forgettable table through clears between entry
    /// batches; beam_width 1024 with a filter puts it in global memory.
    #[test]
    fn cagra_search_scores_every_entry_point(
        n_extra in 50usize..1500,
        dim in prop::sample::select(vec![3usize, 16, 33]),
        metric in prop::sample::select(Metric::ALL.to_vec()),
        degree in prop::sample::select(vec![8usize, 16, 32, 64]),
        // Up to 4 x 64 = 256 candidates: buffers of at most 128 are sorted by rank counting,
        // larger ones by the bitonic sort; both paths meet the same exact answers.
        width in 1usize..5,
        beam_width in prop::sample::select(vec![32usize, 64, 128, 1024]),
        mult in 1usize..21,
        extra in 1usize..40,
        k in 1usize..21,
        filtered in any::<bool>(),
        multi in any::<bool>(),
        edges in any::<bool>(),
        seed in any::<u64>(),
    ) {
        let Some(ctx) = gpu_or_skip("cagra_search_scores_every_entry_point") else {
            return Ok(());
        };
        let mode = if multi { CagraSearchMode::MultiCta } else { CagraSearchMode::SingleCta };
        let c = CagraSearchParams { beam_width, seed, tuning: CagraSearchTuning { search_width: width, mode, ..Default::default() }, ..Default::default() };
        let nq = 24;
        let cand = plan(132, shape(1 << 20, dim, 4, degree, nq, k, filtered), &c).unwrap().candidates;
        let n_entries = mult * cand + extra;
        let n = n_entries + n_extra;
        let mut rng = weft_core::rng::SplitMix64::new(seed);
        let base = small_ints(n, dim, &mut rng);
        let queries = small_ints(nq, dim, &mut rng);
        let (bv, qv) = (DatasetView::new(&base, n, dim).unwrap(), DatasetView::new(&queries, nq, dim).unwrap());
        let entries: Vec<NodeId> = (0..n_entries).map(|_| rng.below(n as u64) as NodeId).collect();
        let ids: Vec<NodeId> = if edges {
            (0..n * degree).map(|_| rng.below(n as u64) as NodeId).collect()
        } else {
            vec![INVALID; n * degree]
        };
        let graph = FixedDegreeGraph::new(n, degree, ids).unwrap().with_entry_points(entries.clone());
        let filter: Option<Vec<u32>> = filtered.then(|| {
            let mut f = vec![0u32; n.div_ceil(32)];
            for i in 0..n {
                if weft_core::rng::SplitMix64::new(seed ^ i as u64).below(3) != 0 {
                    f[i / 32] |= 1 << (i % 32);
                }
            }
            f
        });
        let dev = CagraSearchDevice::new(&ctx);
        let c = CagraSearchParams { filter: filter.clone(), ..c };
        let (found, _) = dev.search(bv, &graph, qv, metric, k, &c).unwrap();
        let want = entries_by_distance(bv, qv, metric, &entries, filter.as_deref());
        let tol = |x: f32| 1e-4 * x.abs().max(1.0);
        for (q, w) in want.iter().enumerate() {
            let (ids, ds) = (found.row_ids(q), found.row_dists(q));
            let valid: Vec<NodeId> = ids.iter().copied().take_while(|&x| x != INVALID).collect();
            prop_assert!(ids[valid.len()..].iter().all(|&x| x == INVALID), "query {q}: {ids:?}");
            let mut sorted = valid.clone();
            sorted.sort_unstable();
            sorted.dedup();
            prop_assert_eq!(sorted.len(), valid.len(), "query {}: duplicates in {:?}", q, ids);
            prop_assert!(valid.iter().all(|&x| (x as usize) < n));
            if let Some(f) = &filter {
                prop_assert!(valid.iter().all(|&x| (f[x as usize / 32] >> (x % 32)) & 1 == 1));
            }
            prop_assert!(ds[..valid.len()].windows(2).all(|w| w[0] <= w[1]), "query {q}: {ds:?}");
            if !multi && !edges {
                // Exactly the k nearest entry points.
                prop_assert_eq!(valid.len(), k.min(w.len()), "query {}", q);
                for (i, &(d, e)) in w.iter().take(k).enumerate() {
                    prop_assert!((ds[i] - d).abs() <= tol(d), "query {q} rank {i}: {} vs {d}", ds[i]);
                    if metric != Metric::Cosine {
                        prop_assert_eq!(ids[i], e, "query {} rank {} ({:?})", q, i, metric);
                    }
                }
            } else {
                // At least as good as the entry points, rank by rank.
                prop_assert!(valid.len() >= k.min(w.len()), "query {q}: {} results", valid.len());
                for (i, &(d, _)) in w.iter().take(k).enumerate() {
                    prop_assert!(ds[i] <= d + tol(d), "query {q} rank {i}: {} > entry {d}", ds[i]);
                }
            }
        }
        if !multi {
            // Single-CTA: a query's result does not depend on its batch.
            let last = nq - 1;
            let alone = DatasetView::new(&queries[last * dim..], 1, dim).unwrap();
            let (one, _) = dev.search(bv, &graph, alone, metric, k, &c).unwrap();
            prop_assert_eq!(one.row_ids(0), found.row_ids(last));
            prop_assert_eq!(one.row_dists(0), found.row_dists(last));
        }
    }
}

/// Two far-apart clusters and a graph with no edge between them: the queries of a cluster
/// reach it only through its entry points. The second cluster's entry points come after 3 x C
/// entry points of the first, beyond the first candidate buffer (a kernel that scores only the
/// first C entry points never leaves the first cluster in single-CTA mode), and the recall@10 of
/// both clusters' queries must still be about 1.
#[test]
fn cagra_search_entry_points_reach_every_cluster() {
    let Some(ctx) = gpu_or_skip("cagra_search_entry_points_reach_every_cluster") else {
        return;
    };
    let (per, nq_per, dim, k) = (2000usize, 100usize, 16usize, 10usize);
    let mut rng = weft_core::rng::SplitMix64::new(29);
    let mut cluster = |rows: usize, centre: f32| -> Vec<f32> {
        (0..rows * dim)
            .map(|_| centre + rng.next_gaussian() as f32)
            .collect()
    };
    let mut base = cluster(per, 0.0);
    base.extend(cluster(per, 100.0));
    let mut queries = cluster(nq_per, 0.0);
    queries.extend(cluster(nq_per, 100.0));
    let n = 2 * per;
    let nq = 2 * nq_per;
    let base = Dataset::from_vec(base, n, dim).unwrap();
    let queries = Dataset::from_vec(queries, nq, dim).unwrap();
    let exact = ExactGpu::new(&ctx);
    let knn = exact
        .knn_graph(base.view(), Metric::L2Squared, 32, &BuildCtx::new(1))
        .unwrap();
    let degree = 16;
    let graph = CagraOptimizer::new(&ctx).optimize(&knn, degree).unwrap();
    let side = |v: usize| v / per;
    for v in 0..n {
        for &u in graph.ids()[v * degree..(v + 1) * degree].iter() {
            assert!(
                u == INVALID || side(u as usize) == side(v),
                "edge {v} -> {u} joins the clusters"
            );
        }
    }
    let truth = exact
        .search(base.view(), queries.view(), Metric::L2Squared, k)
        .unwrap();
    for mode in [CagraSearchMode::SingleCta, CagraSearchMode::MultiCta] {
        let c = CagraSearchParams {
            beam_width: 64,
            tuning: CagraSearchTuning {
                mode,
                search_width: 4,
                ..Default::default()
            },
            ..Default::default()
        };
        let p = plan(132, shape(n, dim, 4, degree, nq, k, false), &c).unwrap();
        // 3 x C + 5 entry points: 3 x C in the first cluster, then 5 in the second.
        let cand = p.candidates;
        let mut entries: Vec<NodeId> = (0..3 * cand)
            .map(|i| (i * per / (3 * cand)) as NodeId)
            .collect();
        entries.extend((0..5).map(|i| (per + i * per / 5) as NodeId));
        let g = graph.clone().with_entry_points(entries);
        let (found, _) = CagraSearchDevice::new(&ctx)
            .search(base.view(), &g, queries.view(), Metric::L2Squared, k, &c)
            .unwrap();
        for (name, qs) in [("first", 0..nq_per), ("second", nq_per..nq)] {
            let mut hits = 0;
            for q in qs {
                let t = truth.row_ids(q);
                hits += found.row_ids(q).iter().filter(|x| t.contains(x)).count();
            }
            let recall = hits as f64 / (nq_per * k) as f64;
            println!(
                "{mode:?}, C = {cand}: recall@{k} of the {name} cluster's queries {recall:.3}"
            );
            assert!(
                recall >= 0.97,
                "{mode:?}: recall {recall} in the {name} cluster"
            );
        }
    }
}
