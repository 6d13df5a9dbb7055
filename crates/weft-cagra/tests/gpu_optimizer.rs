//! CAGRA optimisation kernels on a GPU: a hand-checked graph, every stage on a larger random
//! graph against the invariants, the device-resident entry point, and bad rows. The oracle test
//! against the CPU optimiser (bit-for-bit equality) is in `tests/gpu.rs`. And NVRTC compiles
//! the crate's kernel module (no GPU needed).
#![cfg(feature = "cuda")]

use weft_cagra::gpu::CagraOptimizer;
use weft_core::{Error, INVALID, KnnGraph, NodeId};
use weft_gpu::DeviceKnnGraph;
use weft_gpu::testing::gpu_or_skip;

/// A k-NN graph with the given rows (distances 1, 2, 3, ...; padding after the ids).
fn knn_of(rows: &[Vec<NodeId>], k: usize) -> KnnGraph {
    let n = rows.len();
    let mut ids = vec![INVALID; n * k];
    let mut dists = vec![f32::INFINITY; n * k];
    for (v, r) in rows.iter().enumerate() {
        for (j, &x) in r.iter().enumerate() {
            ids[v * k + j] = x;
            dists[v * k + j] = (j + 1) as f32;
        }
    }
    KnnGraph::from_parts(n, k, ids, dists).unwrap()
}

fn random_rows(n: usize, k: usize, seed: u64) -> Vec<Vec<NodeId>> {
    let mut rng = weft_core::rng::SplitMix64::new(seed);
    (0..n)
        .map(|v| {
            let m = if rng.below(5) == 0 {
                rng.below(k as u64 + 1) as usize
            } else {
                k
            };
            let mut row: Vec<NodeId> = Vec::new();
            while row.len() < m {
                let x = rng.below(n as u64) as NodeId;
                if x as usize != v && !row.contains(&x) {
                    row.push(x);
                }
            }
            row
        })
        .collect()
}

#[test]
fn cagra_hand_checked_five_node_graph() {
    let Some(ctx) = gpu_or_skip("cagra_hand_checked_five_node_graph") else {
        return;
    };
    // The same graph as weft-cagra's CPU unit test, worked by hand there.
    let g = knn_of(
        &[
            vec![1, 2, 3],
            vec![2, 0, 4],
            vec![1, 3, 0],
            vec![4, 2, 1],
            vec![3, 1, 0],
        ],
        3,
    );
    let s = CagraOptimizer::new(&ctx).optimize_stages(&g, 2).unwrap();
    assert_eq!(s.detours, vec![0, 1, 1, 0, 1, 0, 0, 0, 1, 0, 0, 2, 0, 1, 1]);
    assert_eq!(s.pruned, vec![1, 2, 2, 4, 1, 3, 4, 2, 3, 1]);
    assert_eq!(s.reverse_counts, vec![0, 2, 2, 2, 2]);
    assert_eq!(s.reverse, vec![INVALID, INVALID, 0, 2, 1, 0, 4, 2, 3, 1]);
    assert_eq!(s.graph, vec![1, 2, 2, 0, 1, 0, 4, 2, 3, 1]);
}

#[test]
fn cagra_stages_keep_their_invariants_and_entry_points_agree() {
    let Some(ctx) = gpu_or_skip("cagra_stages_keep_their_invariants_and_entry_points_agree") else {
        return;
    };
    // Large enough for several scan tiles (n + 1 > 4096) and hubs over the in-degree cap.
    let (n, k, d) = (9000, 24, 12);
    let g = knn_of(&random_rows(n, k, 5), k);
    let opt = CagraOptimizer::new(&ctx);
    let s = opt.optimize_stages(&g, d).unwrap();
    let host = opt.optimize(&g, d).unwrap();
    host.validate().unwrap();
    assert_eq!(host.ids(), &s.graph[..]);
    let dev = DeviceKnnGraph::upload(&ctx, &g).unwrap();
    let on_device = opt.optimize_device(&dev, d).unwrap();
    assert_eq!((on_device.n(), on_device.degree()), (n, d));
    assert_eq!(on_device.download(&ctx).unwrap().ids(), host.ids());
    // Every forward edge appears in its target's reverse candidates: count them.
    let mut indeg = vec![0usize; n];
    for &x in s.pruned.iter().filter(|&&x| x != INVALID) {
        indeg[x as usize] += 1;
    }
    for (v, &deg) in indeg.iter().enumerate() {
        assert_eq!(s.reverse_counts[v] as usize, deg.min(d), "node {v}");
        let m = g.row_ids(v).iter().filter(|&&x| x != INVALID).count();
        for r in 0..k {
            assert!(s.detours[v * k + r] as usize <= r);
        }
        let row = &s.graph[v * d..(v + 1) * d];
        if m >= d {
            assert!(row.iter().all(|&x| x != INVALID), "node {v} short");
        }
    }
}

#[test]
fn cagra_bad_rows_are_a_typed_error() {
    let Some(ctx) = gpu_or_skip("cagra_bad_rows_are_a_typed_error") else {
        return;
    };
    let opt = CagraOptimizer::new(&ctx);
    let good = random_rows(40, 6, 9);
    for (v, j, x) in [(3usize, 0usize, 3 as NodeId), (5, 1, 1000), (7, 2, 0)] {
        let mut rows = good.clone();
        rows[v].resize(6, 0);
        rows[v][j] = x;
        if x == 0 {
            // A duplicate: the same id twice in one row.
            rows[v][j] = rows[v][0];
        }
        let g = knn_of(&rows, 6);
        assert!(
            matches!(opt.optimize(&g, 3), Err(Error::InvalidGraph(_))),
            "row {v} with {x} at {j}"
        );
    }
    let g = knn_of(&good, 6);
    assert!(matches!(
        opt.optimize(&g, 0),
        Err(Error::InvalidParams { .. })
    ));
    assert!(matches!(
        opt.optimize(&g, 7),
        Err(Error::InvalidParams { .. })
    ));
}

/// NVRTC compiles weft-cagra's kernel module for sm_80 and sm_90 without a warning; needs
/// NVRTC but no GPU (skips visibly without NVRTC, fails under WEFT_REQUIRE_GPU).
#[test]
fn nvrtc_compiles_every_module() {
    weft_gpu::testing::assert_nvrtc_compiles(
        "nvrtc_compiles_every_module",
        &weft_cagra::gpu::kernel_modules(),
    );
}
