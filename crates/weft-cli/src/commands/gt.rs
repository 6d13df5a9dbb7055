//! `weft gt`.

use std::path::PathBuf;
use std::time::Instant;

use anyhow::Result;
use weft::Metric;
use weft::io::IdMatrix;

use super::build::BackendArg;
use super::{
    FormatArg, Report, id_output, metric_json, parse_metric, read_vectors,
    refuse_overwriting_inputs, require_gpu, resolve_metric, secs,
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
    /// Metric: l2, ip or cosine. Default: the metric `weft gen` generated the base for (it
    /// records it in `<base>.weft.json`), else l2; a --metric other than the recorded one is
    /// used, with a warning.
    #[arg(long, value_parser = parse_metric)]
    pub metric: Option<Metric>,
    /// Output id file (ivecs, ibin or npy by extension).
    #[arg(long, short)]
    pub out: PathBuf,
    /// Where to compute: the GPU when there is one (auto), or the CPU or GPU explicitly.
    #[arg(long, value_enum, default_value = "auto")]
    pub backend: BackendArg,
    /// The format of --base and --queries, when their extensions do not say.
    #[command(flatten)]
    pub format: FormatArg,
}

/// Exact k-NN of every query, written as ids.
pub fn run(args: &Args, s: &Session) -> Result<Report> {
    refuse_overwriting_inputs(
        "--out",
        &args.out,
        &[("--base", &args.base), ("--queries", &args.queries)],
    )?;
    id_output(&args.out)?;
    let registry = s.build_registry("weft gt")?;
    if args.backend == BackendArg::Gpu {
        require_gpu(&registry)?;
    }
    let mut notes = vec![];
    let metric = resolve_metric(args.metric, &args.base, &mut notes)?;
    let base = read_vectors(&args.base, false, args.format.format)?;
    let queries = read_vectors(&args.queries, false, args.format.format)?;
    let ctx = s.ctx(0);
    s.stage("exact search");
    let start = Instant::now();
    let (found, backend) = registry.exact_search(
        &base,
        &queries,
        metric,
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
            "metric": metric_json(metric), "metric_notes": notes, "seconds": elapsed, "qps": qps, "backend": backend,
            "gpu": registry.gpu().describe(),
        }),
        text: format!(
            "exact {}-NN of {} queries among {} vectors ({}) in {} ({qps:.0} queries/s, {})\nwrote {}\n",
            args.k,
            found.rows(),
            base.rows(),
            metric,
            secs(elapsed),
            backend.name(),
            args.out.display()
        ),
    })
}
