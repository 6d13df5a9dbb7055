//! A complete program a downstream crate can copy: generate data, build a graph with a named
//! algorithm, search it, measure recall against exact search, save and reload the index.
//!
//! `cargo run --release -p weft --example quickstart`

use weft::io::Preset;
use weft::{AnyDataset, BuildCtx, Index, SearchParams};

fn main() -> weft::Result<()> {
    // 20,000 SIFT-like vectors and 200 queries from the same distribution (seeded).
    let generator = Preset::Sift.generator(7)?;
    let base = generator.base(20_000)?;
    let queries = generator.queries(200)?;
    let metric = Preset::Sift.metric();

    // Build an RNN-Descent search graph; parameters are JSON merged over the defaults.
    let ctx = BuildCtx::new(42);
    let params = serde_json::json!({ "degree": 32 });
    let index = Index::build(
        AnyDataset::from(base),
        metric,
        "rnndescent",
        &params,
        None,
        &ctx,
    )?;

    // Search with a beam of 64 and compare with exact search.
    let k = 10;
    let approx = index.search(queries.view(), k, &SearchParams::with_beam_width(64))?;
    let exact = index.search(queries.view(), k, &SearchParams::exact())?;
    let recall = weft::graph::recall::search_recall(&approx.neighbors, &exact.neighbors.ids, k, k)?;
    println!(
        "recall@{k} = {:.3} at {:.0} queries/s",
        recall.mean,
        queries.rows() as f64 / approx.elapsed.as_secs_f64()
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
