//! GPU tests of the exact search (`ExactGpu`) against the CPU one: each skips itself visibly
//! without a GPU (`SKIPPED (no CUDA device: ...)`), and fails instead under
//! `WEFT_REQUIRE_GPU=1`.

#![cfg(feature = "cuda")]

use half::f16;
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use weft_core::distance::reference_distance;
use weft_core::rng::SplitMix64;
use weft_core::{BuildCtx, Dataset, Element, Error, INVALID, KnnGraphBuilder, Metric, NoParams};
use weft_exact::cpu::{exact_knn_graph, exact_search};
use weft_exact::gpu::ExactGpu;
use weft_gpu::testing::gpu_or_skip;
use weft_gpu::{DeviceMatrix, GpuContext};

/// Proptest cases per oracle test (`WEFT_GPU_CASES`, default 12).
fn cases() -> u32 {
    std::env::var("WEFT_GPU_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(12)
}

/// Whether `WEFT_GPU_SMALL` asks for small shapes (runs under compute-sanitizer).
fn small() -> bool {
    std::env::var("WEFT_GPU_SMALL").is_ok_and(|v| v == "1")
}

fn random<T: Element>(rows: usize, dim: usize, seed: u64) -> Dataset<T> {
    let mut r = SplitMix64::new(seed);
    Dataset::from_fn(rows, dim, |_, _| {
        let v = r.next_f32() * 4.0 - 2.0;
        match T::DTYPE {
            weft_core::DType::U8 => T::from_f32((v + 2.0) * 60.0),
            weft_core::DType::I8 => T::from_f32(v * 60.0),
            _ => T::from_f32(v),
        }
    })
    .unwrap()
}

#[allow(clippy::too_many_arguments)]
/// Checks GPU results against the CPU oracle: distances agree within tolerance, and where ids
/// differ the distances tie.
fn compare<T: Element>(
    what: &str,
    base: &Dataset<T>,
    queries: &Dataset<T>,
    metric: Metric,
    gpu: (&[u32], &[f32]),
    cpu: (&[u32], &[f32]),
    k: usize,
    self_excluded: bool,
) -> Result<(), TestCaseError> {
    let max_sq: f64 = base
        .view()
        .iter()
        .chain(queries.view().iter())
        .map(|r| r.iter().map(|v| (v.to_f32() as f64).powi(2)).sum::<f64>())
        .fold(0.0, f64::max);
    let tol = |d: f64| match metric {
        Metric::Cosine => 1e-4,
        Metric::L2Squared => 1e-4 * d.abs().max(1.0) + 4e-6 * max_sq,
        Metric::InnerProduct => 1e-4 * d.abs().max(1.0) + 2e-6 * max_sq,
    };
    let nq = gpu.0.len() / k;
    for q in 0..nq {
        let (gi, gd) = (&gpu.0[q * k..(q + 1) * k], &gpu.1[q * k..(q + 1) * k]);
        let (ci, cd) = (&cpu.0[q * k..(q + 1) * k], &cpu.1[q * k..(q + 1) * k]);
        let mut seen = std::collections::HashSet::new();
        for j in 0..k {
            prop_assert!(
                gi[j] != INVALID && (gi[j] as usize) < base.rows(),
                "{what}: q {q} pos {j}: id {}",
                gi[j]
            );
            prop_assert!(seen.insert(gi[j]), "{what}: q {q}: id {} twice", gi[j]);
            prop_assert!(
                !(self_excluded && gi[j] as usize == q),
                "{what}: q {q} lists itself"
            );
            let (g, c) = (gd[j] as f64, cd[j] as f64);
            prop_assert!(
                (g - c).abs() <= tol(c),
                "{what}: q {q} pos {j}: gpu dist {g} cpu {c}"
            );
            if j > 0 {
                prop_assert!(gd[j] >= gd[j - 1], "{what}: q {q}: distances not ascending");
            }
            // The id the GPU returned is truly at that distance; if it is not the CPU's id, the
            // two distances tie within tolerance (checked above).
            let truth = reference_distance(metric, queries.row(q), base.row(gi[j] as usize));
            prop_assert!(
                (truth - g).abs() <= tol(truth),
                "{what}: q {q} pos {j}: id {} is at {truth}, gpu says {g}",
                gi[j]
            );
            if gi[j] != ci[j] {
                prop_assert!(
                    (g - c).abs() <= tol(c),
                    "{what}: q {q} pos {j}: ids {} vs {} without a tie",
                    gi[j],
                    ci[j]
                );
            }
        }
    }
    Ok(())
}

fn oracle_case<T: Element>(
    ctx: &GpuContext,
    nb: usize,
    nq: usize,
    dim: usize,
    k: usize,
    seed: u64,
) -> Result<(), TestCaseError> {
    let base = random::<T>(nb, dim, seed);
    let queries = random::<T>(nq, dim, seed ^ 0xabcdef);
    let bctx = BuildCtx::new(seed);
    // A small distance buffer forces several base chunks and query batches.
    let exact = ExactGpu::new(ctx).with_max_distance_buffer(((nb / 3).max(1) * 4 * 40) as u64);
    for metric in Metric::ALL {
        let what = format!("{:?} {metric:?} nb {nb} nq {nq} dim {dim} k {k}", T::DTYPE);
        let gpu = exact
            .search(base.view(), queries.view(), metric, k)
            .map_err(|e| TestCaseError::fail(format!("{what}: {e}")))?;
        let cpu = exact_search(base.view(), queries.view(), metric, k, &bctx).unwrap();
        compare(
            &what,
            &base,
            &queries,
            metric,
            (&gpu.ids, &gpu.dists),
            (&cpu.ids, &cpu.dists),
            k,
            false,
        )?;
        if nb > k && nb <= 2000 {
            let g = exact
                .build(base.view(), metric, k, &NoParams {}, &bctx)
                .map_err(|e| TestCaseError::fail(format!("{what} graph: {e}")))?;
            let c = exact_knn_graph(base.view(), metric, k, &bctx).unwrap();
            g.validate()
                .map_err(|e| TestCaseError::fail(format!("{what} graph: {e}")))?;
            compare(
                &format!("{what} graph"),
                &base,
                &base,
                metric,
                (g.ids(), g.dists()),
                (c.ids(), c.dists()),
                k,
                true,
            )?;
        }
    }
    Ok(())
}

fn oracle<T: Element>(name: &str) {
    let Some(ctx) = gpu_or_skip(name) else { return };
    let mut runner = TestRunner::new(Config {
        cases: cases(),
        failure_persistence: None,
        ..Config::default()
    });
    let strat = (
        1usize..700,
        1usize..70,
        1usize..140,
        1usize..200,
        any::<u64>(),
    );
    runner
        .run(&strat, |(nb, nq, dim, k, seed)| {
            oracle_case::<T>(&ctx, nb, nq, dim, k.min(nb), seed)
        })
        .unwrap();
    // k above a warp and at the maximum, shapes off the tiles (smaller under a sanitizer).
    if small() {
        oracle_case::<T>(&ctx, 1030, 2, 17, 1024, 7).unwrap();
        oracle_case::<T>(&ctx, 200, 130, 20, 40, 8).unwrap();
    } else {
        oracle_case::<T>(&ctx, 1500, 45, 33, 1024, 7).unwrap();
        oracle_case::<T>(&ctx, 300, 130, 129, 77, 8).unwrap();
    }
}

#[test]
fn exact_f32_matches_cpu() {
    oracle::<f32>("exact_f32_matches_cpu");
}

#[test]
fn exact_f16_matches_cpu() {
    oracle::<f16>("exact_f16_matches_cpu");
}

#[test]
fn exact_bytes_match_cpu() {
    let Some(ctx) = gpu_or_skip("exact_bytes_match_cpu") else {
        return;
    };
    let (nb, nq) = if small() { (150, 5) } else { (500, 40) };
    oracle_case::<u8>(&ctx, nb, nq, 50, 20, 1).unwrap();
    oracle_case::<i8>(&ctx, nb, nq, 50, 20, 2).unwrap();
}

/// `ExactGpu` used through the `Searcher` seam answers like its inherent search and agrees with
/// the CPU oracle.
#[test]
fn exact_gpu_is_a_searcher() {
    use weft_core::{Neighbors, Searcher};
    let Some(ctx) = gpu_or_skip("exact_gpu_is_a_searcher") else {
        return;
    };
    let base = random::<f32>(700, 19, 21);
    let queries = random::<f32>(9, 19, 22);
    let gpu = ExactGpu::new(&ctx);
    for metric in [Metric::L2Squared, Metric::InnerProduct, Metric::Cosine] {
        let mut out = Neighbors::new(queries.rows(), 12);
        let stats = Searcher::<()>::search(
            &gpu,
            &(),
            base.view(),
            queries.view(),
            metric,
            &NoParams {},
            out.as_mut(),
        )
        .unwrap();
        assert_eq!(stats.queries, 9);
        let direct = gpu.search(base.view(), queries.view(), metric, 12).unwrap();
        assert_eq!(out, direct, "{metric:?}");
        let cpu = exact_search(base.view(), queries.view(), metric, 12, &BuildCtx::new(0)).unwrap();
        for q in 0..queries.rows() {
            for (g, c) in out.row_dists(q).iter().zip(cpu.row_dists(q)) {
                assert!(
                    (g - c).abs() <= 1e-3 * (1.0 + c.abs()),
                    "{metric:?} q{q}: {g} vs {c}"
                );
            }
        }
    }
}

/// Enough base rows per chunk that the select kernel's buffer fills and flushes in the middle of
/// a row (thousands of candidates while the threshold is still infinite), for small and large k.
#[test]
fn exact_select_flushes_midway() {
    let Some(ctx) = gpu_or_skip("exact_select_flushes_midway") else {
        return;
    };
    oracle_case::<f32>(&ctx, 4000, 3, 4, 5, 11).unwrap();
    oracle_case::<f32>(&ctx, 4000, 3, 4, 1024, 12).unwrap();
}

/// Device-resident inputs give exactly the host path's results.
#[test]
fn exact_device_resident_matches_host() {
    let Some(ctx) = gpu_or_skip("exact_device_resident_matches_host") else {
        return;
    };
    let base = random::<f16>(900, 37, 21);
    let queries = random::<f16>(50, 37, 22);
    let (db, dq) = (
        DeviceMatrix::upload(&ctx, base.view()).unwrap(),
        DeviceMatrix::upload(&ctx, queries.view()).unwrap(),
    );
    let e = ExactGpu::new(&ctx).with_max_distance_buffer(50 * 300 * 4);
    let bctx = BuildCtx::new(0);
    for m in Metric::ALL {
        let host = e.search(base.view(), queries.view(), m, 40).unwrap();
        let dev = e.search_device(&db, &dq, m, 40).unwrap();
        assert_eq!(host, dev, "{m:?}");
        let gh = e.knn_graph(base.view(), m, 12, &bctx).unwrap();
        let gd = e.knn_graph_device(&db, m, 12, &bctx).unwrap();
        assert_eq!(
            (gh.ids(), gh.dists()),
            (gd.ids(), gd.dists()),
            "{m:?} graph"
        );
    }
}

#[test]
fn exact_says_out_of_memory_before_allocating() {
    let Some(ctx) = gpu_or_skip("exact_says_out_of_memory_before_allocating") else {
        return;
    };
    let base = random::<f32>(1000, 64, 1);
    let r = ExactGpu::new(&ctx).with_budget(10_000).search(
        base.view(),
        base.view(),
        Metric::L2Squared,
        10,
    );
    assert!(matches!(r, Err(Error::OutOfDeviceMemory { .. })), "{r:?}");
    assert!(matches!(
        ctx.check_fits(u64::MAX, None),
        Err(Error::OutOfDeviceMemory {
            needed: u64::MAX,
            ..
        })
    ));
}

#[test]
fn exact_rejects_bad_k() {
    let Some(ctx) = gpu_or_skip("exact_rejects_bad_k") else {
        return;
    };
    let base = random::<f32>(2000, 8, 1);
    let e = ExactGpu::new(&ctx);
    assert!(
        e.search(base.view(), base.view(), Metric::L2Squared, 1025)
            .is_err()
    );
    assert!(
        e.search(base.view(), base.view(), Metric::L2Squared, 0)
            .is_err()
    );
    let small = random::<f32>(5, 8, 1);
    assert!(
        e.search(small.view(), base.view(), Metric::L2Squared, 6)
            .is_err()
    );
}
