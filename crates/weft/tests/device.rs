//! The GPU as a parameter: `IndexBuilder::device` and `SearchParams::devices`. A device that
//! cannot be used is a typed error naming it, never the CPU instead, also among several; a
//! device named twice is refused; on a GPU machine (`WEFT_REQUIRE_GPU=1` there) device 0 builds
//! and searches, and the index remembers it.

use weft::core::rng::SplitMix64;
use weft::{Algorithm, Backend, Dataset, Error, Index, SearchParams};

fn data(rows: usize, dim: usize, seed: u64) -> Dataset<f32> {
    let mut r = SplitMix64::new(seed);
    Dataset::from_fn(rows, dim, |_, _| r.next_f32()).unwrap()
}

/// No machine has a device 999: the build and the search name it, on every backend.
#[test]
fn a_device_that_cannot_be_used_is_named_and_never_replaced_by_the_cpu() {
    let base = data(300, 8, 1);
    for backend in [Backend::Auto, Backend::Gpu] {
        let built = Index::builder(Algorithm::RnnDescent(weft::RnnDescentParams::default()))
            .backend(backend)
            .device(999)
            .build(base.clone());
        match built {
            Err(Error::Unsupported(m)) => assert!(m.contains("GPU 999"), "{m}"),
            other => panic!("device 999 ({backend:?}): {:?}", other.map(|_| ())),
        }
    }
    let index = Index::builder(Algorithm::RnnDescent(weft::RnnDescentParams::default()))
        .backend(Backend::Cpu)
        .build(base.clone())
        .unwrap();
    assert_eq!(index.device(), None);
    for backend in [Backend::Auto, Backend::Gpu] {
        let mut params = SearchParams::with_beam_width(32);
        params.backend = backend;
        params.devices = vec![999];
        match index.search(base.view(), 5, &params) {
            Err(Error::Unsupported(m)) => assert!(m.contains("device 999"), "{m}"),
            other => panic!(
                "search on device 999 ({backend:?}): {:?}",
                other.map(|_| ())
            ),
        }
        // A device named twice is refused before any work, on every back end.
        params.devices = vec![999, 999];
        assert!(matches!(
            index.search(base.view(), 5, &params),
            Err(Error::InvalidParams { name, .. }) if name == "devices"
        ));
        // The CPU is still there when no device is named.
        params.devices = Vec::new();
        params.backend = Backend::Cpu;
        assert_eq!(
            index.search(base.view(), 5, &params).unwrap().backend,
            "cpu"
        );
    }
}

/// On a GPU machine: built on device 0, the index searches there by default and when asked.
#[test]
fn device_zero_builds_and_searches_where_there_is_a_gpu() {
    if !weft::registry::GpuStatus::probe_device(0).is_available() {
        #[cfg(feature = "cuda")]
        assert!(
            !weft::gpu::testing::gpu_required(),
            "WEFT_REQUIRE_GPU is set but GPU 0 cannot be used"
        );
        eprintln!("device_zero_builds_and_searches_where_there_is_a_gpu: SKIPPED (no GPU 0)");
        return;
    }
    let base = data(2000, 16, 2);
    let mut index = Index::builder(Algorithm::Cagra(weft::CagraParams::default()))
        .device(0)
        .build(base.clone())
        .unwrap();
    assert_eq!(index.device(), Some(0));
    let mut params = SearchParams::with_beam_width(32);
    params.backend = Backend::Gpu;
    let by_default = index.search(base.view(), 5, &params).unwrap();
    params.devices = vec![0];
    let asked = index.search(base.view(), 5, &params).unwrap();
    assert_eq!((by_default.backend, asked.backend), ("gpu", "gpu"));
    assert_eq!(by_default.neighbors.ids, asked.neighbors.ids);
    // Another device than the index's: named in the error, and device 0 still works after.
    params.devices = vec![999];
    assert!(matches!(
        index.search(base.view(), 5, &params),
        Err(Error::Unsupported(m)) if m.contains("device 999")
    ));
    // Among several devices, one that cannot be used fails the search, naming it.
    params.devices = vec![0, 999];
    assert!(matches!(
        index.search(base.view(), 5, &params),
        Err(Error::Unsupported(m)) if m.contains("device 999")
    ));
    params.devices = vec![0];
    assert_eq!(
        index.search(base.view(), 5, &params).unwrap().neighbors.ids,
        by_default.neighbors.ids
    );
    index.set_device(None);
    params.devices = Vec::new();
    assert_eq!(
        index.search(base.view(), 5, &params).unwrap().backend,
        "gpu"
    );
}
