//! Synthetic datasets: determinism (seed, thread count, row ranges), shaping, structure.

use weft_core::{Dataset, Error, Metric};
use weft_io::{Preset, ReadOptions, Shaping, Split, SyntheticSpec, VectorWriter, read};

fn with_threads<R: Send>(threads: usize, f: impl FnOnce() -> R + Send) -> R {
    rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .unwrap()
        .install(f)
}

fn bytes(d: &Dataset<f32>) -> Vec<u8> {
    bytemuck::cast_slice(d.as_slice()).to_vec()
}

#[test]
fn same_seed_same_bytes_whatever_the_thread_count() {
    for preset in Preset::ALL {
        let n = if preset == Preset::Gist { 300 } else { 1500 };
        let one = with_threads(1, || preset.generator(7).unwrap().base(n).unwrap());
        let three = with_threads(3, || preset.generator(7).unwrap().base(n).unwrap());
        assert_eq!(bytes(&one), bytes(&three), "{preset}");
        let other_seed = preset.generator(8).unwrap().base(n).unwrap();
        assert_ne!(bytes(&one), bytes(&other_seed), "{preset}");
    }
}

#[test]
fn any_row_range_matches_the_whole() {
    let g = Preset::Sift.generator(1).unwrap();
    let whole = g.generate::<f32>(Split::Base, 0..1000).unwrap();
    let part = g.generate::<f32>(Split::Base, 300..777).unwrap();
    assert_eq!(part.as_slice(), &whole.as_slice()[300 * 128..777 * 128]);
    // Bytes for SIFT-like data: the f32 values are integers in [0, 255], so u8 is exact.
    let as_u8 = g.generate::<u8>(Split::Base, 0..1000).unwrap();
    assert!(
        as_u8
            .as_slice()
            .iter()
            .zip(whole.as_slice())
            .all(|(&b, &f)| b as f32 == f)
    );
}

#[test]
fn queries_are_fresh_draws() {
    let g = Preset::Deep.generator(3).unwrap();
    let base = g.base(2000).unwrap();
    let queries = g.queries(100).unwrap();
    assert_eq!(queries.dim(), 96);
    for q in queries.view().iter() {
        assert!(base.view().iter().all(|b| b != q));
    }
}

#[test]
fn shaping_matches_the_imitated_data() {
    let sift = Preset::Sift.generator(5).unwrap().base(2000).unwrap();
    let values = sift.as_slice();
    assert!(
        values
            .iter()
            .all(|&v| (0.0..=255.0).contains(&v) && v.fract() == 0.0)
    );
    let zeros = values.iter().filter(|&&v| v == 0.0).count() as f64 / values.len() as f64;
    let mean = values.iter().map(|&v| v as f64).sum::<f64>() / values.len() as f64;
    assert!((0.2..0.5).contains(&zeros), "zero fraction {zeros}");
    assert!((10.0..40.0).contains(&mean), "mean {mean}");

    for preset in [Preset::Deep, Preset::Glove] {
        let d = preset.generator(5).unwrap().base(500).unwrap();
        for row in d.view().iter() {
            let norm: f32 = row.iter().map(|v| v * v).sum::<f32>().sqrt();
            assert!((norm - 1.0).abs() < 1e-4, "{preset}: norm {norm}");
        }
    }
    let gist = Preset::Gist.generator(5).unwrap().base(100).unwrap();
    assert!(gist.as_slice().iter().all(|v| (0.0..2.0).contains(v)));
    assert_eq!(Preset::Glove.metric(), Metric::Cosine);
    assert_eq!(Preset::Sift.metric(), Metric::L2Squared);
}

/// Mean over queries of (nearest squared distance / median squared distance).
fn contrast(base: &Dataset<f32>, queries: &Dataset<f32>) -> f64 {
    let mut total = 0.0;
    for q in queries.view().iter() {
        let mut d: Vec<f32> = base
            .view()
            .iter()
            .map(|b| b.iter().zip(q).map(|(x, y)| (x - y) * (x - y)).sum())
            .collect();
        d.sort_by(f32::total_cmp);
        total += (d[0] / d[d.len() / 2]) as f64;
    }
    total / queries.rows() as f64
}

#[test]
fn clustered_low_dimensional_structure_not_uniform_noise() {
    let g = Preset::Sift.generator(11).unwrap();
    let structured = contrast(&g.base(3000).unwrap(), &g.queries(40).unwrap());
    let mut noise = SyntheticSpec::new(128, 128, 1, 0.0);
    noise.cluster_spread = 1.0;
    noise.scale_variation = 0.0;
    let n = noise.generator(11).unwrap();
    let unstructured = contrast(&n.base(3000).unwrap(), &n.queries(40).unwrap());
    assert!(
        structured < 0.5 * unstructured,
        "structured {structured} vs isotropic {unstructured}"
    );
}

#[test]
fn streams_to_a_writer_identically() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("glove.npy");
    let g = Preset::Glove.generator(9).unwrap();
    let mut writer = VectorWriter::<f32>::create(&path, 100, None).unwrap();
    g.write_rows(Split::Queries, 321, &mut writer).unwrap();
    assert_eq!(writer.finish().unwrap(), 321);
    let back: Dataset<f32> = read(&path, &ReadOptions::default()).unwrap();
    assert_eq!(bytes(&back), bytes(&g.queries(321).unwrap()));
    let mut wrong = VectorWriter::<f32>::create(dir.path().join("x.fbin"), 99, None).unwrap();
    assert!(g.write_rows(Split::Base, 10, &mut wrong).is_err());
}

#[test]
fn specs_and_names_are_validated() {
    for preset in Preset::ALL {
        assert_eq!(preset.name().parse::<Preset>().unwrap(), preset);
        assert_eq!(preset.spec().metric, preset.metric());
    }
    assert!(matches!(
        "sift1b".parse::<Preset>(),
        Err(Error::InvalidParams { .. })
    ));
    assert_eq!(Preset::from_name("GloVe"), Some(Preset::Glove));
    for bad in [
        SyntheticSpec::new(0, 4, 4, 0.1),
        SyntheticSpec::new(8, 0, 4, 0.1),
        SyntheticSpec::new(8, 4, 0, 0.1),
        SyntheticSpec::new(8, 4, 4, -1.0),
        SyntheticSpec::new(8, 4, 4, f32::NAN),
        SyntheticSpec {
            shaping: Shaping::NonNegative {
                scale: f32::INFINITY,
                offset: 0.0,
            },
            ..SyntheticSpec::new(8, 4, 4, 0.1)
        },
    ] {
        assert!(
            matches!(bad.generator(1), Err(Error::InvalidParams { .. })),
            "{bad:?}"
        );
    }
    let g = SyntheticSpec::new(8, 3, 5, 0.1).generator(1).unwrap();
    assert!(g.fill_rows(Split::Base, 0, &mut [0.0; 7]).is_err());
    assert_eq!(g.base(0).unwrap().rows(), 0);
}
