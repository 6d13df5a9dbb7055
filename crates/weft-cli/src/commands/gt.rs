//! `weft gt`.

use std::path::PathBuf;
use std::time::Instant;

use anyhow::Result;
use weft::io::IdMatrix;
use weft::{Metric, Registry};

use super::build::BackendArg;
use super::{
    Report, id_output, metric_json, parse_metric, read_vectors, refuse_overwriting_inputs,
    require_gpu, secs,
};
use crate::progress::Session;

/// Arguments of `weft gt`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Base vectors.
    #[arg(long)]
    pub base: PathBuf,
    /// Query vectors (same element type and dimension).
    #[arg(long)]
    pub queries: PathBuf,
    /// Neighbours per query.
    #[arg(long, short, default_value_t = 100)]
    pub k: usize,
    /// Metric: l2, ip or cosine.
    #[arg(long, default_value = "l2", value_parser = parse_metric)]
    pub metric: Metric,
    /// Output id file (ivecs, ibin or npy by extension).
    #[arg(long, short)]
    pub out: PathBuf,
    /// Where to compute: the GPU when there is one (auto), or the CPU or GPU explicitly.
    #[arg(long, value_enum, default_value = "auto")]
    pub backend: BackendArg,
}

/// Exact k-NN of every query, written as ids.
pub fn run(args: &Args, s: &Session) -> Result<Report> {
    refuse_overwriting_inputs(
        "--out",
        &args.out,
        &[("--base", &args.base), ("--queries", &args.queries)],
    )?;
    id_output(&args.out)?;
    let registry = Registry::available();
    if args.backend == BackendArg::Gpu {
        require_gpu(&registry)?;
    }
    let base = read_vectors(&args.base, false)?;
    let queries = read_vectors(&args.queries, false)?;
    let ctx = s.ctx(0);
    s.stage("exact search");
    let start = Instant::now();
    let (found, backend) = registry.exact_search(
        &base,
        &queries,
        args.metric,
        args.k,
        args.backend.backend(),
        &ctx,
    )?;
    let elapsed = start.elapsed().as_secs_f64();
    s.done();
    let ids = IdMatrix::new(found.ids.clone(), found.rows(), found.k())?;
    weft::io::write_ids(&args.out, &ids, None)?;
    let qps = found.rows() as f64 / elapsed.max(1e-9);
    Ok(Report {
        json: serde_json::json!({
            "out": args.out, "queries": found.rows(), "base": base.rows(), "k": args.k,
            "metric": metric_json(args.metric), "seconds": elapsed, "qps": qps, "backend": backend,
            "gpu": registry.gpu().describe(),
        }),
        text: format!(
            "exact {}-NN of {} queries among {} vectors ({}) in {} ({qps:.0} queries/s, {})\nwrote {}\n",
            args.k,
            found.rows(),
            base.rows(),
            args.metric,
            secs(elapsed),
            backend.name(),
            args.out.display()
        ),
    })
}
