//! Filtered search through `Index`: every back end that runs here (the CPU beam search over
//! each kind of graph, the exact search, and with a GPU the CAGRA and GGNN GPU searches) returns
//! only allowed ids, without duplicates, padded with `INVALID` / `+inf`, with recall against
//! the exact filtered search; a filter of the wrong length is a typed error.

use weft::io::Preset;
use weft::{
    Backend, BuildCtx, Dataset, Error, Filter, INVALID, Index, Metric, Neighbors, SearchParams,
};

fn small(n: usize, q: usize) -> (Dataset<f32>, Dataset<f32>) {
    let g = Preset::Deep.generator(7).unwrap();
    (g.base(n).unwrap(), g.queries(q).unwrap())
}

fn build(base: &Dataset<f32>, algo: &str, k: Option<usize>) -> Index {
    Index::build_from_view(
        base.view(),
        Metric::L2Squared,
        algo,
        &serde_json::json!({}),
        k,
        &BuildCtx::new(3).with_threads(Some(2)),
    )
    .unwrap()
}

/// Only allowed ids, no duplicates, ascending, `INVALID` / `+inf` padding at the end only.
fn check(what: &str, found: &Neighbors, filter: &Filter) {
    for q in 0..found.rows() {
        let (ids, d) = (found.row_ids(q), found.row_dists(q));
        let valid = ids.iter().take_while(|&&i| i != INVALID).count();
        assert!(ids[valid..].iter().all(|&i| i == INVALID), "{what}: q {q}");
        assert!(
            d[valid..].iter().all(|&x| x == f32::INFINITY),
            "{what}: q {q}"
        );
        for j in 0..valid {
            assert!(
                filter.contains(ids[j]),
                "{what}: q {q}: {} not allowed",
                ids[j]
            );
            assert!(!ids[..j].contains(&ids[j]), "{what}: q {q}: duplicate");
            assert!(j == 0 || d[j - 1] <= d[j], "{what}: q {q}: unsorted");
        }
    }
}

fn recall(found: &Neighbors, truth: &Neighbors) -> f64 {
    let mut hits = 0;
    let mut total = 0;
    for q in 0..found.rows() {
        let t: Vec<_> = truth.row_ids(q).iter().filter(|&&i| i != INVALID).collect();
        total += t.len();
        hits += found.row_ids(q).iter().filter(|i| t.contains(i)).count();
    }
    hits as f64 / total.max(1) as f64
}

#[test]
fn every_back_end_honours_the_filter() {
    let n = 3000;
    let (base, queries) = small(n, 50);
    let filter = Filter::from_predicate(n, |i| i % 3 == 1);
    let k = 10;
    let exact = SearchParams::exact().with_filter(filter.clone());
    for (algo, kk) in [
        ("rnndescent", None),
        ("nndescent", Some(16)),
        ("cagra", None),
        ("ggnn", None),
    ] {
        let index = build(&base, algo, kk);
        let truth = index.search(queries.view(), k, &exact).unwrap();
        check("exact", &truth.neighbors, &filter);
        let mut backends = vec![Backend::Cpu];
        #[cfg(feature = "cuda")]
        if weft::gpu::testing::gpu_or_skip("every_back_end_honours_the_filter (GPU part)").is_some()
        {
            backends.push(Backend::Gpu);
        }
        for backend in backends {
            // Beam 32: a filter of 1000 ids is above the CPU's exact threshold (16 x 32), so
            // the graph search runs.
            let params = SearchParams::with_beam_width(32)
                .with_backend(backend)
                .with_filter(filter.clone());
            let found = index.search(queries.view(), k, &params).unwrap();
            let what = format!("{algo} on {backend:?} ({})", found.backend);
            check(&what, &found.neighbors, &filter);
            let r = recall(&found.neighbors, &truth.neighbors);
            println!("{what}: recall {r}");
            assert!(r >= 0.85, "{what}: recall {r}");
        }
    }
}

#[test]
fn small_and_empty_filters_pad_and_wrong_lengths_are_typed_errors() {
    let n = 2000;
    let (base, queries) = small(n, 20);
    let index = build(&base, "rnndescent", None);
    let few = Filter::from_ids(n, &[10, 20, 30]).unwrap();
    for params in [
        SearchParams::with_beam_width(32).with_backend(Backend::Cpu),
        SearchParams::exact(),
    ] {
        let found = index
            .search(queries.view(), 5, &params.clone().with_filter(few.clone()))
            .unwrap();
        check("few", &found.neighbors, &few);
        for q in 0..queries.rows() {
            let mut got = found.neighbors.row_ids(q)[..3].to_vec();
            got.sort_unstable();
            assert_eq!(got, [10, 20, 30]);
        }
        let none = index
            .search(
                queries.view(),
                5,
                &params.clone().with_filter(Filter::none(n)),
            )
            .unwrap();
        assert!(none.neighbors.ids.iter().all(|&i| i == INVALID));
        let wrong = index.search(queries.view(), 5, &params.with_filter(Filter::all(n + 1)));
        assert!(matches!(wrong, Err(Error::InvalidParams { name, .. }) if name == "filter"));
    }
}
