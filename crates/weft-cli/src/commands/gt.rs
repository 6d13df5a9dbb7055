//! `weft gt`.

use std::path::PathBuf;
use std::time::Instant;

use anyhow::{Result, bail};
use weft::io::IdMatrix;
use weft::{AnyDataset, Metric};

use super::{Report, parse_metric, read_vectors, secs};
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
}

/// Exact k-NN of every query, written as ids.
pub fn run(args: &Args, s: &Session) -> Result<Report> {
    let base = read_vectors(&args.base, false)?;
    let queries = read_vectors(&args.queries, false)?;
    if base.dtype() != queries.dtype() {
        bail!(
            "base is {} but queries are {}",
            base.dtype(),
            queries.dtype()
        );
    }
    let ctx = s.ctx(0);
    let start = Instant::now();
    let found = match (&base, &queries) {
        (AnyDataset::F32(b), AnyDataset::F32(q)) => {
            weft::graph::exact::exact_search(b.view(), q.view(), args.metric, args.k, &ctx)?
        }
        (AnyDataset::F16(b), AnyDataset::F16(q)) => {
            weft::graph::exact::exact_search(b.view(), q.view(), args.metric, args.k, &ctx)?
        }
        (AnyDataset::U8(b), AnyDataset::U8(q)) => {
            weft::graph::exact::exact_search(b.view(), q.view(), args.metric, args.k, &ctx)?
        }
        (AnyDataset::I8(b), AnyDataset::I8(q)) => {
            weft::graph::exact::exact_search(b.view(), q.view(), args.metric, args.k, &ctx)?
        }
        _ => unreachable!("element types compared above"),
    };
    let elapsed = start.elapsed().as_secs_f64();
    s.done();
    let ids = IdMatrix::new(found.ids.clone(), found.rows(), found.k())?;
    weft::io::write_ids(&args.out, &ids, None)?;
    let qps = found.rows() as f64 / elapsed.max(1e-9);
    Ok(Report {
        json: serde_json::json!({
            "out": args.out, "queries": found.rows(), "base": base.rows(), "k": args.k,
            "metric": args.metric, "seconds": elapsed, "qps": qps, "backend": "cpu",
        }),
        text: format!(
            "exact {}-NN of {} queries among {} vectors ({}) in {} ({qps:.0} queries/s, CPU)\nwrote {}\n",
            args.k,
            found.rows(),
            base.rows(),
            args.metric,
            secs(elapsed),
            args.out.display()
        ),
    })
}
