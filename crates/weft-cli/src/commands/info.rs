//! `weft info`.

use std::path::{Path, PathBuf};

use anyhow::Result;
use serde_json::{Value, json};
use weft::graph::storage;
use weft::io::Format;

use super::{Report, graph_record, known_format, metric_json, parse_format, tidy_floats};
use crate::progress::Session;

/// Arguments of `weft info`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Files to describe (vector, id or graph files). Without any, describes this machine.
    pub files: Vec<PathBuf>,
    /// Read the vector and id files as this format instead of taking it from their extensions:
    /// fvecs, ivecs, bvecs, fbin, ibin, u8bin, i8bin or npy (graph files are recognised by
    /// their header).
    #[arg(long, value_name = "FORMAT", value_parser = parse_format)]
    pub format: Option<Format>,
}

/// Describes files from their headers, or the machine.
pub fn run(args: &Args, s: &Session) -> Result<Report> {
    if args.files.is_empty() {
        return machine(s);
    }
    let mut docs = vec![];
    let mut text = String::new();
    for path in &args.files {
        let (doc, t) = describe(path, args.format)?;
        docs.push(doc);
        text += &t;
    }
    Ok(Report {
        json: Value::Array(docs),
        text,
    })
}

fn is_graph_file(path: &Path) -> bool {
    let mut magic = [0u8; 8];
    std::fs::File::open(path)
        .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut magic))
        .map(|_| magic == storage::MAGIC)
        .unwrap_or(false)
}

fn describe(path: &Path, format: Option<Format>) -> Result<(Value, String)> {
    // A FIFO or device would block (or never end) the header read: refused unopened.
    weft::io::check_input_file(path)?;
    if is_graph_file(path) {
        let h = storage::read_header(path)?;
        let algo = h.meta.algorithm().unwrap_or_else(|| "unknown".into());
        let text = format!(
            "{}: weft graph v{}, {} ({} vertices, degree {}), metric {}, built by {}, {} bytes, crc32 {:08x}\n  params: {}\n",
            path.display(),
            h.version,
            h.kind,
            h.n,
            h.degree,
            h.meta.metric,
            algo,
            h.file_len,
            h.checksum,
            h.meta
                .algorithm_params()
                .map(|v| tidy_floats(v).to_string())
                .unwrap_or_else(|| "not recorded".into())
        ) + &format!(
            "  seed: {}, data fingerprint: {}\n",
            h.meta
                .seed()
                .map_or_else(|| "not recorded".into(), |s| s.to_string()),
            h.meta
                .data_fingerprint()
                .unwrap_or_else(|| "not recorded".into())
        );
        let mut doc = json!({
            "path": path, "type": "graph", "version": h.version, "kind": h.kind.to_string(), "n": h.n,
            "degree": h.degree, "metric": metric_json(h.meta.metric), "dtype": h.meta.dtype, "dim": h.meta.dim,
            "entry_points": h.num_entry_points, "bytes": h.file_len, "checksum": h.checksum,
        });
        let fields = doc.as_object_mut().expect("an object");
        fields.extend(graph_record(&h.meta));
        fields.insert("algorithm".into(), algo.into());
        return Ok((doc, text));
    }
    if format.is_none() {
        known_format(path, Some("--format"))?;
    }
    let i = weft::io::info_with_format(path, format)?;
    let kind = if i.dtype().is_some() {
        "vectors"
    } else {
        "ids"
    };
    let order = i.order.map(|o| format!(", {o} order")).unwrap_or_default();
    let text = format!(
        "{}: {} file, {} x {} {} ({kind}{order}), {} bytes\n",
        path.display(),
        i.format,
        i.rows,
        i.dim,
        i.element,
        i.file_bytes
    );
    let doc = json!({
        "path": path, "type": kind, "format": i.format.name(), "element": i.element.to_string(),
        "rows": i.rows, "dim": i.dim, "bytes": i.file_bytes, "order": i.order.map(|o| o.to_string()),
    });
    Ok((doc, text))
}

fn machine(s: &Session) -> Result<Report> {
    let isa = weft::core::distance::detect_isa();
    let threads = s.threads();
    let registry = s.registry()?;
    let gpu = registry.gpu().describe();
    let gpu_text = if gpu["available"] == true {
        format!(
            "{} (sm_{}, {} SMs), {:.1} of {:.1} GiB free, driver API {}, kernels: {} (cubins built in: {}; NVRTC cache: {})",
            gpu["device"]["name"].as_str().unwrap_or("?"),
            gpu["device"]["compute_capability"][0].as_u64().unwrap_or(0) * 10
                + gpu["device"]["compute_capability"][1].as_u64().unwrap_or(0),
            gpu["device"]["sm_count"],
            gpu["free_memory"].as_f64().unwrap_or(0.0) / (1u64 << 30) as f64,
            gpu["total_memory"].as_f64().unwrap_or(0.0) / (1u64 << 30) as f64,
            gpu["device"]["driver_version"],
            gpu["kernel_mode"].as_str().unwrap_or("?"),
            gpu["cubins"],
            gpu["nvrtc_cache"],
        )
    } else {
        format!("none ({})", gpu["reason"].as_str().unwrap_or("unknown"))
    };
    let algos: Vec<String> = registry
        .list()
        .iter()
        .map(|a| format!("{} ({})", a.name, a.backend.name()))
        .collect();
    let text = format!(
        "weft {}\nCPU: {threads} threads, distance kernels: {}\nGPU: {gpu_text}\nalgorithms: {}\n",
        env!("CARGO_PKG_VERSION"),
        isa.name(),
        algos.join(", ")
    );
    Ok(Report {
        json: json!({
            "version": env!("CARGO_PKG_VERSION"), "cpu": { "threads": threads, "distance_isa": isa.name() },
            "gpu": gpu, "algorithms": algos,
        }),
        text,
    })
}
