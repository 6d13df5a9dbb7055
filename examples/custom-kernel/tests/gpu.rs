//! The example kernel against a CPU reference on fresh random inputs (proptest); skips visibly
//! without a GPU (fails under WEFT_REQUIRE_GPU=1). The NVRTC check needs no GPU.

use proptest::prelude::*;
use weft_core::DatasetView;
use weft_gpu::testing::{assert_nvrtc_compiles, gpu_or_skip};

#[test]
fn nvrtc_compiles_every_module() {
    assert_nvrtc_compiles(
        "nvrtc_compiles_every_module",
        &weft_example_kernel::kernel_modules(),
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(16))]
    #[test]
    fn scaled_norms_match_the_cpu(
        rows in 1usize..300,
        dim in 1usize..70,
        scale in -4.0f32..4.0,
        seed in any::<u64>(),
    ) {
        let Some(ctx) = gpu_or_skip("scaled_norms_match_the_cpu") else {
            return Ok(());
        };
        let mut state = seed | 1;
        let data: Vec<f32> = (0..rows * dim)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                (state >> 40) as f32 / (1u64 << 24) as f32 - 0.5
            })
            .collect();
        let view = DatasetView::new(&data, rows, dim).unwrap();
        let got = weft_example_kernel::scaled_norms(&ctx, view, scale).unwrap();
        prop_assert_eq!(got.len(), rows);
        for (r, g) in got.iter().enumerate() {
            let want: f32 = scale * data[r * dim..(r + 1) * dim].iter().map(|x| x * x).sum::<f32>();
            prop_assert!((g - want).abs() <= 1e-4 * (1.0 + want.abs()), "row {}: {} vs {}", r, g, want);
        }
    }
}
