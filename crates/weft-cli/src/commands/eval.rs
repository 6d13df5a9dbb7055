//! `weft eval`.

use std::path::PathBuf;

use anyhow::{Result, bail};
use weft::exact::recall::search_recall;
use weft::io::IdMatrix;
use weft::{AnyDataset, Backend, Index, Metric, SearchParams};

use super::search::{
    GpuArgs, entry_points, entry_points_json, entry_points_text, graph_kind_fields, load_index,
};
use super::{
    FormatArg, Report, check_ground_truth, graph_record, read_filter, read_ids, read_vectors,
    recall_ratio,
};
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
    /// Search with a filter: only the ids listed in FILE (text, one decimal id per line, as
    /// `weft search --filter`) may be returned; the ground truth is then computed exactly with
    /// the same filter (so --gt cannot be given). The filter must allow at least k ids.
    #[arg(long, value_name = "FILE", conflicts_with = "gt")]
    pub filter: Option<PathBuf>,
    /// The k of recall@k.
    #[arg(long, short, default_value_t = 10)]
    pub k: usize,
    /// Beam widths to sweep (comma-separated, each >= k). Default: those of 10, 16, 32, 64,
    /// 128, 256 that are at least k, after k itself when it is not among them, doubled until
    /// there are 4 (k = 100: 100, 128, 256, 512), none above 1024 (the GPU's largest list)
    /// unless k is. --beam, its former name, still works.
    #[arg(
        long = "beam-width",
        visible_alias = "beam",
        value_delimiter = ',',
        value_name = "WIDTHS"
    )]
    pub beam_width: Option<Vec<usize>>,
    /// Timed runs per beam width (the median is reported).
    #[arg(long, default_value_t = 3)]
    pub runs: usize,
    /// Seed of the searches: the entry points spread over the data when the graph stores none
    /// (a k-NN graph), the GPU search's random starting vertices.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Where the searches run, and the GPU search's options (on the GPU each beam width is the
    /// list size of the GPU search).
    #[command(flatten)]
    pub gpu: GpuArgs,
    /// The format of --data and --queries, when their extensions do not say.
    #[command(flatten)]
    pub format: FormatArg,
}

/// The beam widths `weft eval` sweeps without --beam-width (see its help).
pub fn default_beams(k: usize) -> Vec<usize> {
    const WIDTHS: [usize; 6] = [10, 16, 32, 64, 128, 256];
    const GPU_MAX: usize = 1024;
    let mut beams: Vec<usize> = WIDTHS.into_iter().filter(|&b| b >= k).collect();
    if beams.first() != Some(&k) {
        beams.insert(0, k);
    }
    while beams.len() < 4 {
        let next = beams[beams.len() - 1] * 2;
        if next > GPU_MAX.max(k) {
            break;
        }
        beams.push(next);
    }
    beams
}

/// One point of a QPS-recall curve.
#[derive(serde::Serialize, Clone, Debug)]
pub struct Point {
    /// Beam width, or 0 for exact search.
    pub beam_width: usize,
    /// Mean recall@k: the exact ratio of hits to queries x k.
    pub recall: f64,
    /// Queries per second (median of the runs).
    pub qps: f64,
    /// Distance computations per query.
    pub distances_per_query: f64,
    /// Where the searches ran: `cpu` or `gpu`.
    pub backend: &'static str,
}

/// The queries a sweep searches, their exact neighbours and how many of them count.
#[derive(Clone, Copy)]
pub struct EvalQueries<'a> {
    /// The query vectors.
    pub queries: &'a weft::AnyDataset,
    /// Their exact neighbours (at least `k` per query).
    pub gt: &'a IdMatrix,
    /// Neighbours per query searched and scored (recall@k).
    pub k: usize,
}

/// Sweeps `beams` on `index` over `eval`, each search with `base` (backend, GPU options, seed)
/// and the beam width set, `runs` times, returning recall and median QPS per beam width.
pub fn sweep_with(
    index: &Index,
    eval: EvalQueries<'_>,
    beams: &[usize],
    runs: usize,
    base: &SearchParams,
    s: &Session,
) -> Result<Vec<Point>> {
    let EvalQueries { queries, gt, k } = eval;
    let with = |beam: usize| SearchParams {
        beam_width: Some(beam),
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
        if let Err(e) = weft::search::plan::check_beam_width(beam, k) {
            bail!("{e}");
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
            beam_width: beam,
            recall: recall_ratio(recall.mean, queries.rows(), k),
            qps: queries.rows() as f64 / median.max(1e-9),
            distances_per_query: out.stats.distance_computations as f64
                / queries.rows().max(1) as f64,
            backend: out.backend,
        });
    }
    Ok(points)
}

/// Renders a QPS-recall table.
pub fn table(points: &[Point], k: usize) -> String {
    let mut t = format!(
        "  {:>10}  {:>10}  {:>12}  {:>12}\n",
        "beam width",
        format!("recall@{k}"),
        "queries/s",
        "dist/query"
    );
    for p in points {
        t += &format!(
            "  {:>10}  {:>10.4}  {:>12.0}  {:>12.0}\n",
            p.beam_width, p.recall, p.qps, p.distances_per_query
        );
    }
    t
}

/// Queries whose exact neighbours `weft eval` compares with a given ground truth.
const GT_CHECK_QUERIES: usize = 32;

/// Below this share of agreement with exact search under the graph's metric, a given ground
/// truth is reported as computed for another metric.
const GT_AGREEMENT: f64 = 0.9;

/// The first `m` rows of `d`.
fn first_rows(d: &AnyDataset, m: usize) -> Result<AnyDataset> {
    Ok(match d {
        AnyDataset::F32(x) => AnyDataset::from_typed(x.view().slice_rows(0..m)?.to_dataset()),
        AnyDataset::F16(x) => AnyDataset::from_typed(x.view().slice_rows(0..m)?.to_dataset()),
        AnyDataset::U8(x) => AnyDataset::from_typed(x.view().slice_rows(0..m)?.to_dataset()),
        AnyDataset::I8(x) => AnyDataset::from_typed(x.view().slice_rows(0..m)?.to_dataset()),
    })
}

/// A warning when the ground truth `gt` does not look computed under the graph's metric: the
/// exact k nearest neighbours of the first queries (CPU) under the graph's metric share less
/// than [`GT_AGREEMENT`] of its first `k` ids; it names the metric that matches best.
fn ground_truth_metric_warning(
    index: &Index,
    queries: &AnyDataset,
    gt: &IdMatrix,
    k: usize,
    s: &Session,
) -> Result<Option<String>> {
    let m = queries.rows().min(GT_CHECK_QUERIES);
    let k = k.min(gt.cols());
    if m == 0 || k == 0 {
        return Ok(None);
    }
    s.stage("checking the ground truth's metric");
    let sample = first_rows(queries, m)?;
    let registry = s.registry()?;
    let ctx = s.ctx(0);
    let agreement = |metric: Metric| -> Result<f64> {
        let (found, _) =
            registry.exact_search(index.data(), &sample, metric, k, Some(Backend::Cpu), &ctx)?;
        let hits: usize = (0..m)
            .map(|q| {
                let truth = &gt.row(q)[..k];
                found
                    .row_ids(q)
                    .iter()
                    .filter(|id| truth.contains(id))
                    .count()
            })
            .sum();
        Ok(hits as f64 / (m * k) as f64)
    };
    let own = index.metric();
    let mine = agreement(own)?;
    if mine >= GT_AGREEMENT {
        s.done();
        return Ok(None);
    }
    let mut best = None;
    for other in Metric::ALL.into_iter().filter(|&x| x != own) {
        let a = agreement(other)?;
        if best.is_none_or(|(_, b)| a > b) {
            best = Some((other, a));
        }
    }
    s.done();
    let likely = match best {
        Some((other, a)) if a >= GT_AGREEMENT => format!(
            "; it matches {other} ({:.0} %): it was probably computed with --metric {other}",
            a * 100.0
        ),
        _ => String::new(),
    };
    Ok(Some(format!(
        "warning: the ground truth agrees with exact {own} search (the graph's metric) on only \
         {:.0} % of the first {k} neighbours of {m} queries{likely}; recall is measured against \
         it as given",
        mine * 100.0
    )))
}

/// Measures recall@k and QPS over a sweep of beam widths.
pub fn run(args: &Args, s: &Session) -> Result<Report> {
    let beams = args
        .beam_width
        .clone()
        .unwrap_or_else(|| default_beams(args.k));
    args.gpu.check(s)?;
    args.gpu.check_k(args.k, &beams)?;
    let index = load_index(&args.data, &args.graph, args.format.format)?;
    let queries = read_vectors(&args.queries, false, args.format.format)?;
    let n = index.data().rows();
    let filter = match &args.filter {
        Some(path) => {
            let f = read_filter(path, n)?;
            if f.count() < args.k {
                bail!(
                    "--filter {}: allows {} ids, fewer than k = {}: recall@k needs k allowed \
                     neighbours",
                    path.display(),
                    f.count(),
                    args.k
                );
            }
            Some(f)
        }
        None => None,
    };
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
            let mut exact_params = SearchParams::exact().with_cancel(s.cancel_token().clone());
            exact_params.filter = filter.clone();
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
    let warning = match &args.gt {
        Some(_) => ground_truth_metric_warning(&index, &queries, &gt, args.k, s)?,
        None => None,
    };
    if let Some(w) = &warning {
        eprintln!("{w}");
    }
    let (entries, entry_seconds) = entry_points(&index, args.seed, s)?;
    s.stage("sweeping the beam width");
    let mut base = args.gpu.apply(SearchParams::default(), s)?;
    base.seed = args.seed;
    base.filter = filter.clone();
    let eval = EvalQueries {
        queries: &queries,
        gt: &gt,
        k: args.k,
    };
    let points = sweep_with(&index, eval, &beams, args.runs, &base, s)?;
    s.done();
    let text = format!(
        "{}{}{} queries, k = {}{}, {} threads, median of {} runs\n{}",
        warning
            .as_ref()
            .map(|w| format!("{w}\n"))
            .unwrap_or_default(),
        entry_points_text(&index, &entries, entry_seconds),
        queries.rows(),
        args.k,
        filter.as_ref().map_or(String::new(), |f| format!(
            ", filter: {} of {n} ids allowed",
            f.count()
        )),
        s.threads(),
        args.runs,
        table(&points, args.k)
    );
    let mut json = serde_json::json!({
        "queries": queries.rows(), "k": args.k, "seed": args.seed, "threads": s.threads(), "runs": args.runs,
        "algorithm": index.meta().algorithm(), "points": points,
        "entry_points": entry_points_json(&entries, entry_seconds),
        "filter": filter.as_ref().map(|f| serde_json::json!({"file": args.filter, "allowed": f.count(), "n": n})),
    });
    let fields = json.as_object_mut().expect("an object");
    fields.extend(graph_kind_fields(index.graph_kind()));
    // How the graph was built, as its file records it (seed, data fingerprint, ...).
    fields.insert("build".into(), graph_record(index.meta()).into());
    fields.insert("metric".into(), super::metric_json(index.metric()));
    fields.insert("ground_truth_warning".into(), warning.into());
    Ok(Report { json, text })
}

#[cfg(test)]
mod tests {
    use super::default_beams;

    #[test]
    fn default_beams_hold_k() {
        assert_eq!(default_beams(10), [10, 16, 32, 64, 128, 256]);
        assert_eq!(default_beams(1), [1, 10, 16, 32, 64, 128, 256]);
        assert_eq!(default_beams(100), [100, 128, 256, 512]);
        assert_eq!(default_beams(256), [256, 512, 1024]);
        assert_eq!(default_beams(2000), [2000]);
        for k in [1, 10, 64, 65, 100, 1000] {
            assert!(default_beams(k).iter().all(|&b| b >= k));
        }
    }
}
