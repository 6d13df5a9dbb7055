//! A complete program a downstream crate can copy: generate data, build a graph with a typed
//! algorithm and its parameters, search it, measure recall against exact search, save and
//! reload the index.
//!
//! `cargo run --release -p weft --example quickstart`

use weft::io::Preset;
use weft::{Algorithm, Backend, Index, RnnDescentParams, SearchParams};

fn main() -> weft::Result<()> {
    // 20,000 SIFT-like vectors and 200 queries from the same distribution (seeded).
    let generator = Preset::Sift.generator(7)?;
    let base = generator.base(20_000)?;
    let queries = generator.queries(200)?;
    let metric = Preset::Sift.metric();

    // Build an RNN-Descent search graph: typed parameters, checked against the data, never
    // changed; the backend is automatic (the GPU when usable and the algorithm has a GPU back
    // end; RNN-Descent runs on the CPU).
    let params = RnnDescentParams {
        degree: 32,
        ..RnnDescentParams::default()
    };
    let index = Index::builder(Algorithm::RnnDescent(params))
        .metric(metric)
        .backend(Backend::Auto)
        .seed(42)
        .build(base)?;

    // Search with a beam of 64 and compare with exact search.
    let k = 10;
    let approx = index.search(queries.view(), k, &SearchParams::with_beam_width(64))?;
    let exact = index.search(queries.view(), k, &SearchParams::exact())?;
    let recall = weft::exact::recall::search_recall(&approx.neighbors, &exact.neighbors.ids, k, k)?;
    println!(
        "recall@{k} = {:.3} at {:.0} queries/s",
        recall.mean,
        queries.rows() as f64 / approx.elapsed.as_secs_f64()
    );
    // The results as queries x k ndarray views.
    let (ids, distances) = (
        approx.neighbors.ids_view(),
        approx.neighbors.distances_view(),
    );
    println!(
        "query 0: nearest {:?} at distances {:?}",
        ids.row(0),
        distances.row(0)
    );

    // Save (graph + vectors, each written atomically) and load back by memory map.
    let dir = std::env::temp_dir().join("weft-quickstart-index");
    index.save(&dir)?;
    let loaded = Index::load(&dir)?;
    let again = loaded.search(queries.view(), k, &SearchParams::with_beam_width(64))?;
    assert_eq!(again.neighbors.ids, approx.neighbors.ids);
    println!("saved to and reloaded from {}", dir.display());
    Ok(())
}
