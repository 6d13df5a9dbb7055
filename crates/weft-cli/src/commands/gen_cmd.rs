//! `weft gen`.

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context, Result, anyhow, bail};
use half::f16;
use weft::io::{
    Generator, Preset, Split, StoredElement, SyntheticSpec, VectorWriter, check_free_space,
    vector_file_bytes,
};
use weft::{CancelToken, DType, DatasetView, Element};

use super::{Report, known_format, metric_json, refuse_overwriting_inputs, secs, sidecar_path};
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
    /// Queries file (default: beside --out, named STEM.queries.EXT; not the --out file).
    #[arg(long)]
    pub queries_out: Option<PathBuf>,
    /// Element type written: f32, f16, u8 or i8 (the file format must hold it: fbin, fvecs or
    /// npy for f32; npy for f16; u8bin, bvecs or npy for u8; i8bin or npy for i8). Integer
    /// types are scaled by one factor for base and queries (recorded as `scale`): none when the
    /// generated values are already integers in the type's range (sift as u8), else the type's
    /// largest value over the largest magnitude among the first 10,000 base rows; values are
    /// then rounded and saturated. A scale keeps l2, ip and cosine rankings (up to rounding);
    /// u8 is refused for presets with negative values (use i8).
    #[arg(long, value_enum, default_value_t = DtypeArg::F32)]
    pub dtype: DtypeArg,
}

/// The element type `weft gen` writes.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum DtypeArg {
    /// 32-bit floats.
    F32,
    /// 16-bit floats.
    F16,
    /// Unsigned bytes (0..=255).
    U8,
    /// Signed bytes (-128..=127).
    I8,
}

impl DtypeArg {
    fn dtype(self) -> DType {
        match self {
            DtypeArg::F32 => DType::F32,
            DtypeArg::F16 => DType::F16,
            DtypeArg::U8 => DType::U8,
            DtypeArg::I8 => DType::I8,
        }
    }
}

/// Base rows the integer scale is taken from.
const SCALE_SAMPLE_ROWS: u64 = 10_000;

/// Rows generated, converted and written per step (about 32 MiB of f32 values); Ctrl-C is looked
/// at between steps.
const STEP_BYTES: usize = 32 << 20;

/// The factor the generated values are multiplied by before conversion to `dtype` (see
/// `--dtype`).
fn integer_scale(generator: &Generator, n: u64, dtype: DType, preset: &str) -> Result<f32> {
    let (lo, hi) = match dtype {
        DType::U8 => (0.0f32, 255.0f32),
        DType::I8 => (-128.0, 127.0),
        _ => return Ok(1.0),
    };
    let sample = generator.generate::<f32>(Split::Base, 0..n.min(SCALE_SAMPLE_ROWS))?;
    let values = sample.as_slice();
    let min = values.iter().copied().fold(f32::INFINITY, f32::min);
    let max = values.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    if dtype == DType::U8 && min < 0.0 {
        bail!(
            "--dtype u8: preset `{preset}` has negative values (down to {min}), which u8 cannot \
             hold; use --dtype i8, f16 or f32"
        );
    }
    if values.iter().all(|v| v.fract() == 0.0) && min >= lo && max <= hi {
        return Ok(1.0);
    }
    let largest = min.abs().max(max.abs());
    Ok(if largest > 0.0 { hi / largest } else { 1.0 })
}

/// Writes rows `0..n` of `split`, scaled by `scale` and converted to `T`, to `path`; looks at
/// `cancel` between steps (a cancelled writer removes its temporary file). Returns the rows
/// written.
fn write_split<T: Element>(
    generator: &Generator,
    split: Split,
    n: u64,
    path: &Path,
    scale: f32,
    cancel: &CancelToken,
) -> Result<usize> {
    let dim = generator.spec().dim;
    // Sized: the header is final from the start (a FIFO takes any format) and the free space
    // is checked before anything is written.
    let mut w = VectorWriter::<T>::create_sized(path, dim, n, None)?;
    let step = (STEP_BYTES / (4 * dim)).max(1) as u64;
    let mut start = 0u64;
    while start < n {
        cancel.check()?;
        let end = (start + step).min(n);
        let batch = generator.generate::<f32>(split, start..end)?;
        let rows = batch.rows();
        let values: Vec<T> = batch
            .as_slice()
            .iter()
            .map(|&v| T::from_f32(v * scale))
            .collect();
        w.push_rows(DatasetView::new(&values, rows, dim)?)?;
        start = end;
    }
    cancel.check()?;
    w.finish()
        .with_context(|| format!("finishing {}", path.display()))
}

/// Whether the files `a` and `b` would be written to the same file system (their directories'
/// devices; Unix), so that they share its free space.
fn same_file_system(a: &Path, b: &Path) -> bool {
    let dir = |p: &Path| match p.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        matches!(
            (std::fs::metadata(dir(a)), std::fs::metadata(dir(b))),
            (Ok(x), Ok(y)) if x.dev() == y.dev()
        )
    }
    #[cfg(not(unix))]
    {
        dir(a) == dir(b)
    }
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
            "unknown preset `{}` (sift, deep, gist, glove, minilm, clustered)",
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
    let out_format = known_format(&args.out, None)?;
    refuse_overwriting_inputs("--out", &args.out, &[])?;
    if args.queries > 0 {
        known_format(&queries_path, None)?;
        refuse_overwriting_inputs("--queries-out", &queries_path, &[("--out", &args.out)])?;
    }
    let dtype = args.dtype.dtype();
    // Both files must fit before the first byte is written (`-n 100000000000` is 51 TB).
    let element = StoredElement::from_dtype(dtype);
    let base_bytes = vector_file_bytes(out_format, element, args.n, dim);
    if args.queries > 0 && same_file_system(&args.out, &queries_path) {
        let query_format = known_format(&queries_path, None)?;
        let query_bytes = vector_file_bytes(query_format, element, args.queries, dim);
        check_free_space(&args.out, base_bytes.saturating_add(query_bytes)).with_context(|| {
            format!(
                "--out {} and --queries-out {} together",
                args.out.display(),
                queries_path.display()
            )
        })?;
    } else {
        check_free_space(&args.out, base_bytes)?;
    }
    let scale = integer_scale(&generator, args.n, dtype, preset.name())?;
    let mut written = vec![];
    for (split, n, path) in [
        (Split::Base, args.n, &args.out),
        (Split::Queries, args.queries, &queries_path),
    ] {
        if n == 0 {
            continue;
        }
        s.stage(&format!("writing {}", path.display()));
        let cancel = s.cancel_token();
        let rows = match args.dtype {
            DtypeArg::F32 => write_split::<f32>(&generator, split, n, path, scale, cancel),
            DtypeArg::F16 => write_split::<f16>(&generator, split, n, path, scale, cancel),
            DtypeArg::U8 => write_split::<u8>(&generator, split, n, path, scale, cancel),
            DtypeArg::I8 => write_split::<i8>(&generator, split, n, path, scale, cancel),
        }?;
        written.push(serde_json::json!({ "path": path, "rows": rows, "dim": dim }));
        s.done();
    }
    // What the data was generated for, beside it: build and gt take the metric from here. Data
    // written to a device or FIFO (not a file) leaves no file to describe.
    let sidecar = sidecar_path(&args.out);
    let described = std::fs::metadata(&args.out).is_ok_and(|m| m.is_file());
    if described {
        let description = serde_json::json!({
            "generator": "weft gen", "preset": preset.name(), "metric": spec.metric.name(),
            "seed": args.seed, "dtype": dtype, "scale": scale, "rows": args.n, "dim": dim,
        });
        weft::io::write_file(&sidecar, format!("{description:#}\n").as_bytes())
            .with_context(|| format!("writing {}", sidecar.display()))?;
    }
    let elapsed = start.elapsed().as_secs_f64();
    let text = written
        .iter()
        .map(|w| {
            format!(
                "wrote {} ({} x {} {dtype})\n",
                w["path"].as_str().unwrap_or("?"),
                w["rows"],
                w["dim"]
            )
        })
        .collect::<String>()
        + &format!(
            "preset {}{} (metric {}{}), seed {}, in {}\n",
            preset.name(),
            match spec.separation {
                Some(sep) => format!(": {} clusters, separation {sep}", spec.clusters),
                None => String::new(),
            },
            spec.metric,
            if described {
                format!(", recorded in {}", sidecar.display())
            } else {
                String::new()
            },
            args.seed,
            secs(elapsed)
        );
    let mut json = serde_json::json!({
        "preset": preset.name(), "metric": spec.metric, "seed": args.seed,
        "spec": spec, "files": written, "seconds": elapsed, "dtype": dtype,
        "description": described.then_some(&sidecar),
    });
    // One name for the metric in text and JSON (the spec's serde name for l2 is l2_squared).
    json["metric"] = metric_json(spec.metric);
    json["spec"]["metric"] = metric_json(spec.metric);
    if matches!(dtype, DType::U8 | DType::I8) {
        json["scale"] = scale
            .to_string()
            .parse::<f64>()
            .unwrap_or(scale as f64)
            .into();
    }
    if let Some(sep) = spec.separation {
        json["clusters"] = spec.clusters.into();
        // As written (an f32 widened to f64 would print 0.3 as 0.30000001192092896).
        json["separation"] = sep.to_string().parse::<f64>().unwrap_or(sep as f64).into();
    }
    Ok(Report { json, text })
}
