//! `weft gen`.

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context, Result, anyhow, bail};
use weft::io::{Preset, Split, SyntheticSpec, VectorWriter};

use super::{Report, known_format, refuse_overwriting_inputs, secs};
use crate::progress::Session;

/// Arguments of `weft gen`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Preset: sift (128-d), deep (96-d), gist (960-d), glove (100-d, angular) or clustered
    /// (128-d, L2: Gaussian clusters far apart, whose exact k-NN graph falls apart into one
    /// component per cluster; see --clusters and --separation).
    #[arg(long, default_value = "sift")]
    pub preset: String,
    /// Number of clusters (clustered preset only; default 100).
    #[arg(long, value_name = "N")]
    pub clusters: Option<usize>,
    /// Distance between the two closest cluster centres, in diameters of the largest cluster
    /// (twice its root-mean-square distance from its centre); above 1 the clusters do not
    /// overlap (clustered preset only; default 4).
    #[arg(long, value_name = "S", allow_negative_numbers = true)]
    pub separation: Option<f32>,
    /// Number of base vectors (at least 1).
    #[arg(long, short, default_value_t = 100_000, value_parser = parse_base_rows)]
    pub n: u64,
    /// Number of query vectors (fresh draws from the same distribution; 0 for none).
    #[arg(long, default_value_t = 10_000)]
    pub queries: u64,
    /// Seed: the same seed gives the same files.
    #[arg(long, default_value_t = 42)]
    pub seed: u64,
    /// Base vectors file (format from the extension: fbin, fvecs, npy, ...).
    #[arg(long, short)]
    pub out: PathBuf,
    /// Queries file (default: beside --out, named <stem>.queries.<ext>; not the --out file).
    #[arg(long)]
    pub queries_out: Option<PathBuf>,
}

/// Parses `-n`: a dataset of no vectors is an error, not an empty run that writes nothing.
fn parse_base_rows(s: &str) -> std::result::Result<u64, String> {
    match s.trim().parse::<u64>() {
        Ok(0) => Err("the base set needs at least 1 vector (-n 0 would write nothing)".into()),
        Ok(n) => Ok(n),
        Err(_) => Err(format!("`{s}` is not a number of vectors")),
    }
}

fn default_queries_path(out: &Path) -> PathBuf {
    let stem = out
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "base".into());
    let ext = out
        .extension()
        .map(|e| e.to_string_lossy().into_owned())
        .unwrap_or_else(|| "fbin".into());
    out.with_file_name(format!("{stem}.queries.{ext}"))
}

/// Streams the base and query sets to disk.
pub fn run(args: &Args, s: &Session) -> Result<Report> {
    let preset = Preset::from_name(&args.preset).ok_or_else(|| {
        anyhow!(
            "unknown preset `{}` (sift, deep, gist, glove, clustered)",
            args.preset
        )
    })?;
    let spec = if preset == Preset::Clustered {
        SyntheticSpec::clustered(
            args.clusters.unwrap_or(SyntheticSpec::CLUSTERED_CLUSTERS),
            args.separation
                .unwrap_or(SyntheticSpec::CLUSTERED_SEPARATION),
        )
    } else {
        let given: Vec<&str> = [
            ("--clusters", args.clusters.is_some()),
            ("--separation", args.separation.is_some()),
        ]
        .into_iter()
        .filter_map(|(name, set)| set.then_some(name))
        .collect();
        if !given.is_empty() {
            bail!(
                "{} applies only to --preset clustered, not to `{}`",
                given.join(" and "),
                preset.name()
            );
        }
        preset.spec()
    };
    let generator = spec.generator(args.seed)?;
    let dim = spec.dim;
    let start = Instant::now();
    let queries_path = args
        .queries_out
        .clone()
        .unwrap_or_else(|| default_queries_path(&args.out));
    known_format(&args.out, None)?;
    if args.queries > 0 {
        known_format(&queries_path, None)?;
        refuse_overwriting_inputs("--queries-out", &queries_path, &[("--out", &args.out)])?;
    }
    let mut written = vec![];
    for (split, n, path) in [
        (Split::Base, args.n, &args.out),
        (Split::Queries, args.queries, &queries_path),
    ] {
        if n == 0 {
            continue;
        }
        s.stage(&format!("writing {}", path.display()));
        let mut w = VectorWriter::<f32>::create(path, dim, None)?;
        generator.write_rows(split, n, &mut w)?;
        let rows = w
            .finish()
            .with_context(|| format!("finishing {}", path.display()))?;
        written.push(serde_json::json!({ "path": path, "rows": rows, "dim": dim }));
        s.done();
    }
    let elapsed = start.elapsed().as_secs_f64();
    let text = written
        .iter()
        .map(|w| {
            format!(
                "wrote {} ({} x {})\n",
                w["path"].as_str().unwrap_or("?"),
                w["rows"],
                w["dim"]
            )
        })
        .collect::<String>()
        + &format!(
            "preset {}{} (metric {}), seed {}, in {}\n",
            preset.name(),
            match spec.separation {
                Some(sep) => format!(": {} clusters, separation {sep}", spec.clusters),
                None => String::new(),
            },
            spec.metric,
            args.seed,
            secs(elapsed)
        );
    let mut json = serde_json::json!({
        "preset": preset.name(), "metric": spec.metric, "seed": args.seed,
        "spec": spec, "files": written, "seconds": elapsed,
    });
    if let Some(sep) = spec.separation {
        json["clusters"] = spec.clusters.into();
        // As written (an f32 widened to f64 would print 0.3 as 0.30000001192092896).
        json["separation"] = sep.to_string().parse::<f64>().unwrap_or(sep as f64).into();
    }
    Ok(Report { json, text })
}
