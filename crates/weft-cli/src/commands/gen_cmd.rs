//! `weft gen`.

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context, Result, anyhow};
use weft::io::{Preset, Split, VectorWriter};

use super::{Report, secs};
use crate::progress::Session;

/// Arguments of `weft gen`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Preset: sift (128-d), deep (96-d), gist (960-d) or glove (100-d, angular).
    #[arg(long, default_value = "sift")]
    pub preset: String,
    /// Number of base vectors.
    #[arg(long, short, default_value_t = 100_000)]
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
    /// Queries file (default: beside --out, named <stem>.queries.<ext>).
    #[arg(long)]
    pub queries_out: Option<PathBuf>,
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
    let preset = Preset::from_name(&args.preset)
        .ok_or_else(|| anyhow!("unknown preset `{}` (sift, deep, gist, glove)", args.preset))?;
    let generator = preset.generator(args.seed)?;
    let dim = generator.spec().dim;
    let start = Instant::now();
    let queries_path = args
        .queries_out
        .clone()
        .unwrap_or_else(|| default_queries_path(&args.out));
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
            "preset {} (metric {}), seed {}, in {}\n",
            preset.name(),
            preset.metric(),
            args.seed,
            secs(elapsed)
        );
    Ok(Report {
        json: serde_json::json!({
            "preset": preset.name(), "metric": preset.metric(), "seed": args.seed,
            "files": written, "seconds": elapsed,
        }),
        text,
    })
}
