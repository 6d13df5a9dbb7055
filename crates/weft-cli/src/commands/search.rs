//! `weft search`.

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context, Result, bail};
use serde_json::{Value, json};
use weft::graph::storage::{self, GraphKind, LoadOptions};
use weft::index::{EntrySource, SearchBackend, SearchEntryPoints};
use weft::io::{Format, IdMatrix};
use weft::search::{
    BeamSearchTuning, CagraSearchTuning, GgnnGpuOptions, GgnnSearchTuning, SearchPrecision, plan,
};
use weft::{Index, SearchParams, SearchRoute};

use super::{
    FormatArg, Report, graph_record, id_output, known_format, read_filter, read_vectors,
    refuse_overwriting_inputs, require_gpu, same_file, secs, with_search_cli_names,
};
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
    /// Beam width: the candidate list size (>= k) of every graph search: the CPU beam
    /// search's, the GPU CAGRA search's list, the GPU GGNN search's queue (hierarchical
    /// graphs). Default: 64, or for k above 64, k rounded up to a multiple of 32 (k = 100: 128).
    /// --beam, its former name, still works.
    #[arg(long = "beam-width", visible_alias = "beam", value_name = "WIDTH")]
    pub beam_width: Option<usize>,
    /// Exhaustive search instead of the graph.
    #[arg(long)]
    pub exact: bool,
    /// Seed of the search: the entry points spread over the data when the graph stores none (a
    /// k-NN graph), the GPU search's random starting vertices.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Output id file (ivecs, ibin or npy by extension). The distances go beside it (see
    /// --distances-out). Without --out the results are printed: one line per query (`query:
    /// id:distance ...`), or `ids` and `distances` arrays with --json.
    #[arg(long, short)]
    pub out: Option<PathBuf>,
    /// Output distance file (fvecs, fbin or npy by extension; default beside --out:
    /// `<stem>.dists.fvecs` for ivecs, `.dists.fbin` for ibin, `.dists.npy` for npy).
    #[arg(long, requires = "out")]
    pub distances_out: Option<PathBuf>,
    /// Return only the ids listed in FILE: a text file, one decimal id (0 to n - 1) per line;
    /// blank lines and lines starting with `#` are skipped. Filtered-out points are still
    /// traversed by the graph search; a query with fewer than k allowed neighbours found gets
    /// padding (id 4294967295, distance inf) after them. Works on every back end and with
    /// --exact. A selective filter needs a larger --beam-width for the same recall.
    #[arg(long, value_name = "FILE")]
    pub filter: Option<PathBuf>,
    /// Where the search runs, and the GPU search's options.
    #[command(flatten)]
    pub gpu: GpuArgs,
    /// The format of --data and --queries, when their extensions do not say.
    #[command(flatten)]
    pub format: FormatArg,
}

/// Where a graph search runs.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum BackendArg {
    /// The GPU when one is usable, else the CPU.
    Auto,
    /// The CPU beam search.
    Cpu,
    /// The GPU search: CAGRA-style for fixed-degree and k-NN graphs, GGNN for hierarchical
    /// graphs (an error without a usable GPU).
    Gpu,
}

/// The search backend and the graph searches' own knobs (`weft search`, `weft eval`): the
/// structs the searches read themselves ([`BeamSearchTuning`], [`CagraSearchTuning`],
/// [`GgnnSearchTuning`], [`GgnnGpuOptions`]), flattened, so that a flag reaches its search
/// without a copy in between.
///
/// --beam-width is the list size on every back end; the CPU beam search's flags
/// (--max-hops, --max-distance-computations, --no-entry-layer, --entry-layer-*) apply to it and
/// are checked on every back end; the CAGRA
/// flags (--search-width, --team-size, --mode, --max-iterations, --min-iterations,
/// --search-precision, --rerank) apply to the GPU search of fixed-degree and k-NN graphs; a
/// hierarchical (GGNN) graph on the GPU runs the GGNN search: --beam-width is its queue size,
/// --tau its slack, the --ggnn-* flags its other knobs.
#[derive(clap::Args, Debug, Clone)]
pub struct GpuArgs {
    /// auto: the GPU search when a GPU is usable (CAGRA-style; GGNN for hierarchical graphs),
    /// else the CPU beam search; cpu; gpu (an error when it cannot run).
    #[arg(long, value_enum, default_value_t = BackendArg::Auto)]
    pub backend: BackendArg,
    /// The CPU beam search's knobs.
    #[command(flatten)]
    pub beam: BeamSearchTuning,
    /// The GPU CAGRA search's knobs.
    #[command(flatten)]
    pub cagra: CagraSearchTuning,
    /// The GGNN search's knobs.
    #[command(flatten)]
    pub ggnn: GgnnSearchTuning,
    /// The GPU GGNN search's launch knobs.
    #[command(flatten)]
    pub ggnn_gpu: GgnnGpuOptions,
}

impl GpuArgs {
    /// Refuses beam widths below `k` before any work, naming the option the user gave (the
    /// search plan's one check, [`plan::check_beam_width`]).
    pub fn check_k(&self, k: usize, beam_widths: &[usize]) -> Result<()> {
        if let Some(&b) = beam_widths
            .iter()
            .find(|&&b| plan::check_beam_width(b, k).is_err())
        {
            bail!(
                "--beam-width {b} is below -k {k}: every beam width (the list size of the CPU \
                 and GPU searches) must hold the k results; give --beam-width {k} or more, or \
                 leave it out for a default that fits k"
            );
        }
        Ok(())
    }

    /// Refuses `--backend gpu` where no GPU back end can run, and a `--gpu` that cannot be
    /// used, before any work.
    pub fn check(&self, s: &Session) -> Result<()> {
        if self.backend == BackendArg::Gpu || s.gpus_given() {
            require_gpu(&s.registry()?)?;
        }
        Ok(())
    }

    /// `params` with this backend, these knobs and the session's `--gpus` devices.
    pub fn apply(&self, mut params: SearchParams, s: &Session) -> Result<SearchParams> {
        params.backend = match self.backend {
            BackendArg::Auto => SearchBackend::Auto,
            BackendArg::Cpu => SearchBackend::Cpu,
            BackendArg::Gpu => SearchBackend::Gpu,
        };
        params.beam = self.beam.clone();
        params.cagra = self.cagra.clone();
        params.ggnn = self.ggnn.clone();
        params.ggnn_gpu = self.ggnn_gpu;
        params.devices = s.gpus()?;
        Ok(params)
    }
}

/// Loads data (as `format`, else by its extension) and graph as one index (the graph is memory-mapped and checksum-verified).
pub fn load_index(data: &Path, graph: &Path, format: Option<Format>) -> Result<Index> {
    let vectors = read_vectors(data, false, format)?;
    super::input_file("--graph", graph)?;
    let (g, meta) = storage::load(graph, LoadOptions::mmap())
        .with_context(|| format!("loading graph {}", graph.display()))?;
    Index::from_parts(vectors, g, meta).context("the graph does not belong to this data")
}

/// What a k-NN graph is not, for `weft build` and `weft demo`.
pub const KNN_GRAPH_NOTE: &str = "k-NN graph, not a search graph: no entry points and no \
    connectivity repair, so searching it may miss parts of the data on clustered sets (weft \
    search starts from entry points spread over the data); for search, build cagra, \
    rnndescent, grnnd or ggnn";

/// The JSON fields that say which graph a command worked on: `graph_kind` (`knn`, `fixed` or
/// `hier`) and `search_graph` (false for a k-NN graph).
pub fn graph_kind_fields(kind: GraphKind) -> serde_json::Map<String, Value> {
    let mut m = serde_json::Map::new();
    m.insert("graph_kind".into(), json!(kind.name()));
    m.insert("search_graph".into(), json!(kind != GraphKind::Knn));
    m
}

/// The entry points the graph searches of `index` start from with `seed`, and the seconds their
/// first computation took (spread entry points of a graph without its own are computed once,
/// before the timed searches; 0 for the graph's own).
pub fn entry_points(index: &Index, seed: u64, s: &Session) -> Result<(SearchEntryPoints, f64)> {
    let spread = index.graph().as_view().entry_points().is_empty();
    if spread {
        s.stage("spreading entry points");
    }
    let start = Instant::now();
    let entries = s.ctx(0).install(|| index.search_entry_points(seed))??;
    let seconds = start.elapsed().as_secs_f64();
    if spread {
        s.done();
    }
    Ok((entries, seconds))
}

/// `{"source": "graph" | "spread", "count": .., "seed": .. (spread), "seconds": .. (spread)}`.
pub fn entry_points_json(entries: &SearchEntryPoints, seconds: f64) -> Value {
    let mut v = json!({ "source": "graph", "count": entries.ids.len() });
    if let EntrySource::Spread { seed } = entries.source {
        v = json!({
            "source": "spread", "count": entries.ids.len(), "seed": seed, "seconds": seconds,
        });
    }
    v
}

/// The line `weft search` and `weft eval` print about where the searches start: empty for a
/// graph with its own entry points.
pub fn entry_points_text(index: &Index, entries: &SearchEntryPoints, seconds: f64) -> String {
    let EntrySource::Spread { seed } = entries.source else {
        return String::new();
    };
    let what = if index.graph_kind() == GraphKind::Knn {
        "k-NN graph, not a search graph"
    } else {
        "the graph"
    };
    format!(
        "{what}: no entry points stored; searching from {} entry points spread over the data \
         (seed {seed}, computed in {}); not connectivity-repaired: what they cannot reach is \
         never found\n",
        entries.ids.len(),
        secs(seconds)
    )
}

/// The distance file written beside the id file `out`: `--distances-out`, else `<stem>.dists.`
/// with the float format that matches the id format (ivecs -> fvecs, ibin -> fbin, npy -> npy).
fn distances_path(out: &Path, given: Option<&PathBuf>) -> Result<PathBuf> {
    let path = match given {
        Some(p) => p.clone(),
        None => {
            let ext = match known_format(out, None)? {
                Format::Ivecs => "fvecs",
                Format::Ibin => "fbin",
                _ => "npy",
            };
            let stem = out
                .file_stem()
                .map(|s| s.to_string_lossy())
                .unwrap_or_default();
            out.with_file_name(format!("{stem}.dists.{ext}"))
        }
    };
    let format = known_format(&path, None)?;
    if !matches!(format, Format::Fvecs | Format::Fbin | Format::Npy) {
        bail!(
            "--distances-out {}: distances are written as fvecs, fbin or npy, not {}",
            path.display(),
            format.name()
        );
    }
    if same_file(&path, out) {
        bail!(
            "--distances-out {} is the --out file: name another",
            path.display()
        );
    }
    Ok(path)
}

/// A search error in the words of the command line ([`with_search_cli_names`]); one about the beam
/// width when the user gave none says it was the default derived from `-k`, and what to do.
fn beam_error(e: weft::Error, given: bool, beam: usize, k: usize) -> anyhow::Error {
    match &e {
        weft::Error::InvalidParams { name, reason } if name == "beam_width" && !given => {
            anyhow::anyhow!(
                "-k {k}: the default beam width for it ({beam}: 64, or k rounded up to a \
                 multiple of 32 above 64) cannot be used: {reason}; give --beam-width W (at \
                 least k) that the search accepts, or a smaller -k"
            )
        }
        _ => with_search_cli_names(e),
    }
}

/// Searches and writes the neighbour ids and distances (or prints them without --out).
pub fn run(args: &Args, s: &Session) -> Result<Report> {
    let inputs = [
        ("--data", args.data.as_path()),
        ("--graph", args.graph.as_path()),
        ("--queries", args.queries.as_path()),
    ];
    let mut dists_out = None;
    if let Some(out) = &args.out {
        refuse_overwriting_inputs("--out", out, &inputs)?;
        id_output(out)?;
        let d = distances_path(out, args.distances_out.as_ref())?;
        refuse_overwriting_inputs("--distances-out", &d, &inputs)?;
        dists_out = Some(d);
    }
    let beam = plan::beam_width_or_default(args.beam_width, args.k);
    if !args.exact {
        args.gpu.check(s)?;
        args.gpu.check_k(args.k, &[beam])?;
    }
    let index = load_index(&args.data, &args.graph, args.format.format)?;
    let queries = read_vectors(&args.queries, false, args.format.format)?;
    let mut params = if args.exact {
        SearchParams::exact()
    } else {
        let mut p = args.gpu.apply(SearchParams::with_beam_width(beam), s)?;
        p.seed = args.seed;
        p
    };
    let n = index.data().rows();
    if let Some(path) = &args.filter {
        params.filter = Some(read_filter(path, n)?);
    }
    let filter_json = params.filter.as_ref().map_or(
        Value::Null,
        |f| json!({"file": args.filter, "allowed": f.count(), "n": n}),
    );
    let filter_text = params.filter.as_ref().map_or(String::new(), |f| {
        format!(", filter: {} of {n} ids allowed", f.count())
    });
    // Ctrl-C cancels the search (between batches of queries), like a build.
    params.cancel = Some(s.cancel_token().clone());
    let (entries_json, entries_text) = if args.exact {
        (Value::Null, String::new())
    } else {
        let (entries, seconds) = entry_points(&index, args.seed, s)?;
        (
            entry_points_json(&entries, seconds),
            entry_points_text(&index, &entries, seconds),
        )
    };
    s.stage("searching");
    let out = s
        .ctx(0)
        .install(|| index.search_any(&queries, args.k, &params))?
        .map_err(|e| beam_error(e, args.beam_width.is_some(), beam, args.k))?;
    s.done();
    let seconds = out.elapsed.as_secs_f64();
    let qps = queries.rows() as f64 / seconds.max(1e-9);
    let rows = out.neighbors.rows();
    if let (Some(path), Some(dpath)) = (&args.out, &dists_out) {
        weft::io::write_ids(
            path,
            &IdMatrix::new(out.neighbors.ids.clone(), rows, args.k)?,
            None,
        )?;
        let dists = weft::Dataset::from_vec(out.neighbors.dists.clone(), rows, args.k)?;
        weft::io::write(dpath, dists.view(), None)?;
    }
    let mode = match out.route {
        SearchRoute::Exact => "exact".to_string(),
        SearchRoute::GgnnGpu => {
            format!("gpu ggnn, tau {}, beam width {beam}", args.gpu.ggnn.tau)
        }
        SearchRoute::CagraGpu => {
            let f16 = args.gpu.cagra.traversal == SearchPrecision::F16;
            let traversal = if f16 { ", f16 traversal" } else { "" };
            format!("gpu, beam width {beam}{traversal}")
        }
        SearchRoute::Beam => format!("beam search, beam width {beam}"),
    };
    // What the GPU CAGRA search traversed the data as (the exact rerank follows f16); null for
    // the other searches.
    let search_precision =
        (out.route == SearchRoute::CagraGpu).then_some(args.gpu.cagra.traversal.name());
    let mut json = json!({
        "queries": queries.rows(), "k": args.k, "seed": args.seed, "beam_width": beam, "mode": mode, "backend": out.backend,
        "search": out.route.name(),
        "search_precision": search_precision,
        "seconds": seconds, "qps": qps,
        "distance_computations": out.stats.distance_computations, "out": args.out,
        "entry_points": entries_json, "filter": filter_json,
        // The GPUs a GPU search was asked to run on (empty: the default one; null on the CPU).
        "gpus": (out.backend == "gpu").then_some(&params.devices),
    });
    let fields = json.as_object_mut().expect("an object");
    fields.extend(graph_kind_fields(index.graph_kind()));
    // How the graph was built, as its file records it (seed, data fingerprint, ...).
    fields.insert("build".into(), graph_record(index.meta()).into());
    fields.insert("distances_out".into(), json!(dists_out));
    let mut listing = String::new();
    if args.out.is_none() {
        // Nothing is thrown away: without --out the results are the output.
        let n = &out.neighbors;
        fields.insert(
            "ids".into(),
            json!((0..rows).map(|q| n.row_ids(q)).collect::<Vec<_>>()),
        );
        fields.insert(
            "distances".into(),
            json!((0..rows).map(|q| n.row_dists(q)).collect::<Vec<_>>()),
        );
        for q in 0..rows {
            listing.push_str(&format!("{q}:"));
            for (id, d) in n.row_ids(q).iter().zip(n.row_dists(q)) {
                if *id == weft::INVALID {
                    break;
                }
                listing.push_str(&format!(" {id}:{d}"));
            }
            listing.push('\n');
        }
    }
    let wrote = match (&args.out, &dists_out) {
        (Some(p), Some(d)) => format!("\nwrote {} and {}", p.display(), d.display()),
        _ => String::new(),
    };
    Ok(Report {
        json,
        text: format!(
            "{entries_text}searched {} queries (k = {}, {mode}{filter_text}) in {} ({qps:.0} queries/s, {:.0} distances/query){wrote}\n{listing}",
            queries.rows(),
            args.k,
            secs(seconds),
            out.stats.distance_computations as f64 / queries.rows().max(1) as f64,
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 34 item 15: `weft search -k 1500` without --beam-width blamed `--param
    /// beam_width`, a flag the user never gave.
    #[test]
    fn a_beam_width_error_names_what_the_user_gave() {
        let reason = "the beam width 1504 must be between 1 and 1024";
        let derived = beam_error(
            weft::Error::invalid_param("beam_width", reason),
            false,
            1504,
            1500,
        )
        .to_string();
        assert!(
            derived.contains("-k 1500")
                && derived.contains("default beam width")
                && derived.contains("--beam-width W")
                && derived.contains(reason),
            "{derived}"
        );
        assert!(!derived.contains("--param"), "{derived}");
        let given = beam_error(
            weft::Error::invalid_param("beam_width", reason),
            true,
            1504,
            1500,
        )
        .to_string();
        assert!(given.contains("set by --beam-width"), "{given}");
        assert!(!given.contains("--param"), "{given}");
        // The library names k when k is what cannot be served: the CLI says -k.
        let k = beam_error(
            weft::Error::invalid_param("k", "k = 1500 exceeds"),
            false,
            1504,
            1500,
        )
        .to_string();
        assert!(k.contains("set by -k") && k.contains("k = 1500"), "{k}");
    }
}

#[cfg(test)]
mod knob_flags {
    use clap::Parser;

    use super::GpuArgs;
    use weft::search::{
        BeamSearchTuning, CagraSearchMode, CagraSearchTuning, EntryLayerParams, GgnnGpuOptions,
        GgnnSearchTuning, SearchPrecision,
    };

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        gpu: GpuArgs,
    }

    #[test]
    fn the_flags_default_to_the_searches_own_defaults() {
        let cli = Cli::try_parse_from(["weft"]).unwrap();
        assert_eq!(cli.gpu.beam, BeamSearchTuning::default());
        assert_eq!(cli.gpu.cagra, CagraSearchTuning::default());
        assert_eq!(cli.gpu.ggnn, GgnnSearchTuning::default());
        assert_eq!(cli.gpu.ggnn_gpu, GgnnGpuOptions::default());
    }

    #[test]
    fn every_knob_has_its_flag() {
        let cli = Cli::try_parse_from([
            "weft",
            "--search-width",
            "4",
            "--max-iterations",
            "7",
            "--min-iterations",
            "3",
            "--team-size",
            "8",
            "--mode",
            "multi-cta",
            "--search-precision",
            "f16",
            "--rerank",
            "20",
            "--tau",
            "0.25",
            "--ggnn-best",
            "12",
            "--ggnn-visited",
            "100",
            "--ggnn-max-iterations",
            "50",
            "--ggnn-block-threads",
            "64",
            "--ggnn-team-size",
            "4",
            "--ggnn-prefetch-rows",
            "false",
            "--max-hops",
            "9",
            "--max-distance-computations",
            "1000",
            "--no-entry-layer",
            "--entry-layer-min-entries",
            "32",
            "--entry-layer-degree",
            "6",
            "--entry-layer-beam-width",
            "5",
        ])
        .unwrap();
        let g = cli.gpu;
        assert_eq!(
            g.beam,
            BeamSearchTuning {
                max_hops: Some(9),
                max_distance_computations: Some(1000),
                entry_layer: EntryLayerParams {
                    enabled: false,
                    min_entries: 32,
                    degree: 6,
                    beam_width: 5,
                },
            }
        );
        assert_eq!(
            g.cagra,
            CagraSearchTuning {
                search_width: 4,
                max_iterations: 7,
                min_iterations: 3,
                team_size: 8,
                mode: CagraSearchMode::MultiCta,
                traversal: SearchPrecision::F16,
                rerank: 20,
            }
        );
        assert_eq!(
            g.ggnn,
            GgnnSearchTuning {
                tau: 0.25,
                best: 12,
                visited: 100,
                max_iterations: 50,
            }
        );
        assert_eq!(
            g.ggnn_gpu,
            GgnnGpuOptions {
                block_threads: 64,
                team_size: 4,
                prefetch_rows: false,
            }
        );
    }
}
