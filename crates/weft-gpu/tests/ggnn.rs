//! GGNN kernels on a GPU: the per-segment brute force (`ggnn_top_*`) against a CPU brute force
//! on random inputs (proptest; exact ids on integer data, where the distances are exact), and
//! the typed errors of the build entry point. The end-to-end tests against the CPU reference
//! (layer sizes, sampled points, graph recall) are in `weft-ggnn/tests/gpu.rs`.

use proptest::prelude::*;
use weft_core::{DatasetView, Element, Error, INVALID, Metric, NodeId};
use weft_gpu::testing::gpu_or_skip;
use weft_gpu::{DeviceMatrix, GgnnBuild, GgnnShape, GpuContext};

/// A two-layer shape whose base layer has `g` segments of `s0` points (`s0_off` of `s0 + 1`).
fn shape(g: usize, s0: usize, s0_off: usize) -> GgnnShape {
    GgnnShape {
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
fn segment(z: &GgnnShape, b: usize) -> (usize, usize) {
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
    z: &GgnnShape,
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

proptest! {
    #![proptest_config(ProptestConfig { cases: 16, ..ProptestConfig::default() })]

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
    let z = GgnnShape {
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
    let cfg = weft_gpu::GgnnConfig {
        k: 8,
        tau: 0.5,
        refinement: 1,
        seed: 1,
    };
    assert!(matches!(
        b.with_budget(1024).build(
            &dev,
            Metric::L2Squared,
            &z,
            &cfg,
            &weft_core::BuildCtx::new(1)
        ),
        Err(Error::OutOfDeviceMemory { .. })
    ));
}
