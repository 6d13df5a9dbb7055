//! `weft eval`.

use std::path::PathBuf;

use anyhow::{Result, bail};
use weft::graph::recall::search_recall;
use weft::io::IdMatrix;
use weft::{Index, SearchParams};

use super::search::{
    GpuArgs, entry_points, entry_points_json, entry_points_text, graph_kind_fields, load_index,
};
use super::{Report, check_ground_truth, graph_record, read_ids, read_vectors, recall_ratio};
use crate::progress::Session;

/// Arguments of `weft eval`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The indexed vectors.
    #[arg(long)]
    pub data: PathBuf,
    /// The graph file.
    #[arg(long)]
    pub graph: PathBuf,
    /// Query vectors.
    #[arg(long)]
    pub queries: PathBuf,
    /// Ground-truth ids (ivecs, ibin, npy); computed exactly when absent.
    #[arg(long)]
    pub gt: Option<PathBuf>,
    /// The k of recall@k.
    #[arg(long, short, default_value_t = 10)]
    pub k: usize,
    /// Beam widths to sweep (comma-separated, each >= k).
    #[arg(long, value_delimiter = ',', default_value = "10,16,32,64,128,256")]
    pub beam: Vec<usize>,
    /// Timed runs per beam width (the median is reported).
    #[arg(long, default_value_t = 3)]
    pub runs: usize,
    /// Seed of the searches: the entry points spread over the data when the graph stores none
    /// (a k-NN graph), the GPU search's random starting vertices.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Where the searches run, and the GPU search's options (on the GPU each beam width is the
    /// itopk unless --itopk fixes it).
    #[command(flatten)]
    pub gpu: GpuArgs,
}

/// One point of a QPS-recall curve.
#[derive(serde::Serialize, Clone, Debug)]
pub struct Point {
    /// Beam width (L), or 0 for exact search.
    pub beam: usize,
    /// Mean recall@k: the exact ratio of hits to queries x k.
    pub recall: f64,
    /// Queries per second (median of the runs).
    pub qps: f64,
    /// Distance computations per query.
    pub distances_per_query: f64,
}

/// Sweeps `beams` on `index` with the CPU beam search, returning recall and median QPS per
/// beam width.
pub fn sweep(
    index: &Index,
    queries: &weft::AnyDataset,
    gt: &IdMatrix,
    k: usize,
    beams: &[usize],
    runs: usize,
    s: &Session,
) -> Result<Vec<Point>> {
    sweep_with(
        index,
        queries,
        gt,
        k,
        beams,
        runs,
        &SearchParams::default(),
        s,
    )
}

/// Like [`sweep`], each search with `base` (backend, GPU options, seed) and the beam width set.
#[allow(clippy::too_many_arguments)]
pub fn sweep_with(
    index: &Index,
    queries: &weft::AnyDataset,
    gt: &IdMatrix,
    k: usize,
    beams: &[usize],
    runs: usize,
    base: &SearchParams,
    s: &Session,
) -> Result<Vec<Point>> {
    let with = |beam: usize| SearchParams {
        beam_width: beam,
        cancel: Some(s.cancel_token().clone()),
        ..base.clone()
    };
    if runs == 0 {
        bail!("--runs must be at least 1");
    }
    let ctx = s.ctx(0);
    let mut points = vec![];
    // Warm-up: page the data and graph in.
    if let Some(&b) = beams.first() {
        ctx.install(|| index.search_any(queries, k, &with(b.max(k))))??;
    }
    for &beam in beams {
        if beam < k {
            bail!("beam width {beam} is below k = {k}");
        }
        ctx.check_cancelled()?;
        let mut times = vec![];
        let mut last = None;
        for _ in 0..runs {
            let out = ctx.install(|| index.search_any(queries, k, &with(beam)))??;
            times.push(out.elapsed.as_secs_f64());
            last = Some(out);
        }
        let out = last.expect("runs >= 1");
        times.sort_by(f64::total_cmp);
        let median = times[times.len() / 2];
        let recall = search_recall(&out.neighbors, gt.as_slice(), gt.cols(), k)?;
        points.push(Point {
            beam,
            recall: recall_ratio(recall.mean, queries.rows(), k),
            qps: queries.rows() as f64 / median.max(1e-9),
            distances_per_query: out.stats.distance_computations as f64
                / queries.rows().max(1) as f64,
        });
    }
    Ok(points)
}

/// Renders a QPS-recall table.
pub fn table(points: &[Point], k: usize) -> String {
    let mut t = format!(
        "  {:>6}  {:>10}  {:>12}  {:>12}\n",
        "beam",
        format!("recall@{k}"),
        "queries/s",
        "dist/query"
    );
    for p in points {
        t += &format!(
            "  {:>6}  {:>10.4}  {:>12.0}  {:>12.0}\n",
            p.beam, p.recall, p.qps, p.distances_per_query
        );
    }
    t
}

/// Measures recall@k and QPS over a sweep of beam widths.
pub fn run(args: &Args, s: &Session) -> Result<Report> {
    args.gpu.check()?;
    let index = load_index(&args.data, &args.graph)?;
    let queries = read_vectors(&args.queries, false)?;
    let n = index.data().rows();
    let gt = match &args.gt {
        Some(p) => {
            let gt = read_ids(p)?;
            check_ground_truth(&gt, n, args.k, &p.display().to_string())?;
            gt
        }
        None => {
            if args.k > n {
                bail!("k = {} exceeds the {n} indexed vectors", args.k);
            }
            s.stage("exact ground truth");
            let exact_params = SearchParams::exact().with_cancel(s.cancel_token().clone());
            let exact = s
                .ctx(0)
                .install(|| index.search_any(&queries, args.k, &exact_params))??;
            s.done();
            IdMatrix::new(exact.neighbors.ids, queries.rows(), args.k)?
        }
    };
    if gt.rows() != queries.rows() {
        bail!(
            "ground truth has {} rows but there are {} queries",
            gt.rows(),
            queries.rows()
        );
    }
    let (entries, entry_seconds) = entry_points(&index, args.seed, s)?;
    s.stage("sweeping the beam width");
    let mut base = args.gpu.apply(SearchParams::default());
    base.seed = args.seed;
    let points = sweep_with(
        &index, &queries, &gt, args.k, &args.beam, args.runs, &base, s,
    )?;
    s.done();
    let text = format!(
        "{}{} queries, k = {}, {} threads, median of {} runs\n{}",
        entry_points_text(&index, &entries, entry_seconds),
        queries.rows(),
        args.k,
        s.threads(),
        args.runs,
        table(&points, args.k)
    );
    let mut json = serde_json::json!({
        "queries": queries.rows(), "k": args.k, "threads": s.threads(), "runs": args.runs,
        "algorithm": index.meta().algorithm(), "points": points,
        "entry_points": entry_points_json(&entries, entry_seconds),
    });
    let fields = json.as_object_mut().expect("an object");
    fields.extend(graph_kind_fields(index.graph_kind()));
    // How the graph was built, as its file records it (seed, data fingerprint, ...).
    fields.insert("build".into(), graph_record(index.meta()).into());
    Ok(Report { json, text })
}
