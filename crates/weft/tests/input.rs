//! The facade's inputs: a build and a search take `ndarray` arrays, flat slices with their
//! dimension, `Dataset`s and `DatasetView`s alike (`weft::Vectors`, `weft::IndexData`), and
//! every spelling gives the same index and the same results.

use weft::half::f16;
use weft::ndarray::{Array2, ShapeBuilder, s};
use weft::{
    Algorithm, Backend, Dataset, Error, Index, IndexBuilder, NeighborsMut, RnnDescentParams,
    SearchParams,
};

fn base_and_queries() -> (Dataset<f32>, Dataset<f32>) {
    let g = weft::io::Preset::Deep.generator(11).unwrap();
    (g.base(800).unwrap(), g.queries(25).unwrap())
}

fn builder() -> IndexBuilder {
    Index::builder(Algorithm::RnnDescent(RnnDescentParams {
        degree: 16,
        ..RnnDescentParams::default()
    }))
    .backend(Backend::Cpu)
    .threads(2)
    .seed(7)
}

fn params() -> SearchParams {
    SearchParams::with_beam_width(32).with_backend(Backend::Cpu)
}

/// The graph's adjacency and entry points (an RNN-Descent graph is of fixed degree).
fn edges(index: &Index) -> (Vec<u32>, Vec<u32>) {
    let g = index.graph();
    let entry = g.as_view().entry_points().to_vec();
    (g.clone().into_fixed().unwrap().ids().to_vec(), entry)
}

/// `data` as a row-major `ndarray` array.
fn array<T: weft::Element>(data: &Dataset<T>) -> Array2<T> {
    Array2::from_shape_vec((data.rows(), data.dim()), data.as_slice().to_vec()).unwrap()
}

#[test]
fn builds_and_searches_through_ndarray_slices_and_views_agree() {
    let (base, queries) = base_and_queries();
    let dim = base.dim();
    let base_array = array(&base);
    let mut base_fortran = Array2::<f32>::zeros((base.rows(), dim).f());
    base_fortran.assign(&base_array);
    let flat = base.as_slice().to_vec();

    let by_view = builder().build(base.view()).unwrap();
    let graph = edges(&by_view);
    for (how, index) in [
        ("ndarray view", builder().build(base_array.view()).unwrap()),
        ("&Array2", builder().build(&base_array).unwrap()),
        (
            "column-major array",
            builder().build(&base_fortran).unwrap(),
        ),
        ("owned Array2", builder().build(base_array.clone()).unwrap()),
        ("slice", builder().build((&flat[..], dim)).unwrap()),
        ("&Vec", builder().build((&flat, dim)).unwrap()),
        ("Dataset", builder().build(base.clone()).unwrap()),
    ] {
        assert_eq!(edges(&index), graph, "graph built from {how}");
        assert_eq!(index.meta(), by_view.meta(), "meta of the build from {how}");
    }

    let want = by_view.search(queries.view(), 10, &params()).unwrap();
    let q_array = array(&queries);
    let mut q_fortran = Array2::<f32>::zeros((queries.rows(), dim).f());
    q_fortran.assign(&q_array);
    let q_flat = queries.as_slice().to_vec();
    let results = [
        (
            "ndarray view",
            by_view.search(q_array.view(), 10, &params()),
        ),
        ("&Array2", by_view.search(&q_array, 10, &params())),
        (
            "column-major",
            by_view.search(q_fortran.view(), 10, &params()),
        ),
        ("slice", by_view.search((&q_flat[..], dim), 10, &params())),
        ("&Dataset", by_view.search(&queries, 10, &params())),
    ];
    for (how, found) in results {
        assert_eq!(found.unwrap().neighbors, want.neighbors, "queries as {how}");
    }
    // A row range of the array: the same rows of the results.
    let part = by_view
        .search(q_array.slice(s![5..9, ..]), 10, &params())
        .unwrap();
    assert_eq!(
        part.neighbors.ids_view(),
        want.neighbors.ids_view().slice(s![5..9, ..])
    );

    // Into the caller's arrays and into plain slices, from each spelling.
    let mut ids = Array2::<u32>::zeros((queries.rows(), 10));
    let mut distances = Array2::<f32>::zeros((queries.rows(), 10));
    by_view
        .search_into(&q_array, &mut ids, &mut distances, &params())
        .unwrap();
    assert_eq!(ids.view(), want.neighbors.ids_view());
    assert_eq!(distances.view(), want.neighbors.distances_view());
    let mut id_buf = vec![0u32; queries.rows() * 10];
    let mut dist_buf = vec![0f32; queries.rows() * 10];
    by_view
        .search_into_buffers(
            (&q_flat[..], dim),
            NeighborsMut::new(&mut id_buf, &mut dist_buf, 10).unwrap(),
            &params(),
        )
        .unwrap();
    assert_eq!(id_buf, want.neighbors.ids);
    assert_eq!(dist_buf, want.neighbors.dists);
}

#[test]
fn dimension_mismatches_are_typed_errors() {
    let (base, queries) = base_and_queries();
    let dim = base.dim();
    let index = Index::builder(Algorithm::exact(5))
        .backend(Backend::Cpu)
        .build(array(&base))
        .unwrap();
    let q_flat = queries.as_slice();
    let wide = Array2::<f32>::zeros((3, dim + 1));
    for found in [
        // Whole rows of another dimension.
        index.search(&wide, 5, &SearchParams::exact()),
        index.search(
            (&q_flat[..3 * (dim + 1)], dim + 1),
            5,
            &SearchParams::exact(),
        ),
        // Not whole rows.
        index.search((&q_flat[..dim + 1], dim), 5, &SearchParams::exact()),
    ] {
        assert!(
            matches!(found, Err(Error::DimensionMismatch { .. })),
            "{found:?}"
        );
    }
    let mut ids = Array2::<u32>::zeros((3, 5));
    let mut distances = Array2::<f32>::zeros((3, 5));
    assert!(matches!(
        index.search_into(&wide, &mut ids, &mut distances, &SearchParams::exact()),
        Err(Error::DimensionMismatch { .. })
    ));
    // A build from a slice that is not whole rows.
    assert!(matches!(
        builder().build((&base.as_slice()[..dim * 10 + 1], dim)),
        Err(Error::DimensionMismatch { .. })
    ));
}

#[test]
fn every_element_type_through_ndarray() {
    let (base, queries) = base_and_queries();
    let to = |d: &Dataset<f32>, f: &dyn Fn(f32) -> f32| d.view().to_array_view().mapv(f);
    let scale = |x: f32| (x * 40.0).clamp(-120.0, 120.0);
    let exact = || {
        Index::builder(Algorithm::exact(5))
            .backend(Backend::Cpu)
            .seed(1)
    };
    // f16, u8, i8 arrays in, the same results as their datasets.
    let base_h: Array2<f16> = to(&base, &|x| x).mapv(f16::from_f32);
    let q_h: Array2<f16> = to(&queries, &|x| x).mapv(f16::from_f32);
    let index = exact().build(base_h.view()).unwrap();
    let a = index.search(&q_h, 5, &SearchParams::exact()).unwrap();
    let flat: Vec<f16> = q_h.iter().copied().collect();
    let b = index
        .search((&flat[..], q_h.ncols()), 5, &SearchParams::exact())
        .unwrap();
    assert_eq!(a.neighbors, b.neighbors);

    let base_u: Array2<u8> = to(&base, &|x| scale(x).abs()).mapv(|x| x as u8);
    let q_u: Array2<u8> = to(&queries, &|x| scale(x).abs()).mapv(|x| x as u8);
    let index = exact().build(base_u).unwrap();
    let a = index.search(q_u.view(), 5, &SearchParams::exact()).unwrap();
    let b = index.search(&q_u, 5, &SearchParams::exact()).unwrap();
    assert_eq!(a.neighbors, b.neighbors);

    let base_i: Array2<i8> = to(&base, &scale).mapv(|x| x as i8);
    let q_i: Array2<i8> = to(&queries, &scale).mapv(|x| x as i8);
    let index = exact().build(&base_i).unwrap();
    let a = index.search(q_i.view(), 5, &SearchParams::exact()).unwrap();
    let c = index
        .search(
            (q_i.as_slice().unwrap(), q_i.ncols()),
            5,
            &SearchParams::exact(),
        )
        .unwrap();
    assert_eq!(a.neighbors, c.neighbors);
    // Queries of another element type than the data: an error, not a conversion.
    assert!(index.search(&q_u, 5, &SearchParams::exact()).is_err());
}
