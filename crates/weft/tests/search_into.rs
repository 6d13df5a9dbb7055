//! Search results as `ndarray` views, searches into the caller's arrays with shape checks, and
//! threads and cancellation at search time.

use ndarray::{Array2, ShapeBuilder};
use weft::index::CANCEL_CHECK_ROWS;
use weft::io::Preset;
use weft::{
    Algorithm, Backend, CancelToken, Dataset, Error, GpuStatus, Index, NeighborsMut, NodeId,
    RnnDescentParams, SearchParams,
};

fn small(n: usize, q: usize) -> (Dataset<f32>, Dataset<f32>) {
    let g = Preset::Deep.generator(5).unwrap();
    (g.base(n).unwrap(), g.queries(q).unwrap())
}

fn rnndescent_index(base: Dataset<f32>) -> Index {
    Index::builder(Algorithm::RnnDescent(RnnDescentParams {
        degree: 16,
        ..RnnDescentParams::default()
    }))
    .gpu(GpuStatus::Unavailable("the test builds on the CPU".into()))
    .seed(3)
    .build(base)
    .unwrap()
}

/// The CPU beam search (deterministic on every machine).
fn cpu(beam: usize) -> SearchParams {
    SearchParams::with_beam_width(beam).with_backend(Backend::Cpu)
}

#[test]
fn neighbours_as_ndarray_views_have_the_search_shape() {
    let (base, queries) = small(800, 13);
    let index = rnndescent_index(base);
    let found = index.search(queries.view(), 7, &cpu(32)).unwrap();
    let (ids, dists) = (found.neighbors.ids_view(), found.neighbors.distances_view());
    assert_eq!(ids.dim(), (13, 7));
    assert_eq!(dists.dim(), (13, 7));
    for q in 0..13 {
        assert_eq!(ids.row(q).to_vec(), found.neighbors.row_ids(q));
        assert_eq!(dists.row(q).to_vec(), found.neighbors.row_dists(q));
        assert!(
            found
                .neighbors
                .row_dists(q)
                .windows(2)
                .all(|w| w[0] <= w[1])
        );
    }
    let (owned_ids, owned_dists) = found.neighbors.clone().into_arrays().unwrap();
    assert_eq!(owned_ids, ids);
    assert_eq!(owned_dists, dists);
}

#[test]
fn search_into_writes_what_search_returns() {
    let (base, queries) = small(800, 40);
    let index = rnndescent_index(base);
    for params in [cpu(32), SearchParams::exact(), SearchParams::default()] {
        let want = index.search(queries.view(), 10, &params).unwrap();
        // Standard layout: written in place.
        let mut ids = Array2::<NodeId>::zeros((40, 10));
        let mut dists = Array2::<f32>::zeros((40, 10));
        let report = index
            .search_into(queries.view(), &mut ids, &mut dists, &params)
            .unwrap();
        assert_eq!(ids, want.neighbors.ids_view());
        assert_eq!(dists, want.neighbors.distances_view());
        assert_eq!(report.backend, want.backend);
        if report.backend == "cpu" {
            // The GPU search gave the same results with other work counters here (H200, a
            // 40-query batch): only the CPU's counters are compared.
            assert_eq!(report.stats, want.stats);
        }
        // Column-major arrays: the same values.
        let mut ids_f = Array2::<NodeId>::zeros((40, 10).f());
        let mut dists_f = Array2::<f32>::zeros((40, 10).f());
        index
            .search_into(queries.view(), &mut ids_f, &mut dists_f, &params)
            .unwrap();
        assert_eq!(ids_f, want.neighbors.ids_view());
        assert_eq!(dists_f, want.neighbors.distances_view());
        // Flat buffers.
        let (mut flat_ids, mut flat_dists) = (vec![0; 400], vec![0.0; 400]);
        index
            .search_into_buffers(
                queries.view(),
                NeighborsMut::new(&mut flat_ids, &mut flat_dists, 10).unwrap(),
                &params,
            )
            .unwrap();
        assert_eq!(flat_ids, want.neighbors.ids);
        assert_eq!(flat_dists, want.neighbors.dists);
    }
}

#[test]
fn search_into_refuses_arrays_of_the_wrong_shape() {
    let (base, queries) = small(500, 12);
    let index = rnndescent_index(base);
    let params = cpu(32);
    let mismatch = |r: weft::Result<weft::SearchReport>| {
        assert!(
            matches!(r, Err(Error::DimensionMismatch { .. })),
            "a dimension mismatch expected, got {:?}",
            r.map(|_| ())
        )
    };
    let mut dists = Array2::<f32>::zeros((12, 5));
    mismatch(index.search_into(
        queries.view(),
        &mut Array2::<NodeId>::zeros((11, 5)),
        &mut dists,
        &params,
    ));
    mismatch(index.search_into(
        queries.view(),
        &mut Array2::<NodeId>::zeros((12, 5)),
        &mut Array2::<f32>::zeros((13, 5)),
        &params,
    ));
    mismatch(index.search_into(
        queries.view(),
        &mut Array2::<NodeId>::zeros((12, 5)),
        &mut Array2::<f32>::zeros((12, 6)),
        &params,
    ));
    let (mut ids, mut d) = (vec![0; 50], vec![0.0; 50]);
    mismatch(index.search_into_buffers(
        queries.view(),
        NeighborsMut::new(&mut ids, &mut d, 5).unwrap(),
        &params,
    ));
    // k = 0 or above the number of vectors: the k parameter.
    for k in [0, 501] {
        match index.search_into(
            queries.view(),
            &mut Array2::<NodeId>::zeros((12, k)),
            &mut Array2::<f32>::zeros((12, k)),
            &params,
        ) {
            Err(Error::InvalidParams { name, .. }) => assert_eq!(name, "k"),
            other => panic!("k = {k}: {:?}", other.map(|_| ())),
        }
    }
    // Queries of another dimension.
    let short = Dataset::from_vec(vec![0.0f32; 12 * 8], 12, 8).unwrap();
    mismatch(index.search_into(
        short.view(),
        &mut Array2::<NodeId>::zeros((12, 5)),
        &mut Array2::<f32>::zeros((12, 5)),
        &params,
    ));
}

#[test]
fn cancelled_search_returns_the_cancellation_error() {
    let (base, queries) = small(600, 10);
    let index = rnndescent_index(base);
    let token = CancelToken::new();
    token.cancel();
    for params in [
        cpu(32),
        SearchParams::exact(),
        SearchParams::with_beam_width(32),
    ] {
        let params = params.with_cancel(token.clone());
        assert!(
            matches!(
                index.search(queries.view(), 5, &params),
                Err(Error::Cancelled)
            ),
            "{params:?}"
        );
        let mut ids = Array2::<NodeId>::zeros((10, 5));
        let mut dists = Array2::<f32>::zeros((10, 5));
        assert!(matches!(
            index.search_into(queries.view(), &mut ids, &mut dists, &params),
            Err(Error::Cancelled)
        ));
    }
}

/// A cancellable search runs in batches and a thread count sets its pool: neither changes a
/// query's result.
#[test]
fn threads_and_batches_leave_results_unchanged() {
    let rows = 2 * CANCEL_CHECK_ROWS + 37;
    let (base, queries) = small(1000, rows);
    let index = rnndescent_index(base);
    for plain in [cpu(24), SearchParams::exact()] {
        let want = index.search(queries.view(), 10, &plain).unwrap();
        let batched = plain.clone().with_cancel(CancelToken::new());
        let got = index.search(queries.view(), 10, &batched).unwrap();
        assert_eq!(got.neighbors, want.neighbors);
        assert_eq!(got.stats, want.stats);
        let one_thread = batched.with_threads(1);
        assert_eq!(
            index
                .search(queries.view(), 10, &one_thread)
                .unwrap()
                .neighbors,
            want.neighbors
        );
        // A query alone gets its batch answer.
        let q = rows - 1;
        let alone = Dataset::from_vec(queries.row(q).to_vec(), 1, queries.dim()).unwrap();
        let one = index.search(alone.view(), 10, &one_thread).unwrap();
        assert_eq!(one.neighbors.row_ids(0), want.neighbors.row_ids(q));
    }
    match index.search(queries.view(), 10, &cpu(24).with_threads(0)) {
        Err(Error::InvalidParams { name, .. }) => assert_eq!(name, "threads"),
        other => panic!("zero threads: {:?}", other.map(|_| ())),
    }
}
