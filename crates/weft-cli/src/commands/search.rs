//! `weft search`.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use weft::graph::storage::{self, LoadOptions};
use weft::io::IdMatrix;
use weft::{Index, SearchParams};

use super::{Report, read_vectors, secs};
use crate::progress::Session;

/// Arguments of `weft search`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The indexed vectors (the file the graph was built on).
    #[arg(long)]
    pub data: PathBuf,
    /// The graph file written by `weft build`.
    #[arg(long)]
    pub graph: PathBuf,
    /// Query vectors.
    #[arg(long)]
    pub queries: PathBuf,
    /// Neighbours per query.
    #[arg(long, short, default_value_t = 10)]
    pub k: usize,
    /// Beam width (candidate list size L >= k).
    #[arg(long, default_value_t = 64)]
    pub beam: usize,
    /// Exhaustive search instead of the graph.
    #[arg(long)]
    pub exact: bool,
    /// Output id file (ivecs, ibin or npy by extension).
    #[arg(long, short)]
    pub out: Option<PathBuf>,
}

/// Loads data and graph as one index (the graph is memory-mapped and checksum-verified).
pub fn load_index(data: &Path, graph: &Path) -> Result<Index> {
    let vectors = read_vectors(data, false)?;
    let (g, meta) = storage::load(graph, LoadOptions::mmap())
        .with_context(|| format!("loading graph {}", graph.display()))?;
    Index::from_parts(vectors, g, meta).context("the graph does not belong to this data")
}

/// Searches and writes the neighbour ids.
pub fn run(args: &Args, s: &Session) -> Result<Report> {
    let index = load_index(&args.data, &args.graph)?;
    let queries = read_vectors(&args.queries, false)?;
    let params = if args.exact {
        SearchParams::exact()
    } else {
        SearchParams::with_beam_width(args.beam)
    };
    s.stage("searching");
    let out = s
        .ctx(0)
        .install(|| index.search_any(&queries, args.k, &params))??;
    s.done();
    let seconds = out.elapsed.as_secs_f64();
    let qps = queries.rows() as f64 / seconds.max(1e-9);
    if let Some(path) = &args.out {
        weft::io::write_ids(
            path,
            &IdMatrix::new(out.neighbors.ids.clone(), out.neighbors.rows(), args.k)?,
            None,
        )?;
    }
    let mode = if args.exact {
        "exact".to_string()
    } else {
        format!("beam L={}", args.beam)
    };
    Ok(Report {
        json: serde_json::json!({
            "queries": queries.rows(), "k": args.k, "mode": mode, "seconds": seconds, "qps": qps,
            "distance_computations": out.stats.distance_computations, "out": args.out,
        }),
        text: format!(
            "searched {} queries (k = {}, {mode}) in {} ({qps:.0} queries/s, {:.0} distances/query){}\n",
            queries.rows(),
            args.k,
            secs(seconds),
            out.stats.distance_computations as f64 / queries.rows().max(1) as f64,
            args.out
                .as_ref()
                .map(|p| format!("\nwrote {}", p.display()))
                .unwrap_or_default()
        ),
    })
}
