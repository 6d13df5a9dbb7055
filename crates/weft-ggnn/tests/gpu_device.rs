//! GGNN kernels on a GPU: the per-segment brute force (`ggnn_top_*`) against a CPU brute force
//! on random inputs (proptest; exact ids on integer data, where the distances are exact); the
//! whole build (merge and symmetric-link searches included) on random clustered inputs against
//! exact invariants checked on the CPU (every row: ids in range, no self-loop, no repeat; its
//! first half sorted by the CPU's distances; the reported mean 1-NN distance equal to the CPU's
//! recomputation from the rows) and against an exact CPU k-NN (graph recall); and the typed
//! errors of the build entry point. The end-to-end tests against the CPU reference (layer sizes,
//! sampled points, graph recall within 0.02) are in `tests/gpu.rs`. And NVRTC compiles the
//! crate's kernel module (no GPU needed).
#![cfg(feature = "cuda")]

use proptest::prelude::*;
use weft_core::{DatasetView, Element, Error, INVALID, Metric, NodeId};
use weft_ggnn::gpu::{GgnnBuild, GgnnTuning};
use weft_ggnn::{GgnnParams, Sizing};
use weft_gpu::testing::gpu_or_skip;
use weft_gpu::{DeviceMatrix, GpuContext};

/// A two-layer shape whose base layer has `g` segments of `s0` points (`s0_off` of `s0 + 1`).
fn shape(g: usize, s0: usize, s0_off: usize) -> Sizing {
    Sizing {
        n: g * s0 + s0_off,
        s: 32,
        layers: 2,
        g,
        s0,
        s0_off,
        sg: 32 / g,
        sg_off: 32 - (32 / g) * g,
    }
}

/// First local id and length of base segment `b`.
fn segment(z: &Sizing, b: usize) -> (usize, usize) {
    (b * z.s0 + b.min(z.s0_off), z.s0 + usize::from(b < z.s0_off))
}

fn real(metric: Metric, d: f32) -> f32 {
    if metric == Metric::L2Squared {
        d.max(0.0).sqrt()
    } else {
        d.abs()
    }
}

/// Checks the GPU brute force against a CPU one: every row holds the segment's k nearest other
/// points in order (distances equal within `tol` relative, exact ids when `exact`), padding
/// after them, and the 1-NN distance.
fn check_top<T: Element>(
    ctx: &GpuContext,
    data: DatasetView<'_, T>,
    metric: Metric,
    z: &Sizing,
    k: usize,
    exact: bool,
) {
    let dev = DeviceMatrix::upload(ctx, data).unwrap();
    let (ids, nn1) = GgnnBuild::new(ctx)
        .brute_force_base(&dev, metric, z, k)
        .unwrap();
    let dist = metric.distance_fn::<T>();
    let tol = if exact { 0.0 } else { 1e-4 };
    for b in 0..z.g.pow((z.layers - 1) as u32) {
        let (start, len) = segment(z, b);
        for v in start..start + len {
            let mut want: Vec<(f32, NodeId)> = (start..start + len)
                .filter(|&u| u != v)
                .map(|u| (dist.eval(data.row(v), data.row(u)), u as NodeId))
                .collect();
            want.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
            let row = &ids[v * k..(v + 1) * k];
            let m = want.len().min(k);
            assert!(
                row[m..].iter().all(|&x| x == INVALID),
                "row {v}: padding {row:?}"
            );
            for j in 0..m {
                let x = row[j];
                assert!(
                    (start..start + len).contains(&(x as usize)) && x as usize != v,
                    "row {v}: id {x} outside its segment or itself: {row:?}"
                );
                assert!(!row[..j].contains(&x), "row {v}: repeated id {x}");
                let d = dist.eval(data.row(v), data.row(x as usize));
                let w = want[j].0;
                assert!(
                    (d - w).abs() <= tol * (1.0 + w.abs()),
                    "row {v} slot {j}: distance {d} vs CPU {w}"
                );
                if exact {
                    assert_eq!(x, want[j].1, "row {v} slot {j}");
                }
            }
            let want_nn1 = want
                .iter()
                .map(|&(d, _)| real(metric, d))
                .find(|&d| d > 0.0)
                .unwrap_or(0.0);
            assert!(
                (nn1[v] - want_nn1).abs() <= 1e-3 * (1.0 + want_nn1),
                "row {v}: nn1 {} vs CPU {want_nn1}",
                nn1[v]
            );
        }
    }
}

fn random_f32(rows: usize, dim: usize, seed: u64) -> Vec<f32> {
    let mut rng = weft_core::rng::SplitMix64::new(seed);
    (0..rows * dim)
        .map(|_| (rng.below(1 << 20) as f32 / (1 << 19) as f32) - 1.0)
        .collect()
}

/// A three-layer shape (S = 32) whose base layer has `g * g` segments of `s0` points
/// (`s0_off` of `s0 + 1`).
fn shape3(g: usize, s0: usize, s0_off: usize) -> Sizing {
    Sizing {
        n: g * g * s0 + s0_off,
        s: 32,
        layers: 3,
        g,
        s0,
        s0_off,
        sg: 32 / g,
        sg_off: 32 % g,
    }
}

/// `rows` points around `clusters` random centres (the spread a tenth of the centres' range).
fn clustered_f32(rows: usize, dim: usize, clusters: usize, seed: u64) -> Vec<f32> {
    let mut rng = weft_core::rng::SplitMix64::new(seed);
    let mut unit = move || (rng.below(1 << 20) as f32 / (1 << 19) as f32) - 1.0;
    let centres: Vec<f32> = (0..clusters * dim).map(|_| unit()).collect();
    let mut out = Vec::with_capacity(rows * dim);
    for r in 0..rows {
        let c = (r * 7919) % clusters;
        for j in 0..dim {
            out.push(centres[c * dim + j] + 0.1 * unit());
        }
    }
    out
}

/// Builds the hierarchy of `data` on the GPU and checks it on the CPU: every row of every layer
/// holds ids of its layer, no self-loop, no repeat; each row's first half (the merge's or brute
/// force's nearest neighbours) is a prefix of valid ids sorted by the CPU's distance (within
/// rounding); the reported mean 1-NN distance equals the CPU's recomputation from the base rows;
/// the base rows' first neighbours recall at least `min_recall` of the exact nearest ones.
/// Returns that recall.
#[allow(clippy::too_many_arguments)]
fn check_build<T: Element>(
    ctx: &GpuContext,
    data: DatasetView<'_, T>,
    metric: Metric,
    z: &Sizing,
    k: usize,
    refinement: usize,
    seed: u64,
    min_recall: f64,
    tuning: GgnnTuning,
) -> f64 {
    let dev = DeviceMatrix::upload(ctx, data).unwrap();
    let params = GgnnParams {
        k_build: k,
        tau_build: 0.5,
        refinement_iterations: refinement,
        ..GgnnParams::default()
    };
    let out = GgnnBuild::new(ctx)
        .with_tuning(tuning)
        .with_timing(seed.is_multiple_of(2))
        .build(
            &dev,
            metric,
            z,
            &params,
            None,
            &weft_core::BuildCtx::new(seed),
        )
        .unwrap();
    assert_eq!(out.layers.len(), z.layers);
    let dist = metric.distance_fn::<T>();
    let kl = k - k / 2;
    for (l, layer) in out.layers.iter().enumerate() {
        let len = z.layer_len(l);
        assert_eq!(layer.ids.len(), len * k, "layer {l}");
        let glob = |v: NodeId| {
            if l == 0 {
                v as usize
            } else {
                layer.global[v as usize] as usize
            }
        };
        for v in 0..len {
            let row = &layer.ids[v * k..(v + 1) * k];
            for (j, &x) in row.iter().enumerate() {
                if x == INVALID {
                    continue;
                }
                assert!((x as usize) < len, "layer {l} row {v}: id {x} out of range");
                assert_ne!(x as usize, v, "layer {l} row {v}: self-loop");
                assert!(!row[..j].contains(&x), "layer {l} row {v}: repeated id {x}");
            }
            let first = &row[..kl];
            let valid = first.iter().take_while(|&&x| x != INVALID).count();
            assert!(
                first[valid..].iter().all(|&x| x == INVALID),
                "layer {l} row {v}: first half {first:?} is not a prefix"
            );
            assert!(valid > 0, "layer {l} row {v}: no neighbour");
            let q = data.row(glob(v as NodeId));
            let ds: Vec<f32> = first[..valid]
                .iter()
                .map(|&x| dist.eval(q, data.row(glob(x))))
                .collect();
            for w in ds.windows(2) {
                assert!(
                    w[0] <= w[1] + 1e-4 * (1.0 + w[1].abs()),
                    "layer {l} row {v}: first half not sorted by distance: {ds:?}"
                );
            }
        }
    }
    // The mean 1-NN distance: the first base neighbour at a non-zero distance.
    let base = &out.layers[0].ids;
    let mut sum = 0f64;
    for v in 0..z.n {
        let d = base[v * k..v * k + kl]
            .iter()
            .take_while(|&&x| x != INVALID)
            .map(|&x| real(metric, dist.eval(data.row(v), data.row(x as usize))))
            .find(|&d| d > 0.0)
            .unwrap_or(0.0);
        sum += d as f64;
    }
    let mean = (sum / z.n as f64) as f32;
    assert!(
        (out.mean_nn1 - mean).abs() <= 1e-3 * (1e-3 + mean.abs()),
        "mean nn1 {} vs CPU {mean}",
        out.mean_nn1
    );
    assert!(out.max_nn1 >= out.mean_nn1);
    // Recall of the base rows' first neighbours against an exact CPU k-NN.
    let r = kl.min(10);
    let mut hit = 0usize;
    for v in 0..z.n {
        let mut all: Vec<(f32, usize)> = (0..z.n)
            .filter(|&u| u != v)
            .map(|u| (dist.eval(data.row(v), data.row(u)), u))
            .collect();
        all.select_nth_unstable_by(r - 1, |a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
        let row = &base[v * k..v * k + r];
        hit += all[..r]
            .iter()
            .filter(|&&(_, u)| row.contains(&(u as NodeId)))
            .count();
    }
    let recall = hit as f64 / (r * z.n) as f64;
    println!("{metric} n {} k {k}: base recall@{r} {recall:.4}", z.n);
    assert!(
        recall >= min_recall,
        "{metric}: recall {recall} below {min_recall}"
    );
    if seed.is_multiple_of(2) {
        assert!(out.phases.iter().any(|p| p.phase == "merge"));
    } else {
        assert!(out.phases.is_empty());
    }
    recall
}

/// Proptest cases per oracle test (`WEFT_GPU_CASES`, default 16).
fn cases() -> u32 {
    std::env::var("WEFT_GPU_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(16)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), ..ProptestConfig::default() })]

    #[test]
    fn ggnn_top_matches_cpu_brute_force(
        g in 1usize..6,
        s0 in 13usize..48,
        extra in 0usize..6,
        k in 2usize..13,
        dim in prop::sample::select(vec![3usize, 16, 33]),
        metric in prop::sample::select(Metric::ALL.to_vec()),
        seed in any::<u64>(),
    ) {
        let Some(ctx) = gpu_or_skip("ggnn_top_matches_cpu_brute_force") else {
            return Ok(());
        };
        let z = shape(g, s0, extra % g.max(1));
        let data = random_f32(z.n, dim, seed);
        let view = DatasetView::new(&data, z.n, dim).unwrap();
        check_top(&ctx, view, metric, &z, k, false);
    }

    #[test]
    fn ggnn_build_rows_are_valid_sorted_and_near(
        g in 2usize..5,
        extra in 0usize..40,
        s0_off in 0usize..16,
        k in prop::sample::select(vec![8usize, 16, 24, 40]),
        dim in prop::sample::select(vec![3usize, 17, 33, 130, 300]),
        metric in prop::sample::select(Metric::ALL.to_vec()),
        refinement in 0usize..3,
        seed in any::<u64>(),
        merge_heads in 1u32..=2,
    ) {
        let Some(ctx) = gpu_or_skip("ggnn_build_rows_are_valid_sorted_and_near") else {
            return Ok(());
        };
        let z = shape3(g, k.max(20) + extra, s0_off % (g * g));
        let data = clustered_f32(z.n, dim, 12, seed);
        let view = DatasetView::new(&data, z.n, dim).unwrap();
        // Inner product's nearest neighbours are hubs that a graph search reaches less well. In
        // 3 dimensions the CPU reference itself (weft_ggnn::GgnnCpu, k 8, no refinement, this
        // generator) reaches only 0.54-0.75 (cosine) and 0.70-0.75 (L2) over 40 seeds, and the
        // GPU build 0.61 on one draw, so those cases get a lower floor.
        let min_recall = if metric == Metric::InnerProduct {
            0.4
        } else if dim == 3 {
            0.45
        } else {
            0.7
        };
        // Both search orders, with and without the locality order of layer 0, and both kinds
        // of seen sets (16-bit tags, u32 ids).
        let tuning = GgnnTuning {
            merge_heads,
            locality_order: merge_heads == 2,
            seen_tags: [None, Some(true), Some(false)][(seed % 3) as usize],
            ..GgnnTuning::default()
        };
        check_build(&ctx, view, metric, &z, k, refinement, seed, min_recall, tuning);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), ..ProptestConfig::default() })]

    /// The device's locality order (ggnn_order_*): a permutation of the points, sorted by the
    /// rank of their (clamped) layer-1 key.
    #[test]
    fn ggnn_grouped_order_sorts_by_rank(
        n in 1usize..20_000,
        l1 in 1usize..3_000,
        seed in any::<u64>(),
    ) {
        let Some(ctx) = gpu_or_skip("ggnn_grouped_order_sorts_by_rank") else {
            return Ok(());
        };
        let mut rng = weft_core::rng::SplitMix64::new(seed);
        // Keys a little past the layer (clamped to its last point).
        let key1: Vec<u32> = (0..n).map(|_| rng.below(l1 as u64 + 3) as u32).collect();
        let mut rank: Vec<u32> = (0..l1 as u32).collect();
        for i in (1..l1).rev() {
            rank.swap(i, rng.below(i as u64 + 1) as usize);
        }
        let order = GgnnBuild::new(&ctx).grouped_order(&key1, &rank).unwrap();
        let mut seen = vec![false; n];
        for &v in &order {
            prop_assert!((v as usize) < n && !seen[v as usize], "not a permutation");
            seen[v as usize] = true;
        }
        prop_assert_eq!(order.len(), n);
        let key = |v: u32| rank[(key1[v as usize] as usize).min(l1 - 1)];
        prop_assert!(order.windows(2).all(|w| key(w[0]) <= key(w[1])), "not sorted by rank");
    }
}

#[test]
fn ggnn_grouped_order_rejects_bad_ranks() {
    let Some(ctx) = gpu_or_skip("ggnn_grouped_order_rejects_bad_ranks") else {
        return;
    };
    let b = GgnnBuild::new(&ctx);
    assert!(matches!(
        b.grouped_order(&[0, 1], &[]),
        Err(Error::InvalidInput(_))
    ));
    assert!(matches!(
        b.grouped_order(&[0, 1], &[0, 2]),
        Err(Error::InvalidInput(_))
    ));
    assert_eq!(b.grouped_order(&[], &[0]).unwrap(), Vec::<u32>::new());
}

#[test]
fn ggnn_build_on_integer_data() {
    let Some(ctx) = gpu_or_skip("ggnn_build_on_integer_data") else {
        return;
    };
    // u8 rows (one lane per candidate: 128 bytes are 8 vectors) with many equal distances.
    let z = shape3(3, 40, 5);
    let mut rng = weft_core::rng::SplitMix64::new(3);
    let data: Vec<u8> = (0..z.n * 128).map(|_| rng.below(16) as u8).collect();
    let view = DatasetView::new(&data, z.n, 128).unwrap();
    check_build(
        &ctx,
        view,
        Metric::L2Squared,
        &z,
        24,
        2,
        4,
        0.5,
        GgnnTuning::default(),
    );
}

#[test]
fn ggnn_build_with_small_seen_sets_and_one_warp() {
    let Some(ctx) = gpu_or_skip("ggnn_build_with_small_seen_sets_and_one_warp") else {
        return;
    };
    // 256-byte seen sets (128 tags or 64 ids) forget often (candidates scored again, the lists checked directly),
    // one lane per candidate, one warp per block: the same invariants, with tags and u32 slots.
    for seen_tags in [true, false] {
        let tuning = GgnnTuning {
            merge_seen_bytes: 256,
            sym_seen_bytes: 256,
            seen_tags: Some(seen_tags),
            vecs_per_lane: 64,
            max_warps: 1,
            merge_heads: 2,
            locality_order: seen_tags,
        };
        for (metric, k) in [(Metric::L2Squared, 16), (Metric::Cosine, 40)] {
            let z = shape3(3, 45, 4);
            let data = clustered_f32(z.n, 20, 6, 5);
            let view = DatasetView::new(&data, z.n, 20).unwrap();
            check_build(&ctx, view, metric, &z, k, 1, 3, 0.6, tuning);
        }
    }
}

#[test]
fn ggnn_top_is_exact_on_integer_data() {
    let Some(ctx) = gpu_or_skip("ggnn_top_is_exact_on_integer_data") else {
        return;
    };
    // u8 rows with many equal distances: ties must go by id, as on the CPU.
    let z = shape(5, 37, 3);
    let mut rng = weft_core::rng::SplitMix64::new(11);
    let data: Vec<u8> = (0..z.n * 24).map(|_| rng.below(4) as u8).collect();
    let view = DatasetView::new(&data, z.n, 24).unwrap();
    check_top(&ctx, view, Metric::L2Squared, &z, 16, true);
    // One segment larger than a block's warps times 32 (the one-layer case).
    let z = Sizing {
        n: 700,
        s: 32,
        layers: 1,
        g: 1,
        s0: 700,
        s0_off: 0,
        sg: 32,
        sg_off: 0,
    };
    let data: Vec<u8> = (0..z.n * 16).map(|_| rng.below(8) as u8).collect();
    let view = DatasetView::new(&data, z.n, 16).unwrap();
    check_top(&ctx, view, Metric::L2Squared, &z, 24, true);
}

#[test]
fn ggnn_build_rejects_bad_shapes() {
    let Some(ctx) = gpu_or_skip("ggnn_build_rejects_bad_shapes") else {
        return;
    };
    let data = random_f32(100, 8, 1);
    let view = DatasetView::new(&data, 100, 8).unwrap();
    let dev = DeviceMatrix::upload(&ctx, view).unwrap();
    let z = shape(3, 33, 1);
    let b = GgnnBuild::new(&ctx);
    for k in [0, 1, 100, 513] {
        assert!(
            matches!(
                b.brute_force_base(&dev, Metric::L2Squared, &z, k),
                Err(Error::InvalidParams { .. })
            ),
            "k = {k}"
        );
    }
    // A shape of another size than the data.
    let z = shape(3, 30, 0);
    assert!(matches!(
        b.brute_force_base(&dev, Metric::L2Squared, &z, 8),
        Err(Error::InvalidInput(_))
    ));
    // A budget that cannot hold the build.
    let z = shape(3, 33, 1);
    let params = GgnnParams {
        k_build: 8,
        tau_build: 0.5,
        refinement_iterations: 1,
        ..GgnnParams::default()
    };
    assert!(matches!(
        b.with_budget(1024).build(
            &dev,
            Metric::L2Squared,
            &z,
            &params,
            None,
            &weft_core::BuildCtx::new(1)
        ),
        Err(Error::OutOfDeviceMemory { .. })
    ));
    // Launch settings out of range.
    let bad = [
        GgnnTuning {
            merge_seen_bytes: 1000,
            ..GgnnTuning::default()
        },
        GgnnTuning {
            sym_seen_bytes: 65536,
            ..GgnnTuning::default()
        },
        GgnnTuning {
            vecs_per_lane: 0,
            ..GgnnTuning::default()
        },
        GgnnTuning {
            max_warps: 5,
            ..GgnnTuning::default()
        },
        GgnnTuning {
            merge_heads: 0,
            ..GgnnTuning::default()
        },
        GgnnTuning {
            merge_heads: 3,
            ..GgnnTuning::default()
        },
    ];
    for t in bad {
        assert!(
            matches!(
                b.with_tuning(t).build(
                    &dev,
                    Metric::L2Squared,
                    &z,
                    &params,
                    None,
                    &weft_core::BuildCtx::new(1)
                ),
                Err(Error::InvalidParams { .. })
            ),
            "{t:?}"
        );
    }
}

/// NVRTC compiles weft-ggnn's kernel module for sm_80 and sm_90 without a warning; needs NVRTC
/// but no GPU (skips visibly without NVRTC, fails under WEFT_REQUIRE_GPU).
#[test]
fn nvrtc_compiles_every_module() {
    weft_gpu::testing::assert_nvrtc_compiles(
        "nvrtc_compiles_every_module",
        &weft_ggnn::gpu::kernel_modules(),
    );
}
