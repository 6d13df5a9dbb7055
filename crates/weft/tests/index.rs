//! The facade end to end: build by name, search, save, load by mmap, and the errors users meet.

use weft::io::Preset;
use weft::{AnyDataset, BuildCtx, Error, Index, Metric, SearchParams};

fn small(n: usize, q: usize) -> (weft::Dataset<f32>, weft::Dataset<f32>) {
    let g = Preset::Deep.generator(3).unwrap();
    (g.base(n).unwrap(), g.queries(q).unwrap())
}

fn index_data(index: &Index) -> &weft::Dataset<f32> {
    match index.data() {
        AnyDataset::F32(d) => d,
        _ => panic!("f32 data expected"),
    }
}

#[test]
fn exact_index_has_recall_one_and_survives_save_load() {
    let (base, queries) = small(600, 20);
    let index = Index::build(
        AnyDataset::from(base),
        Metric::L2Squared,
        "exact",
        &serde_json::Value::Null,
        Some(8),
        &BuildCtx::new(1),
    )
    .unwrap();
    let a = index
        .search(queries.view(), 5, &SearchParams::exact())
        .unwrap();
    let want = weft::exact::exact_search(
        index_data(&index).view(),
        queries.view(),
        Metric::L2Squared,
        5,
        &BuildCtx::new(0),
    )
    .unwrap();
    assert_eq!(a.neighbors.ids, want.ids);

    let dir = tempfile::tempdir().unwrap();
    index.save(dir.path()).unwrap();
    let loaded = Index::load(dir.path()).unwrap();
    assert!(matches!(loaded.data(), AnyDataset::F32(d) if d.is_mapped()));
    let c = loaded
        .search(queries.view(), 5, &SearchParams::exact())
        .unwrap();
    assert_eq!(c.neighbors, a.neighbors);
    assert_eq!(loaded.meta(), index.meta());
}

#[test]
fn graph_builders_by_name_reach_good_recall() {
    let (base, queries) = small(1500, 30);
    let exact = weft::exact::exact_search(
        base.view(),
        queries.view(),
        Metric::L2Squared,
        10,
        &BuildCtx::new(0),
    )
    .unwrap();
    let index = Index::build_from_view(
        base.view(),
        Metric::L2Squared,
        "rnndescent",
        &serde_json::json!({}),
        None,
        &BuildCtx::new(5),
    )
    .unwrap();
    let found = index
        .search(queries.view(), 10, &SearchParams::with_beam_width(64))
        .unwrap();
    let r = weft::exact::recall::search_recall(&found.neighbors, &exact.ids, 10, 10).unwrap();
    assert!(r.mean >= 0.9, "rnndescent recall {}", r.mean);
}

#[test]
fn ndarray_input_in_any_layout() {
    let (base, queries) = small(300, 5);
    let arr = ndarray::Array2::from_shape_vec((300, base.dim()), base.as_slice().to_vec()).unwrap();
    let fortran = arr.t().to_owned().reversed_axes(); // same values, column-major storage
    let index = Index::build_from_array(
        fortran.view(),
        Metric::L2Squared,
        "exact",
        &serde_json::Value::Null,
        Some(4),
        &BuildCtx::new(0),
    )
    .unwrap();
    let out = index
        .search(queries.view(), 3, &SearchParams::exact())
        .unwrap();
    let want = weft::exact::exact_search(
        base.view(),
        queries.view(),
        Metric::L2Squared,
        3,
        &BuildCtx::new(0),
    )
    .unwrap();
    assert_eq!(out.neighbors.ids, want.ids);
}

#[test]
fn user_errors_are_typed() {
    let (base, queries) = small(200, 5);
    let any = AnyDataset::from(base.clone());
    let none = serde_json::Value::Null;
    let ctx = BuildCtx::new(0);
    // Unknown algorithms; GPU-only ones without a GPU (with one, they build).
    assert!(matches!(
        Index::build(any.clone(), Metric::L2Squared, "nope", &none, None, &ctx),
        Err(Error::InvalidParams { .. })
    ));
    let grnnd = Index::build(any.clone(), Metric::L2Squared, "grnnd", &none, None, &ctx);
    if weft::registry::GpuStatus::probe().is_available() {
        assert!(grnnd.is_ok(), "{:?}", grnnd.err());
    } else {
        // A GPU machine (WEFT_REQUIRE_GPU) must build, never take this branch.
        #[cfg(feature = "cuda")]
        assert!(
            !weft::gpu::testing::gpu_required(),
            "WEFT_REQUIRE_GPU is set but no GPU is usable: {:?}",
            grnnd.err()
        );
        assert!(matches!(grnnd, Err(Error::Unsupported(_))));
    }
    // k for a search-graph builder, missing k for a k-NN builder, k >= n.
    assert!(
        Index::build(
            any.clone(),
            Metric::L2Squared,
            "rnndescent",
            &none,
            Some(5),
            &ctx
        )
        .is_err()
    );
    assert!(matches!(
        Index::build(any.clone(), Metric::L2Squared, "exact", &none, None, &ctx),
        Err(Error::InvalidParams { .. })
    ));
    assert!(
        Index::build(
            any.clone(),
            Metric::L2Squared,
            "exact",
            &none,
            Some(200),
            &ctx
        )
        .is_err()
    );
    // Unknown parameter.
    let bad = serde_json::json!({"not_a_param": 3});
    assert!(matches!(
        Index::build(
            any.clone(),
            Metric::L2Squared,
            "nndescent",
            &bad,
            Some(8),
            &ctx
        ),
        Err(Error::InvalidParams { .. })
    ));
    // NaN in the data.
    let mut v = base.as_slice().to_vec();
    v[7] = f32::NAN;
    let nan = weft::Dataset::from_vec(v, base.rows(), base.dim()).unwrap();
    assert!(matches!(
        Index::build(
            AnyDataset::from(nan),
            Metric::L2Squared,
            "exact",
            &none,
            Some(4),
            &ctx
        ),
        Err(Error::NonFinite { row: 0, col: 7, .. })
    ));
    // Query dimension mismatch and wrong element type.
    let index = Index::build(any, Metric::L2Squared, "exact", &none, Some(4), &ctx).unwrap();
    let short = weft::Dataset::from_vec(vec![0f32; 3 * 10], 3, 10).unwrap();
    assert!(matches!(
        index.search(short.view(), 3, &SearchParams::exact()),
        Err(Error::DimensionMismatch { .. })
    ));
    let bytes = weft::Dataset::from_vec(vec![0u8; 3 * base.dim()], 3, base.dim()).unwrap();
    assert!(
        index
            .search(bytes.view(), 3, &SearchParams::exact())
            .is_err()
    );
    assert!(
        index
            .search(queries.view(), 0, &SearchParams::exact())
            .is_err()
    );
    // Empty data.
    let empty = weft::Dataset::from_vec(Vec::<f32>::new(), 0, 4).unwrap();
    assert!(
        Index::build(
            AnyDataset::from(empty),
            Metric::L2Squared,
            "exact",
            &none,
            Some(1),
            &ctx
        )
        .is_err()
    );
}

#[test]
fn index_is_send_and_sync() {
    fn send_sync<T: Send + Sync>() {}
    send_sync::<Index>();
}

/// The GPU backend keeps its context, data and graph after the first search: repeated searches
/// (of different batch sizes) give the same results as the first, and a clone searches alone.
#[cfg(feature = "cuda")]
#[test]
fn index_gpu_search_is_repeatable() {
    use weft::index::SearchBackend;
    use weft::search::CagraSearchMode;
    if weft::gpu::testing::gpu_or_skip("index_gpu_search_is_repeatable").is_none() {
        return;
    }
    let (base, queries) = small(3000, 300);
    let index = Index::build_from_view(
        base.view(),
        Metric::L2Squared,
        "rnndescent",
        &serde_json::json!({}),
        None,
        &BuildCtx::new(5),
    )
    .unwrap();
    let mut params = SearchParams::with_beam_width(64);
    params.backend = SearchBackend::Gpu;
    // Single-CTA: deterministic and independent of the batch.
    params.cagra.mode = CagraSearchMode::SingleCta;
    let a = index.search(queries.view(), 10, &params).unwrap();
    assert_eq!(a.backend, "gpu");
    let b = index.search(queries.view(), 10, &params).unwrap();
    assert_eq!(a.neighbors, b.neighbors);
    let few = weft::Dataset::from_vec(queries.as_slice()[..40 * 96].to_vec(), 40, 96).unwrap();
    let c = index.search(few.view(), 10, &params).unwrap();
    assert_eq!(c.neighbors.ids, a.neighbors.ids[..400]);
    let d = index.clone().search(queries.view(), 10, &params).unwrap();
    assert_eq!(a.neighbors, d.neighbors);
    // Typed errors leave the cache usable.
    assert!(index.search(queries.view(), 100, &params).is_err());
    let e = index.search(queries.view(), 10, &params).unwrap();
    assert_eq!(a.neighbors, e.neighbors);
}

/// A hierarchical (GGNN) graph on the GPU backend runs the GGNN search: recall against the
/// exact search, repeatable, bad tau typed. Without a usable GPU (or without the `cuda`
/// feature) the GPU backend is `Unsupported` and the automatic one falls back to the CPU.
#[test]
fn hierarchical_index_searches_with_ggnn_on_the_gpu() {
    use weft::index::SearchBackend;
    let (base, queries) = small(3000, 200);
    let index = Index::build_from_view(
        base.view(),
        Metric::L2Squared,
        "ggnn",
        &serde_json::json!({}),
        None,
        &BuildCtx::new(2),
    )
    .unwrap();
    assert!(matches!(
        index.graph(),
        weft::graph::storage::StoredGraph::Hier(_)
    ));
    let mut params = SearchParams::with_beam_width(64);
    params.backend = SearchBackend::Gpu;
    #[cfg(feature = "cuda")]
    let gpu = weft::gpu::testing::gpu_or_skip("hierarchical_index_searches_with_ggnn_on_the_gpu")
        .is_some();
    #[cfg(not(feature = "cuda"))]
    let gpu = false;
    if !gpu {
        assert!(matches!(
            index.search(queries.view(), 10, &params),
            Err(Error::Unsupported(_))
        ));
        params.backend = SearchBackend::Auto;
        assert_eq!(
            index.search(queries.view(), 10, &params).unwrap().backend,
            "cpu"
        );
        return;
    }
    let a = index.search(queries.view(), 10, &params).unwrap();
    assert_eq!(a.backend, "gpu");
    let exact = index
        .search(queries.view(), 10, &SearchParams::exact())
        .unwrap();
    let mut hits = 0;
    for q in 0..queries.rows() {
        let want = &exact.neighbors.ids[q * 10..q * 10 + 10];
        hits += a.neighbors.ids[q * 10..q * 10 + 10]
            .iter()
            .filter(|id| want.contains(id))
            .count();
    }
    let recall = hits as f64 / (queries.rows() * 10) as f64;
    assert!(recall >= 0.9, "GGNN GPU search recall@10 {recall}");
    let b = index.search(queries.view(), 10, &params).unwrap();
    assert_eq!(a.neighbors, b.neighbors);
    // The resident session: a smaller batch gives the same rows, a clone starts afresh.
    let dim = queries.dim();
    let few = weft::Dataset::from_vec(queries.as_slice()[..30 * dim].to_vec(), 30, dim).unwrap();
    let c = index.search(few.view(), 10, &params).unwrap();
    assert_eq!(c.neighbors.ids, a.neighbors.ids[..300]);
    let d = index.clone().search(queries.view(), 10, &params).unwrap();
    assert_eq!(a.neighbors, d.neighbors);
    params.ggnn.tau = -1.0;
    assert!(matches!(
        index.search(queries.view(), 10, &params),
        Err(Error::InvalidParams { .. })
    ));
    params.ggnn.tau = 0.5;
    assert_eq!(
        index.search(queries.view(), 10, &params).unwrap().neighbors,
        a.neighbors
    );
}
