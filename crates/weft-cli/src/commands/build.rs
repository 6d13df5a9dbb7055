//! `weft build`.

use std::path::PathBuf;
use std::time::Instant;

use anyhow::{Context, Result};
use weft::graph::stats::graph_stats;
use weft::graph::storage::{self, GraphKind};
use weft::index::EntrySource;
use weft::{Backend, Index, Metric};

use super::search::{KNN_GRAPH_NOTE, entry_points, entry_points_json, graph_kind_fields};
use super::{
    FormatArg, Report, collect_params, graph_record, metric_json, parse_metric, read_vectors,
    refuse_overwriting_inputs, require_gpu, resolve_metric, secs, with_cli_names,
};
use crate::progress::Session;

/// Where to build.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum BackendArg {
    /// The GPU when there is one and the algorithm has a GPU back end, else the CPU.
    Auto,
    /// The CPU.
    Cpu,
    /// The GPU (an error where there is none).
    Gpu,
}

impl BackendArg {
    /// The registry's backend choice.
    pub fn backend(self) -> Option<Backend> {
        match self {
            BackendArg::Auto => None,
            BackendArg::Cpu => Some(Backend::Cpu),
            BackendArg::Gpu => Some(Backend::Gpu),
        }
    }
}

/// Arguments of `weft build`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Algorithm (see `weft algos`): exact, nndescent, rnndescent, ...
    #[arg(long)]
    pub algo: String,
    /// Where to run it.
    #[arg(long, value_enum, default_value = "auto")]
    pub backend: BackendArg,
    /// Vectors to index.
    #[arg(long)]
    pub data: PathBuf,
    /// Metric: l2, ip or cosine. Default: the metric `weft gen` generated the data for (it
    /// records it in `<data>.weft.json`), else l2; a --metric other than the recorded one is
    /// used, with a warning.
    #[arg(long, value_parser = parse_metric)]
    pub metric: Option<Metric>,
    /// Neighbours per vertex, for k-NN graph builders (exact, nndescent).
    #[arg(long, short)]
    pub k: Option<usize>,
    /// Algorithm parameters as one JSON object.
    #[arg(long)]
    pub params: Option<String>,
    /// One algorithm parameter, `key=value` (repeatable; overrides --params).
    #[arg(long = "param", value_name = "KEY=VALUE")]
    pub param: Vec<String>,
    /// Seed: the same seed and parameters give the same graph on the CPU.
    #[arg(long, default_value_t = 42)]
    pub seed: u64,
    /// Device memory budget of a GPU nndescent build, in bytes or with a K, M, G or T suffix
    /// (binary: 8G = 8 GiB); it sets the nndescent parameter `gpu_mem_limit`. A build that does
    /// not fit the budget (or, without this flag, the device's free memory) is split into shards
    /// merged pairwise.
    #[arg(long, value_name = "BYTES", value_parser = parse_bytes)]
    pub gpu_mem_limit: Option<u64>,
    /// Output graph file (written atomically, with a checksum); it may not be the --data file.
    #[arg(long, short)]
    pub out: PathBuf,
    /// The format of --data, when its extension does not say.
    #[command(flatten)]
    pub format: FormatArg,
}

/// Builds and saves a graph.
pub fn run(args: &Args, s: &Session) -> Result<Report> {
    refuse_overwriting_inputs("--out", &args.out, &[("--data", &args.data)])?;
    let registry = s.build_registry("weft build")?;
    if args.backend == BackendArg::Gpu {
        require_gpu(&registry)?;
        if registry.get(&args.algo, Some(Backend::Gpu)).is_err()
            && registry.get(&args.algo, Some(Backend::Cpu)).is_ok()
        {
            anyhow::bail!(
                "--backend gpu: `{}` has no GPU back end (it runs on the CPU only); use \
                 --backend cpu or auto (see `weft algos`)",
                args.algo
            );
        }
    }
    let mut notes = vec![];
    let metric = resolve_metric(args.metric, &args.data, &mut notes)?;
    let data = read_vectors(&args.data, false, args.format.format)?;
    let mut params = collect_params(args.params.as_deref(), &args.param)?;
    if let Some(bytes) = args.gpu_mem_limit {
        if args.algo != "nndescent" {
            anyhow::bail!(
                "--gpu-mem-limit applies to `nndescent` (its GPU back end), not `{}`",
                args.algo
            );
        }
        if let serde_json::Value::Object(m) = &mut params {
            m.insert("gpu_mem_limit".into(), bytes.into());
        }
    }
    let ctx = s.ctx(args.seed);
    let start = Instant::now();
    let request = weft::BuildRequest {
        algorithm: &args.algo,
        backend: args.backend.backend(),
        params: &params,
        k: args.k,
    };
    let index = Index::build_with(&registry, data, metric, request, &ctx)
        .map_err(with_cli_names)
        .with_context(|| format!("building `{}` on {}", args.algo, args.data.display()))?;
    let build_seconds = start.elapsed().as_secs_f64();
    s.done();
    // Reachability from where `weft search` (default seed 0) starts: a k-NN graph stores no
    // entry points, so from those it spreads over the data.
    let (entries, entry_seconds) = entry_points(&index, 0, s)?;
    s.stage("graph statistics");
    let stats = graph_stats(index.graph().as_view(), Some(&entries.ids))?;
    s.done();
    storage::save(&args.out, index.graph(), index.meta())?;
    let meta = index.meta();
    let knn = index.graph_kind() == GraphKind::Knn;
    let from = match entries.source {
        EntrySource::Graph => "the entry points".to_string(),
        EntrySource::Spread { .. } => format!(
            "the {} entry points a search spreads over the data",
            entries.ids.len()
        ),
    };
    let text = format!(
        "built {} on {} ({} x {} {}, {}) in {}, seed {}, data fingerprint {}\n  graph: {} vertices, degree {} (mean out-degree {:.1}), {:.4} reachable from {from}, {} SCCs\n{}  wrote {}\n",
        args.algo,
        args.data.display(),
        index.data().rows(),
        index.data().dim(),
        index.data().dtype(),
        metric,
        secs(build_seconds),
        args.seed,
        meta.data_fingerprint().unwrap_or_default(),
        stats.num_nodes,
        stats.max_degree,
        stats.out_degree.mean,
        stats.reachable_fraction,
        stats.scc_count,
        if knn {
            format!("  {KNN_GRAPH_NOTE}\n")
        } else {
            String::new()
        },
        args.out.display()
    );
    let mut json = serde_json::json!({
        "algorithm": args.algo, "data": args.data, "rows": index.data().rows(), "dim": index.data().dim(),
        "dtype": index.data().dtype(), "metric": metric_json(metric), "seconds": build_seconds,
        "stats": stats, "out": args.out,
        "entry_points": entry_points_json(&entries, entry_seconds),
    });
    let obj = json.as_object_mut().expect("an object");
    // algorithm, backend, k, params, seed and data_fingerprint, as the graph file records them.
    obj.extend(graph_record(meta));
    obj.extend(graph_kind_fields(index.graph_kind()));
    if knn {
        obj.insert("note".into(), KNN_GRAPH_NOTE.into());
    }
    if !notes.is_empty() {
        obj.insert("metric_notes".into(), notes.clone().into());
    }
    // Warnings went to stderr already; the note on an implicit metric goes with the summary.
    let text = notes
        .iter()
        .filter(|n| !n.starts_with("warning:"))
        .map(|n| format!("{n}\n"))
        .collect::<String>()
        + &text;
    Ok(Report { json, text })
}

/// Parses a byte count: digits with an optional K, M, G or T suffix (powers of 1024), optionally
/// followed by `B` or `iB` (`512M`, `8G`, `8GiB`, `1000000`).
fn parse_bytes(s: &str) -> std::result::Result<u64, String> {
    let t = s.trim();
    let upper = t.to_ascii_uppercase();
    let body = upper
        .strip_suffix("IB")
        .or_else(|| upper.strip_suffix('B'))
        .unwrap_or(&upper);
    let (digits, shift) = match body.chars().last() {
        Some('K') => (&body[..body.len() - 1], 10),
        Some('M') => (&body[..body.len() - 1], 20),
        Some('G') => (&body[..body.len() - 1], 30),
        Some('T') => (&body[..body.len() - 1], 40),
        _ => (body, 0),
    };
    let n: u64 = digits
        .trim()
        .parse()
        .map_err(|_| format!("`{t}` is not a byte count (e.g. 1048576, 512M, 8G)"))?;
    n.checked_mul(1u64 << shift)
        .ok_or_else(|| format!("`{t}` bytes overflow"))
}

#[cfg(test)]
mod tests {
    use super::parse_bytes;

    #[test]
    fn byte_counts_with_suffixes() {
        assert_eq!(parse_bytes("1000"), Ok(1000));
        assert_eq!(parse_bytes("512M"), Ok(512 << 20));
        assert_eq!(parse_bytes("8G"), Ok(8 << 30));
        assert_eq!(parse_bytes("8gib"), Ok(8 << 30));
        assert_eq!(parse_bytes("2KB"), Ok(2048));
        assert!(parse_bytes("eight").is_err());
        assert!(parse_bytes("").is_err());
        assert!(parse_bytes("99999999999T").is_err());
    }
}
