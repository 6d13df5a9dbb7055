//! The f16 traversal of the GPU CAGRA search (`SearchPrecision::F16`, `weft_search::gpu::rerank`):
//! the conversion kernel bit for bit against `half::f16::from_f32`, the rerank kernel against a
//! CPU reference (proptest: random ids with INVALID, out-of-range ids and duplicates; L2, inner
//! product, cosine), the recall of the f16 traversal against the exact one at the same list
//! size (random, clustered and unit-norm data; sessions, one-shot searches, filters, multi-CTA)
//! with exact f32 distances returned, and the parameter errors. The parameter checks need no
//! GPU; the others skip without one (and fail with `WEFT_REQUIRE_GPU=1`).

#![cfg(feature = "cuda")]

use half::f16;
use proptest::prelude::*;
use weft_cagra::gpu::CagraOptimizer;
use weft_core::Filter;
use weft_core::{
    BuildCtx, Dataset, DatasetView, Error, FixedDegreeGraph, GraphView, INVALID, Metric, Neighbors,
    Params, Searcher,
};
use weft_exact::ExactGpu;
use weft_exact::exact_search_filtered;
use weft_gpu::testing::gpu_or_skip;
use weft_gpu::{DeviceKnnGraph, DeviceMatrix, GpuContext};
use weft_search::gpu::DeviceSearchInputs;
use weft_search::gpu::cagra::{
    CagraSearchDevice, CagraSearchGpu, CagraSearchMode, CagraSearchParams, CagraSearchSession,
    CagraSearchShape, CagraSearchTuning, SearchPrecision, plan,
};
use weft_search::gpu::rerank::{CandidateLists, half_copy, rerank_lists};
use weft_testkit::graph::{clustered_set, gaussian_mixture, ground_truth, recall_at_k};

const METRICS: [Metric; 3] = [Metric::L2Squared, Metric::InnerProduct, Metric::Cosine];

/// The parameter name of an `InvalidParams` error (panics on any other result).
fn invalid_name<T: std::fmt::Debug>(r: weft_core::Result<T>) -> String {
    match r {
        Err(Error::InvalidParams { name, .. }) => name,
        other => panic!("expected InvalidParams, got {other:?}"),
    }
}

fn f16_params(beam_width: usize, mode: CagraSearchMode) -> CagraSearchParams {
    CagraSearchParams {
        beam_width,
        tuning: CagraSearchTuning {
            mode,
            traversal: SearchPrecision::F16,
            ..Default::default()
        },
        ..Default::default()
    }
}

/// The distance of `a` and `b` in f64 (the reference the GPU's f32 distances are held to).
fn ref_distance(metric: Metric, a: &[f32], b: &[f32]) -> f64 {
    let (mut l2, mut dot, mut na, mut nb) = (0f64, 0f64, 0f64, 0f64);
    for (&x, &y) in a.iter().zip(b) {
        let (x, y) = (x as f64, y as f64);
        l2 += (x - y) * (x - y);
        dot += x * y;
        na += x * x;
        nb += y * y;
    }
    match metric {
        Metric::L2Squared => l2,
        Metric::InnerProduct => -dot,
        Metric::Cosine => {
            let d = (na * nb).sqrt();
            if d > 0.0 { 1.0 - dot / d } else { 1.0 }
        }
    }
}

/// How far an f32 distance of `a` and `b` may be from [`ref_distance`].
fn tolerance(metric: Metric, a: &[f32], b: &[f32]) -> f64 {
    let sq = |v: &[f32]| v.iter().map(|&x| (x as f64) * (x as f64)).sum::<f64>();
    match metric {
        Metric::Cosine => 3e-5,
        _ => 1e-5 * (1.0 + sq(a) + sq(b)),
    }
}

#[test]
fn f16_params_are_checked_without_a_gpu() {
    let k = 10;
    let mut p = f16_params(64, CagraSearchMode::SingleCta);
    assert_eq!(p.rerank_len(k).unwrap(), 64, "0 reranks the whole list");
    p.tuning.rerank = 32;
    assert_eq!(p.rerank_len(k).unwrap(), 32);
    p.tuning.rerank = 5;
    assert_eq!(invalid_name(p.rerank_len(k)), "rerank", "rerank below k");
    p.tuning.rerank = 65;
    assert_eq!(
        invalid_name(p.rerank_len(k)),
        "rerank",
        "rerank above the beam width"
    );
    assert_eq!(invalid_name(p.validate(100, 8)), "rerank");
    let exact = CagraSearchParams {
        tuning: CagraSearchTuning {
            rerank: 32,
            ..Default::default()
        },
        ..Default::default()
    };
    assert_eq!(
        invalid_name(exact.rerank_len(k)),
        "rerank",
        "rerank with exact"
    );
    assert_eq!(invalid_name(exact.validate(100, 8)), "rerank");
    assert_eq!(CagraSearchParams::default().rerank_len(k).unwrap(), 0);
    // The plan refuses a rerank count below k, before any device work.
    let p = CagraSearchParams {
        tuning: CagraSearchTuning {
            rerank: 8,
            ..Default::default()
        },
        ..f16_params(64, CagraSearchMode::SingleCta)
    };
    let shape = CagraSearchShape {
        n: 1000,
        dim: 32,
        elem_bytes: 2,
        degree: 16,
        nq: 100,
        k: 10,
        filtered: false,
    };
    assert_eq!(invalid_name(plan(132, shape, &p)), "rerank");
    // Names round-trip; serde uses the same.
    for s in [SearchPrecision::Exact, SearchPrecision::F16] {
        assert_eq!(s.name().parse::<SearchPrecision>().unwrap(), s);
        assert_eq!(
            serde_json::to_string(&s).unwrap(),
            format!("\"{}\"", s.name())
        );
    }
    assert!("f32".parse::<SearchPrecision>().is_err());
    // Parameters without the new fields read as exact.
    let p: CagraSearchParams = serde_json::from_str(r#"{"itopk": 32}"#).unwrap();
    assert_eq!(
        (p.tuning.traversal, p.tuning.rerank),
        (SearchPrecision::Exact, 0)
    );
}

/// f32 values whose f16 conversion is finite: random bit patterns (every exponent), and the
/// edge cases (signed zeros, subnormal f16 results, halfway cases, the largest finite f16
/// and the largest value that still rounds to it).
fn convertible() -> impl Strategy<Value = f32> {
    prop_oneof![
        any::<u32>().prop_map(f32::from_bits),
        (-70000.0f32..70000.0),
        (-1e-4f32..1e-4),
        prop::sample::select(vec![
            0.0f32,
            -0.0,
            65504.0,
            -65504.0,
            65519.996,
            -65519.996,
            5.9604645e-8,
            2.9802322e-8,
            2.9802326e-8,
            6.097555e-5,
            6.1035156e-5,
            1.0 + 1.0 / 2048.0,
            1.0 + 3.0 / 2048.0,
            0.1,
            -0.3333333,
        ]),
    ]
    .prop_filter("finite in f16", |x| {
        x.is_finite() && x.abs() < weft_search::F16_OVERFLOW
    })
}

fn gpu_cases() -> u32 {
    weft_testkit::gpu_cases(24)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: gpu_cases(), ..ProptestConfig::default() })]

    #[test]
    fn f16_conversion_is_bit_exact(
        dim in 1usize..70,
        rows in 1usize..40,
        seed in any::<u64>(),
        pool in prop::collection::vec(convertible(), 1..200),
    ) {
        let Some(ctx) = gpu_or_skip("f16_conversion_is_bit_exact") else {
            return Ok(());
        };
        let mut rng = weft_core::rng::SplitMix64::new(seed);
        let vals: Vec<f32> = (0..rows * dim)
            .map(|_| pool[rng.below(pool.len() as u64) as usize])
            .collect();
        let data = Dataset::from_vec(vals.clone(), rows, dim).unwrap();
        let d = DeviceMatrix::upload(&ctx, data.view()).unwrap();
        let h = half_copy(&ctx, &d, None).unwrap();
        prop_assert_eq!((h.rows(), h.dim(), h.stride()), (rows, dim, d.stride()));
        let got = h.download(&ctx).unwrap();
        for (i, (&x, g)) in vals.iter().zip(got.as_slice()).enumerate() {
            prop_assert_eq!(
                g.to_bits(),
                f16::from_f32(x).to_bits(),
                "element {} = {:e} ({:#010x})", i, x, x.to_bits()
            );
        }
    }

    #[test]
    fn rerank_kernel_matches_a_cpu_reference(
        n in 1usize..300,
        dim in 1usize..80,
        nq in 1usize..12,
        m in 1usize..200,
        k_frac in 0.0f64..1.0,
        metric in prop::sample::select(METRICS.to_vec()),
        seed in any::<u64>(),
    ) {
        let Some(ctx) = gpu_or_skip("rerank_kernel_matches_a_cpu_reference") else {
            return Ok(());
        };
        let k = 1 + ((m - 1) as f64 * k_frac) as usize;
        let mut rng = weft_core::rng::SplitMix64::new(seed);
        let mut vals = |rows: usize| {
            let v: Vec<f32> = (0..rows * dim).map(|_| rng.next_gaussian() as f32).collect();
            Dataset::from_vec(v, rows, dim).unwrap()
        };
        let data = vals(n);
        let queries = vals(nq);
        // Input contract: any u32; ids >= n (INVALID among them) take no part, duplicates are
        // returned once.
        let mut rng = weft_core::rng::SplitMix64::new(seed ^ 0x5eed);
        let cand: Vec<u32> = (0..nq * m)
            .map(|i| match rng.below(10) {
                0 => INVALID,
                1 => (n as u64 + rng.below(1000)) as u32,
                2 if i % m > 0 => u32::MAX - 1,
                3 | 4 => rng.below(n.min(8) as u64) as u32, // duplicates likely
                _ => rng.below(n as u64) as u32,
            })
            .collect();
        let dd = DeviceMatrix::upload(&ctx, data.view()).unwrap();
        let dq = DeviceMatrix::upload(&ctx, queries.view()).unwrap();
        let dc = ctx.upload(&cand).unwrap();
        let mut ids = ctx.alloc_zeros::<u32>(nq * k).unwrap();
        let mut dists = ctx.alloc_zeros::<f32>(nq * k).unwrap();
        let lists = CandidateLists {
            queries: dq.rows_view(0, nq).unwrap(),
            nq,
            cand: dc.view(),
            m,
        };
        rerank_lists(
            &ctx,
            &dd,
            &lists,
            metric,
            k,
            &mut ids.view_mut(),
            &mut dists.view_mut(),
        )
        .unwrap();
        let ids = ctx.download(&ids, nq * k).unwrap();
        let dists = ctx.download(&dists, nq * k).unwrap();
        for q in 0..nq {
            let qrow = queries.row(q);
            let mut valid: Vec<u32> = cand[q * m..(q + 1) * m]
                .iter()
                .copied()
                .filter(|&x| (x as usize) < n)
                .collect();
            valid.sort_unstable();
            valid.dedup();
            let got_i = &ids[q * k..(q + 1) * k];
            let got_d = &dists[q * k..(q + 1) * k];
            let want = valid.len().min(k);
            // The first `want` are distinct listed ids with their exact distances, sorted by
            // (distance, id); the rest is padding.
            for j in 0..k {
                if j >= want {
                    prop_assert_eq!(got_i[j], INVALID, "query {} slot {}", q, j);
                    prop_assert!(got_d[j] == f32::INFINITY);
                    continue;
                }
                let x = got_i[j];
                prop_assert!(valid.binary_search(&x).is_ok(), "query {}: id {} not listed", q, x);
                let row = data.row(x as usize);
                let r = ref_distance(metric, qrow, row);
                prop_assert!(
                    (got_d[j] as f64 - r).abs() <= tolerance(metric, qrow, row),
                    "query {} id {}: {} vs {}", q, x, got_d[j], r
                );
                if j > 0 {
                    prop_assert!(
                        got_d[j - 1] < got_d[j] || (got_d[j - 1] == got_d[j] && got_i[j - 1] < x),
                        "query {}: slots {} and {} out of order", q, j - 1, j
                    );
                }
            }
            let mut chosen = got_i[..want].to_vec();
            chosen.sort_unstable();
            chosen.dedup();
            prop_assert_eq!(chosen.len(), want, "query {}: duplicates returned", q);
            // Nothing left out is closer than the farthest kept (up to rounding).
            if want > 0 {
                let far = got_i[want - 1] as usize;
                let far_d = ref_distance(metric, qrow, data.row(far));
                for &x in valid.iter().filter(|x| chosen.binary_search(x).is_err()) {
                    let row = data.row(x as usize);
                    let d = ref_distance(metric, qrow, row);
                    prop_assert!(
                        d >= far_d - 2.0 * tolerance(metric, qrow, row),
                        "query {}: id {} at {} left out, {} kept at {}", q, x, d, far, far_d
                    );
                }
            }
        }
    }
}

/// A CAGRA graph (degree 32 from the exact 48-NN graph) of `base` under `metric`, with the
/// spread entry points and the connectivity repair every weft search graph gets from its
/// builder: without them a query of clustered data starts from random points only, and the
/// random points of the f16 traversal differ from the exact one's (they are keyed by the query's
/// bytes), which would compare the luck of two starts rather than the two precisions.
fn cagra_graph(ctx: &GpuContext, base: DatasetView<'_, f32>, metric: Metric) -> FixedDegreeGraph {
    let build = BuildCtx::new(1);
    let knn = ExactGpu::new(ctx)
        .knn_graph(base, metric, 48, &build)
        .unwrap();
    let graph = CagraOptimizer::new(ctx)
        .optimize_device(&DeviceKnnGraph::upload(ctx, &knn).unwrap(), 32)
        .unwrap()
        .download(ctx)
        .unwrap();
    let (graph, _) = weft_graph::connect_graph(
        graph,
        base,
        metric,
        weft_graph::connect::DEFAULT_ENTRY_POINTS,
        true,
        &build,
    )
    .unwrap();
    graph
}

/// Every returned distance is the exact f32 distance of its id (up to rounding), rows sorted.
fn assert_exact_distances(
    what: &str,
    got: &Neighbors,
    base: &Dataset<f32>,
    queries: &Dataset<f32>,
    metric: Metric,
) {
    for q in 0..got.rows() {
        let (ids, ds) = (got.row_ids(q), got.row_dists(q));
        assert!(
            ds.windows(2).all(|w| w[0] <= w[1]),
            "{what}: query {q} unsorted"
        );
        for (&x, &d) in ids.iter().zip(ds) {
            if x == INVALID {
                assert_eq!(d, f32::INFINITY, "{what}: query {q}");
                continue;
            }
            let (a, b) = (queries.row(q), base.row(x as usize));
            let r = ref_distance(metric, a, b);
            assert!(
                (d as f64 - r).abs() <= tolerance(metric, a, b),
                "{what}: query {q} id {x}: {d} returned, exact {r}"
            );
        }
    }
}

/// Rows scaled to unit norm.
fn unit_rows(d: &Dataset<f32>) -> Dataset<f32> {
    let mut v = d.as_slice().to_vec();
    for row in v.chunks_mut(d.dim()) {
        let norm = row.iter().map(|x| x * x).sum::<f32>().sqrt().max(1e-30);
        row.iter_mut().for_each(|x| *x /= norm);
    }
    Dataset::from_vec(v, d.rows(), d.dim()).unwrap()
}

/// Recall@10 of the exact and the f16 traversal at the same list size through a session (and
/// the f16 one through a one-shot `CagraSearchGpu`: the same results, single-CTA being
/// deterministic); the f16 one within 0.005 of the exact one, its distances exact.
fn compare_recall(
    ctx: &GpuContext,
    what: &str,
    base: &Dataset<f32>,
    queries: &Dataset<f32>,
    metric: Metric,
) {
    let k = 10;
    let graph = cagra_graph(ctx, base.view(), metric);
    let truth = ground_truth(base.view(), queries.view(), metric, k).unwrap();
    let mut session =
        CagraSearchSession::new(weft_gpu::probe().unwrap(), base.view(), &graph).unwrap();
    for beam_width in [32usize, 64] {
        let exact = CagraSearchParams {
            beam_width,
            tuning: CagraSearchTuning {
                mode: CagraSearchMode::SingleCta,
                ..Default::default()
            },
            ..Default::default()
        };
        let half = f16_params(beam_width, CagraSearchMode::SingleCta);
        let (want, _) = session.search(queries.view(), metric, k, &exact).unwrap();
        let (got, stats) = session.search(queries.view(), metric, k, &half).unwrap();
        assert!(stats.distance_computations > 0);
        let (r_exact, r_half) = (recall_at_k(&want, &truth, k), recall_at_k(&got, &truth, k));
        println!("{what} beam width {beam_width}: recall@10 exact {r_exact:.4}, f16 {r_half:.4}");
        assert!(
            r_exact - r_half <= 0.005,
            "{what} beam width {beam_width}: f16 recall {r_half} vs exact {r_exact}"
        );
        assert_exact_distances(what, &got, base, queries, metric);
        // The one-shot search (its own f16 copy) returns the same.
        let mut one = Neighbors::new(queries.rows(), k);
        CagraSearchGpu::new(ctx)
            .search(
                &graph,
                base.view(),
                queries.view(),
                metric,
                &half,
                one.as_mut(),
            )
            .unwrap();
        assert_eq!(
            one.ids, got.ids,
            "{what} beam width {beam_width}: one-shot vs session"
        );
        assert_eq!(one.dists, got.dists, "{what} beam width {beam_width}");
        // Reranking only part of the list: still exact distances, recall not above the whole.
        let part = CagraSearchParams {
            tuning: CagraSearchTuning {
                rerank: k,
                ..half.tuning.clone()
            },
            ..half.clone()
        };
        let (p, _) = session.search(queries.view(), metric, k, &part).unwrap();
        assert_exact_distances(what, &p, base, queries, metric);
    }
    // The f16 copy was made once, by the first f16 search; later searches allocate nothing.
    let h = session.half_traversal();
    assert!(h.has_data_copy());
    let allocs = h.allocations();
    let half = f16_params(64, CagraSearchMode::SingleCta);
    session.search(queries.view(), metric, k, &half).unwrap();
    assert_eq!(session.half_traversal().allocations(), allocs, "{what}");
}

#[test]
fn f16_traversal_recall_matches_exact_on_random_data() {
    let Some(ctx) = gpu_or_skip("f16_traversal_recall_matches_exact_on_random_data") else {
        return;
    };
    let (n, dim) = (8000, 96);
    let mut rng = weft_core::rng::SplitMix64::new(17);
    let mut vals = |rows: usize| {
        let v: Vec<f32> = (0..rows * dim)
            .map(|_| rng.next_gaussian() as f32)
            .collect();
        Dataset::from_vec(v, rows, dim).unwrap()
    };
    let base = vals(n);
    let queries = vals(400);
    compare_recall(&ctx, "random L2", &base, &queries, Metric::L2Squared);
    // Unit-norm rows (the usual inner-product and cosine data: components near 0.1, well
    // inside f16's normal range).
    let (ub, uq) = (unit_rows(&base), unit_rows(&queries));
    compare_recall(&ctx, "unit-norm ip", &ub, &uq, Metric::InnerProduct);
    compare_recall(&ctx, "random cosine", &base, &queries, Metric::Cosine);
}

#[test]
fn f16_traversal_recall_matches_exact_on_clustered_data() {
    let Some(ctx) = gpu_or_skip("f16_traversal_recall_matches_exact_on_clustered_data") else {
        return;
    };
    let (base, queries) = clustered_set(10_000, 3);
    compare_recall(&ctx, "clustered L2", &base, &queries, Metric::L2Squared);
    let (base, queries) = gaussian_mixture::<f32>(8000, 300, 128, 16, 9);
    compare_recall(&ctx, "mixture-128 L2", &base, &queries, Metric::L2Squared);
}

#[test]
fn f16_traversal_with_filter_and_multi_cta() {
    let Some(ctx) = gpu_or_skip("f16_traversal_with_filter_and_multi_cta") else {
        return;
    };
    let (base, queries) = gaussian_mixture::<f32>(6000, 300, 48, 8, 4);
    let metric = Metric::L2Squared;
    let k = 10;
    let graph = cagra_graph(&ctx, base.view(), metric);
    let filter = Filter::from_predicate(base.rows(), |i| i % 3 != 0);
    let mut truth = Neighbors::new(queries.rows(), k);
    exact_search_filtered(base.view(), queries.view(), metric, &filter, truth.as_mut()).unwrap();
    let mut session =
        CagraSearchSession::new(weft_gpu::probe().unwrap(), base.view(), &graph).unwrap();
    let exact = CagraSearchParams::with_beam_width(64).with_filter(&filter);
    let half = CagraSearchParams {
        tuning: CagraSearchTuning {
            traversal: SearchPrecision::F16,
            ..exact.tuning.clone()
        },
        ..exact.clone()
    };
    let (want, _) = session.search(queries.view(), metric, k, &exact).unwrap();
    let (got, _) = session.search(queries.view(), metric, k, &half).unwrap();
    for &x in &got.ids {
        assert!(x == INVALID || filter.contains(x), "id {x} is filtered out");
    }
    let (r_exact, r_half) = (recall_at_k(&want, &truth, k), recall_at_k(&got, &truth, k));
    println!("filtered: recall@10 exact {r_exact:.4}, f16 {r_half:.4}");
    assert!(r_exact - r_half <= 0.005, "filtered: {r_half} vs {r_exact}");
    assert_exact_distances("filtered", &got, &base, &queries, metric);

    // Multi-CTA (small batches; results depend on timing): valid, exact, good recall.
    let truth = ground_truth(base.view(), queries.view(), metric, k).unwrap();
    for nq in [1usize, 7, 16] {
        let qs = Dataset::from_vec(queries.as_slice()[..nq * 48].to_vec(), nq, 48).unwrap();
        let p = f16_params(64, CagraSearchMode::MultiCta);
        let (got, _) = session.search(qs.view(), metric, k, &p).unwrap();
        assert_exact_distances("multi-CTA", &got, &base, &qs, metric);
        let mut sub = Neighbors::new(nq, k);
        sub.ids.copy_from_slice(&truth.ids[..nq * k]);
        sub.dists.copy_from_slice(&truth.dists[..nq * k]);
        let r = recall_at_k(&got, &sub, k);
        assert!(r >= 0.9, "multi-CTA batch {nq}: recall {r}");
    }
    // Device queries through the session and a device search with its own copy agree.
    let dq = DeviceMatrix::upload(&ctx, queries.view()).unwrap();
    let p = f16_params(64, CagraSearchMode::SingleCta);
    let (a, _) = session.search_device(&dq, metric, k, &p).unwrap();
    let dd = DeviceMatrix::upload(&ctx, base.view()).unwrap();
    let dg = weft_gpu::DeviceFixedGraph::upload(&ctx, &graph).unwrap();
    let inputs = DeviceSearchInputs {
        data: &dd,
        graph: &dg,
        entries: graph.entry_points(),
        queries: &dq,
    };
    let (b, _) = CagraSearchDevice::new(&ctx)
        .search_device(inputs, metric, k, &p)
        .unwrap();
    assert_eq!(a.ids, b.ids);
    assert_eq!(a.dists, b.dists);
}

#[test]
fn f16_traversal_errors() {
    let Some(ctx) = gpu_or_skip("f16_traversal_errors") else {
        return;
    };
    let (base, queries) = gaussian_mixture::<f32>(2000, 20, 16, 4, 2);
    let metric = Metric::L2Squared;
    let graph = cagra_graph(&ctx, base.view(), metric);
    let gpu = CagraSearchGpu::new(&ctx);
    let half = f16_params(32, CagraSearchMode::SingleCta);
    let search = |b: &Dataset<f32>, q: &Dataset<f32>, p: &CagraSearchParams, k: usize| {
        let mut out = Neighbors::new(q.rows(), k);
        gpu.search(&graph, b.view(), q.view(), metric, p, out.as_mut())
    };
    assert!(search(&base, &queries, &half, 10).is_ok());
    // Rerank count below k, above the list, or with exact traversal.
    let p = CagraSearchParams {
        tuning: CagraSearchTuning {
            rerank: 5,
            ..half.tuning.clone()
        },
        ..half.clone()
    };
    assert_eq!(invalid_name(search(&base, &queries, &p, 10)), "rerank");
    let p = CagraSearchParams {
        tuning: CagraSearchTuning {
            rerank: 33,
            ..half.tuning.clone()
        },
        ..half.clone()
    };
    assert_eq!(invalid_name(search(&base, &queries, &p, 10)), "rerank");
    let p = CagraSearchParams {
        tuning: CagraSearchTuning {
            rerank: 16,
            ..Default::default()
        },
        ..CagraSearchParams::with_beam_width(32)
    };
    assert_eq!(invalid_name(search(&base, &queries, &p, 10)), "rerank");
    // Overflow in the data (made into its copy) and in the queries (checked per batch).
    let mut big = base.as_slice().to_vec();
    big[123] = 70_000.0;
    let big = Dataset::from_vec(big, base.rows(), base.dim()).unwrap();
    assert_eq!(invalid_name(search(&big, &queries, &half, 10)), "traversal");
    let mut bigq = queries.as_slice().to_vec();
    bigq[5] = -65520.0;
    let bigq = Dataset::from_vec(bigq, queries.rows(), queries.dim()).unwrap();
    assert_eq!(invalid_name(search(&base, &bigq, &half, 10)), "traversal");
    // The largest value that still rounds to a finite f16 is fine.
    let mut edge = queries.as_slice().to_vec();
    edge[5] = 65519.0;
    let edge = Dataset::from_vec(edge, queries.rows(), queries.dim()).unwrap();
    assert!(search(&base, &edge, &half, 10).is_ok());
    // A session reports an overflowing batch, then searches the next one.
    let mut session =
        CagraSearchSession::new(weft_gpu::probe().unwrap(), base.view(), &graph).unwrap();
    assert_eq!(
        invalid_name(session.search(bigq.view(), metric, 10, &half)),
        "traversal"
    );
    assert!(session.search(queries.view(), metric, 10, &half).is_ok());
    // Other element types.
    let h: Vec<f16> = base.as_slice().iter().map(|&x| f16::from_f32(x)).collect();
    let hb = Dataset::from_vec(h, base.rows(), base.dim()).unwrap();
    let hq: Vec<f16> = queries
        .as_slice()
        .iter()
        .map(|&x| f16::from_f32(x))
        .collect();
    let hq = Dataset::from_vec(hq, queries.rows(), queries.dim()).unwrap();
    let mut out = Neighbors::new(queries.rows(), 10);
    let r = gpu.search(&graph, hb.view(), hq.view(), metric, &half, out.as_mut());
    assert_eq!(invalid_name(r), "traversal");
    let dh = DeviceMatrix::upload(&ctx, hb.view()).unwrap();
    assert_eq!(invalid_name(half_copy(&ctx, &dh, None)), "traversal");
}
