//! The commands. Each returns a [`Report`]: a JSON document and the same facts for people.

pub mod algos;
pub mod build;
pub mod demo;
pub mod eval;
pub mod gen_cmd;
pub mod gt;
pub mod info;
pub mod search;

use std::path::Path;

use anyhow::{Context, Result, anyhow, bail};
use serde_json::{Map, Value};
use weft::io::{Format, IdMatrix, ReadOptions};
use weft::{AnyDataset, GpuStatus, GraphMeta, Metric, NodeId, Registry};

/// A command's result.
pub struct Report {
    /// The machine-readable form (`--json`).
    pub json: Value,
    /// The human-readable form.
    pub text: String,
}

/// Parses a metric name.
pub fn parse_metric(s: &str) -> Result<Metric, String> {
    Metric::from_name(s).ok_or_else(|| format!("unknown metric `{s}` (use l2, ip or cosine)"))
}

/// Parses a file format name (`--format`).
pub fn parse_format(s: &str) -> Result<Format, String> {
    Format::from_name(s).ok_or_else(|| {
        let names: Vec<&str> = Format::ALL.iter().map(|f| f.name()).collect();
        format!("unknown format `{s}` (use {})", names.join(", "))
    })
}

/// The `--format` of the commands that read vectors (build, gt, search, eval).
#[derive(clap::Args, Debug, Clone, Copy)]
pub struct FormatArg {
    /// Read the vector inputs (--data, --base, --queries) as this format instead of taking it
    /// from their extensions: fvecs, bvecs, fbin, u8bin, i8bin or npy (for files named, e.g.,
    /// `.bin`). Id files (--gt) keep theirs.
    #[arg(long, value_name = "FORMAT", value_parser = parse_format)]
    pub format: Option<Format>,
}

/// Reads a vector file of any element type, rejecting NaN/inf unless allowed; `format`
/// overrides the one its extension names (`--format`).
pub fn read_vectors(
    path: &Path,
    allow_non_finite: bool,
    format: Option<Format>,
) -> Result<AnyDataset> {
    let mut opts = ReadOptions::new().with_allow_non_finite(allow_non_finite);
    match format {
        Some(f) => opts = opts.with_format(f),
        None => {
            known_format(path, Some("--format"))?;
        }
    }
    weft::io::read_any(path, &opts)
        .with_context(|| format!("reading vectors from {}", path.display()))
}

/// Reads an id file (ground truth: `ivecs`, `ibin` or `npy`).
pub fn read_ids(path: &Path) -> Result<IdMatrix> {
    known_format(path, None)?;
    weft::io::read_ids(path, None).with_context(|| format!("reading ids from {}", path.display()))
}

/// The format named by `path`'s extension, or an error that says what to do about an unknown
/// one: rename the file (or link it) or, where the command has one, use `flag` (`--format`).
pub fn known_format(path: &Path, flag: Option<&str>) -> Result<Format> {
    let ext = path.extension().and_then(|e| e.to_str()).unwrap_or("");
    Format::from_name(ext).ok_or_else(|| {
        let names: Vec<&str> = Format::ALL.iter().map(|f| f.name()).collect();
        let remedy = match flag {
            Some(flag) => format!("name its format with {flag} FORMAT"),
            None => "give the file one of these extensions (a symbolic link will do)".into(),
        };
        anyhow!(
            "{}: unknown file extension `{ext}`: expected one of {}; {remedy}",
            path.display(),
            names.join(", ")
        )
    })
}

/// Checks, before any work, that `path` (the `--out` of ids) names an id format.
pub fn id_output(path: &Path) -> Result<()> {
    let format = known_format(path, None)?;
    if !(format.is_id_format() || format == Format::Npy) {
        bail!(
            "--out {}: ids are written as ivecs, ibin or npy, not {}",
            path.display(),
            format.name()
        );
    }
    Ok(())
}

/// Refuses, before anything is read or written, an output file that is one of the inputs (the
/// same path, another path to the same file, a hard or symbolic link to it), that is a
/// dataset's description (`*.weft.json`, which `weft gen` writes and `build` and `gt` read the
/// metric from), or that is a directory or another file that cannot be written (a character
/// device such as `/dev/null`, or a FIFO, is written in place).
pub fn refuse_overwriting_inputs(
    out_flag: &str,
    out: &Path,
    inputs: &[(&str, &Path)],
) -> Result<()> {
    if is_sidecar(out) {
        bail!(
            "{out_flag} {}: a `{SIDECAR_SUFFIX}` file describes a dataset (weft gen writes it; \
             build and gt take the data's metric from it): refusing to write over it (nothing \
             was written); name the output otherwise",
            out.display()
        );
    }
    weft::core::temp_files::output_target(out).with_context(|| out_flag.to_string())?;
    for (flag, input) in inputs {
        if same_file(out, input) {
            bail!(
                "{out_flag} {} is the same file as {flag} {}: refusing to write over it \
                 (nothing was written)",
                out.display(),
                input.display()
            );
        }
    }
    Ok(())
}

/// Whether `a` and `b` name the same file: the same device and inode (Unix), or the same
/// canonical path (for a file that does not exist yet: its canonical directory and name).
pub fn same_file(a: &Path, b: &Path) -> bool {
    #[cfg(unix)]
    if let (Ok(ma), Ok(mb)) = (std::fs::metadata(a), std::fs::metadata(b)) {
        use std::os::unix::fs::MetadataExt;
        if (ma.dev(), ma.ino()) == (mb.dev(), mb.ino()) {
            return true;
        }
    }
    let canonical = |p: &Path| {
        p.canonicalize().ok().or_else(|| {
            let dir = match p.parent() {
                Some(d) if !d.as_os_str().is_empty() => d,
                _ => Path::new("."),
            };
            Some(dir.canonicalize().ok()?.join(p.file_name()?))
        })
    };
    matches!((canonical(a), canonical(b)), (Some(x), Some(y)) if x == y)
}

/// Refuses `--backend gpu` where no GPU back end can run, saying why: this binary was built
/// without GPU support, or this machine has no usable GPU or driver; and what to do instead.
pub fn require_gpu(registry: &Registry) -> Result<()> {
    let GpuStatus::Unavailable(reason) = registry.gpu() else {
        return Ok(());
    };
    if reason.contains("without the `cuda` feature") {
        bail!(
            "--backend gpu: this weft binary was built without GPU support (the `cuda` feature \
             of the weft crate, on by default, was turned off); rebuild it with that feature, or \
             use --backend cpu (or auto, which takes the CPU here)"
        );
    }
    bail!(
        "--backend gpu: this machine has no usable GPU: {reason}. The GPU back ends need an \
         NVIDIA GPU and a driver for CUDA 13 or newer; this binary has GPU support. Use \
         --backend cpu, or --backend auto (the default), which takes the GPU only when one is \
         usable"
    )
}

/// `v` with every number that is an `f32` widened to `f64` printed as that `f32`'s shortest
/// round-trip form (`0.001`, not `0.0010000000474974513`): the algorithms' parameters are
/// `f32`s, and their JSON passes through `f64`.
pub fn tidy_floats(v: Value) -> Value {
    match v {
        Value::Number(n) if n.is_f64() => {
            let x = n.as_f64().unwrap_or_default();
            let narrow = x as f32;
            if f64::from(narrow) == x && narrow.is_finite() {
                // The shortest decimal that reads back as this f32, read as an f64.
                let shortest: f64 = narrow.to_string().parse().unwrap_or(x);
                serde_json::Number::from_f64(shortest).map_or(Value::Number(n), Value::Number)
            } else {
                Value::Number(n)
            }
        }
        Value::Array(a) => Value::Array(a.into_iter().map(tidy_floats).collect()),
        Value::Object(m) => {
            Value::Object(m.into_iter().map(|(k, v)| (k, tidy_floats(v))).collect())
        }
        other => other,
    }
}

/// Recall@k as the exact ratio hits / (`rows` x `k`), from the mean over rows of hits / `k`
/// (every ground-truth row holds `k` distinct valid ids): 0.8806, not 0.8805999999999938.
pub fn recall_ratio(mean: f64, rows: usize, k: usize) -> f64 {
    let total = (rows * k) as f64;
    if total == 0.0 {
        return mean;
    }
    (mean * total).round() / total
}

/// Checks ground truth for recall@k over `n` indexed vectors: in each row the `k` ids that
/// recall@k reads must be ids of the data (below `n`) and distinct (a repeated id would count as
/// several true neighbours and inflate recall). The error names the row (from 0).
pub fn check_ground_truth(gt: &IdMatrix, n: usize, k: usize, source: &str) -> Result<()> {
    let used = k.min(gt.cols());
    let mut seen = Vec::with_capacity(used);
    for r in 0..gt.rows() {
        let row = &gt.row(r)[..used];
        if let Some((c, &id)) = row.iter().enumerate().find(|&(_, &id)| id as usize >= n) {
            let shown = if id > i32::MAX as NodeId {
                format!("{id} (read as a signed 32-bit id: {})", id as i32)
            } else {
                id.to_string()
            };
            bail!(
                "ground truth {source}: row {r} (query {r}), column {c}: id {shown} is not an id \
                 of the {n} indexed vectors (0..{n})"
            );
        }
        seen.clear();
        seen.extend_from_slice(row);
        seen.sort_unstable();
        if let Some(w) = seen.windows(2).find(|w| w[0] == w[1]) {
            bail!(
                "ground truth {source}: row {r} (query {r}) holds id {} more than once among its \
                 first {used} ids (duplicates would inflate recall)",
                w[0]
            );
        }
    }
    Ok(())
}

/// Builds a parameter object from `--params JSON` and repeated `--param key=value` (values are
/// parsed as JSON when they can be, e.g. `rho=0.5`, `order="random"`, else taken as strings).
pub fn collect_params(params_json: Option<&str>, pairs: &[String]) -> Result<Value> {
    let mut map = match params_json {
        None => Map::new(),
        Some(s) => match serde_json::from_str::<Value>(s).context("--params is not valid JSON")? {
            Value::Object(m) => m,
            other => bail!("--params must be a JSON object, got {other}"),
        },
    };
    for pair in pairs {
        let Some((key, value)) = pair.split_once('=') else {
            bail!("--param `{pair}` is not of the form key=value");
        };
        let key = key.trim();
        if key.is_empty() {
            bail!("--param `{pair}` has an empty key");
        }
        let value = serde_json::from_str(value.trim())
            .unwrap_or_else(|_| Value::String(value.trim().to_string()));
        map.insert(key.to_string(), value);
    }
    Ok(Value::Object(map))
}

/// The metric as the CLI names it, in text and JSON alike: `l2`, `ip` or `cosine` (the
/// library's serde name for l2 is `l2_squared`; the distances are squared Euclidean either way).
pub fn metric_json(metric: Metric) -> Value {
    Value::from(metric.name())
}

/// What a graph file records about its build, flattened into one level: `algorithm`,
/// `backend`, `k`, `params` (the algorithm's own parameters, floats tidied), `seed` and
/// `data_fingerprint` (null when the file does not record them: files written before seeds and
/// fingerprints were).
pub fn graph_record(meta: &GraphMeta) -> Map<String, Value> {
    let mut m = Map::new();
    m.insert(
        "algorithm".into(),
        meta.algorithm().map_or(Value::Null, Value::from),
    );
    for key in ["backend", "k"] {
        m.insert(key.into(), meta.field(key).unwrap_or(Value::Null));
    }
    m.insert(
        "params".into(),
        tidy_floats(meta.algorithm_params().unwrap_or(Value::Null)),
    );
    m.insert("seed".into(), meta.seed().map_or(Value::Null, Value::from));
    m.insert(
        "data_fingerprint".into(),
        meta.data_fingerprint().map_or(Value::Null, Value::from),
    );
    m
}

/// How the name of a dataset's description ends.
pub const SIDECAR_SUFFIX: &str = ".weft.json";

/// The description `weft gen` writes beside a generated vector file: `<file>.weft.json`.
pub fn sidecar_path(data: &Path) -> std::path::PathBuf {
    let mut name = data.file_name().unwrap_or_default().to_os_string();
    name.push(SIDECAR_SUFFIX);
    data.with_file_name(name)
}

/// Whether `path` names a dataset's description (`*.weft.json`, in any letter case).
pub fn is_sidecar(path: &Path) -> bool {
    path.file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|n| n.to_ascii_lowercase().ends_with(SIDECAR_SUFFIX))
}

/// The metric `weft gen` recorded for `data` in its description ([`sidecar_path`]): `None`
/// when there is none; an error naming the file when it cannot be read or is malformed (not
/// JSON, no `metric`, an unknown metric), never a silent default.
pub fn generated_metric(data: &Path) -> Result<Option<Metric>> {
    let sidecar = sidecar_path(data);
    match std::fs::symlink_metadata(&sidecar) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        _ => {}
    }
    let malformed = |why: &str| {
        anyhow!(
            "{}: malformed description of {} ({why}); it records the metric the data was \
             generated for: fix or delete it, or give --metric",
            sidecar.display(),
            data.display()
        )
    };
    weft::io::check_input_file(&sidecar).map_err(|e| malformed(&e.to_string()))?;
    let text = std::fs::read_to_string(&sidecar).map_err(|e| malformed(&e.to_string()))?;
    let doc: Value =
        serde_json::from_str(&text).map_err(|e| malformed(&format!("not JSON: {e}")))?;
    let Some(name) = doc.get("metric") else {
        return Err(malformed("no `metric` field"));
    };
    let metric = name
        .as_str()
        .and_then(Metric::from_name)
        .ok_or_else(|| malformed(&format!("`metric` is {name}, not l2, ip or cosine")))?;
    Ok(Some(metric))
}

/// The metric a command uses on `data`: `--metric` when given, else the one `weft gen` recorded
/// for the file, else l2. Also returns a note for people: where an implicit metric came from,
/// or a warning when `--metric` differs from the recorded one (on stderr too). A description
/// that exists but is malformed is an error ([`generated_metric`]).
pub fn resolve_metric(
    given: Option<Metric>,
    data: &Path,
    json_notes: &mut Vec<String>,
) -> Result<Metric> {
    let recorded = match (given, generated_metric(data)) {
        (_, Ok(r)) => r,
        (None, Err(e)) => return Err(e),
        // --metric decides; the broken description is still said, never passed over.
        (Some(_), Err(e)) => {
            let note = format!("warning: {e:#}");
            eprintln!("{note}");
            json_notes.push(note);
            None
        }
    };
    Ok(match (given, recorded) {
        (Some(m), Some(r)) if m != r => {
            let note = format!(
                "warning: --metric {m}, but {} was generated for {r} (see {}); the graph and \
                 its distances use {m}",
                data.display(),
                sidecar_path(data).display()
            );
            eprintln!("{note}");
            json_notes.push(note);
            m
        }
        (Some(m), _) => m,
        (None, Some(r)) => {
            json_notes.push(format!(
                "metric {r}: the one {} was generated for (see {}); --metric overrides it",
                data.display(),
                sidecar_path(data).display()
            ));
            r
        }
        (None, None) => Metric::L2Squared,
    })
}

/// A search error in the words of the command line (`weft search`, `weft eval`): an invalid
/// search knob is named by its flag, anything else as [`with_cli_names`] names it.
pub fn with_search_cli_names(e: weft::Error) -> anyhow::Error {
    let weft::Error::InvalidParams { name, reason } = &e else {
        return e.into();
    };
    let flag = name.replace('_', "-");
    let option = match name.as_str() {
        "traversal" => "--search-precision".to_string(),
        "search_width" | "min_iterations" | "rerank" | "tau" | "mode" => format!("--{flag}"),
        "team_size" | "max_iterations" => {
            format!("--{flag} (GPU CAGRA search) or --ggnn-{flag} (GPU GGNN search)")
        }
        "best" | "visited" | "block_threads" => format!("--ggnn-{flag}"),
        _ => return with_cli_names(e),
    };
    anyhow!("invalid parameter `{name}` (set by {option}): {reason}")
}

/// A library error in the words of the command line: an invalid parameter is named by the
/// option that sets it (`-k`, `--threads`, `--algo`, else `--param NAME`), with what to do for
/// the common k mistakes.
pub fn with_cli_names(e: weft::Error) -> anyhow::Error {
    let weft::Error::InvalidParams { name, reason } = &e else {
        return e.into();
    };
    let option = match name.as_str() {
        "k" => "-k".to_string(),
        "threads" => "--threads".to_string(),
        "algorithm" => "--algo".to_string(),
        "params" => "--params".to_string(),
        "beam_width" => "--beam-width (or its default)".to_string(),
        other => format!("--param {other}"),
    };
    let hint = if name == "k" && reason.contains("builds a search graph") {
        "; leave -k out (the graph's degree is one of its parameters, see `weft algos`)"
    } else if name == "k" && reason.contains("needs k") {
        "; give -k N"
    } else {
        ""
    };
    anyhow!("invalid parameter `{name}` (set by {option}): {reason}{hint}")
}

/// Formats seconds for people.
pub fn secs(s: f64) -> String {
    if s < 1e-3 {
        format!("{:.1} µs", s * 1e6)
    } else if s < 1.0 {
        format!("{:.1} ms", s * 1e3)
    } else {
        format!("{s:.2} s")
    }
}

/// Refuses an input of option `flag` that is not a regular file (a FIFO, a device such as
/// `/dev/zero`, a directory) from its metadata, before it is opened: reading it could block or
/// never end.
pub fn input_file(flag: &str, path: &Path) -> Result<()> {
    weft::io::check_input_file(path).with_context(|| format!("{flag} {}", path.display()))
}

/// Reads the allowed ids of `--filter FILE` for data of `n` points: a text file, one decimal
/// id (`0..n`) per line; blank lines and lines starting with `#` are skipped; repeats are
/// allowed. An unreadable file, a line that is not an id, or an id `>= n` is an error naming
/// the option, the file and the line.
pub fn read_filter(path: &Path, n: usize) -> Result<weft::Filter> {
    input_file("--filter", path)?;
    let text = std::fs::read(path)
        .with_context(|| format!("--filter {}: cannot read the file", path.display()))?;
    let Ok(text) = String::from_utf8(text) else {
        bail!(
            "--filter {}: not a text file (one decimal id per line expected)",
            path.display()
        );
    };
    let mut ids = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let Ok(id) = line.parse::<u64>() else {
            bail!(
                "--filter {} line {}: `{}` is not an id (one decimal id per line expected)",
                path.display(),
                i + 1,
                line.chars().take(40).collect::<String>()
            );
        };
        if id >= n as u64 {
            bail!(
                "--filter {} line {}: id {id} is out of range (the data has {n} points: ids 0 \
                 to {})",
                path.display(),
                i + 1,
                n.saturating_sub(1)
            );
        }
        ids.push(id as weft::NodeId);
    }
    Ok(weft::Filter::from_ids(n, &ids)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn params_merge_json_and_pairs() {
        let v = collect_params(
            Some(r#"{"a": 1}"#),
            &["b=0.5".into(), "c=random".into(), "a=2".into()],
        )
        .unwrap();
        assert_eq!(v, serde_json::json!({"a": 2, "b": 0.5, "c": "random"}));
        assert!(collect_params(None, &["nokey".into()]).is_err());
        assert!(collect_params(Some("[1]"), &[]).is_err());
    }
}
