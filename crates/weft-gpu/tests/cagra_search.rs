//! The CAGRA search kernels at the device level: the launch plan (no GPU needed), and a search
//! over a graph the GPU optimiser left on the device against the exact GPU search. The oracle
//! tests against the CPU beam search, filters, k up to 1024 and batch independence are in
//! `weft-search/tests/gpu_cagra.rs`.

use weft_core::{BuildCtx, Dataset, Error, INVALID, Metric};
use weft_gpu::cagra_search::{
    CagraSearchConfig, CagraSearchDevice, CagraSearchMode, auto_team_size, plan,
};
use weft_gpu::testing::gpu_or_skip;
use weft_gpu::{CagraOptimizer, DeviceKnnGraph, DeviceMatrix, ExactGpu};

fn cfg(itopk: usize, mode: CagraSearchMode) -> CagraSearchConfig {
    CagraSearchConfig {
        itopk,
        mode,
        ..Default::default()
    }
}

#[test]
fn cagra_search_plan_rules() {
    assert_eq!(auto_team_size(128, 4), 8);
    assert_eq!(auto_team_size(960, 4), 32);
    assert_eq!(auto_team_size(128, 2), 4);
    assert_eq!(auto_team_size(3, 4), 4);
    // Auto: multi-CTA for a batch below 2 x SMs or itopk > 512.
    let p = plan(
        132,
        10_000,
        128,
        4,
        64,
        1,
        10,
        &cfg(64, CagraSearchMode::Auto),
        false,
    )
    .unwrap();
    assert_eq!(p.mode, CagraSearchMode::MultiCta);
    assert_eq!((p.ctas_per_query, p.list_len, p.table_mode), (2, 32, 2));
    let p = plan(
        132,
        10_000,
        128,
        4,
        64,
        10_000,
        10,
        &cfg(64, CagraSearchMode::Auto),
        false,
    )
    .unwrap();
    assert_eq!(p.mode, CagraSearchMode::SingleCta);
    assert_eq!((p.team_size, p.candidates, p.table_mode), (8, 64, 0));
    assert_eq!(p.max_iterations, 72); // 1 + min(ceil(1.1 x 64), 64 + 10)
    assert!(p.shared_bytes <= 48 * 1024);
    let p = plan(
        132,
        10_000,
        128,
        4,
        64,
        10_000,
        10,
        &cfg(600, CagraSearchMode::Auto),
        false,
    )
    .unwrap();
    assert_eq!((p.mode, p.ctas_per_query), (CagraSearchMode::MultiCta, 19));
    // Large lists with a filter move the visited table to global memory.
    let p = plan(
        132,
        10_000,
        128,
        4,
        64,
        10_000,
        10,
        &cfg(1024, CagraSearchMode::SingleCta),
        true,
    )
    .unwrap();
    assert_eq!(p.table_mode, 1);
    assert!(p.shared_bytes <= 48 * 1024);
    // Bad parameters.
    let bad =
        |c: CagraSearchConfig, k: usize| plan(132, 1000, 16, 4, 32, 100, k, &c, false).unwrap_err();
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
            CagraSearchConfig {
                search_width: 0,
                ..Default::default()
            },
            10
        ),
        Error::InvalidParams { .. }
    ));
    assert!(matches!(
        bad(
            CagraSearchConfig {
                team_size: 3,
                ..Default::default()
            },
            10
        ),
        Error::InvalidParams { .. }
    ));
    assert!(matches!(
        bad(
            CagraSearchConfig {
                search_width: 33,
                ..Default::default()
            },
            10
        ),
        Error::InvalidParams { .. }
    ));
    assert!(matches!(
        bad(
            CagraSearchConfig {
                max_iterations: 3,
                min_iterations: 4,
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
            1000,
            20_000,
            4,
            32,
            100,
            10,
            &CagraSearchConfig::default(),
            false
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
        let (found, stats) = CagraSearchDevice::new(&ctx)
            .search_device(
                &d,
                &graph,
                &q,
                Metric::L2Squared,
                10,
                &cfg(64, mode),
                &[0],
                None,
            )
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
