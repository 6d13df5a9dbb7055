//! `cargo xtask bench`.
//!
//! Suites available now:
//! - `kernels`: the criterion distance benchmarks against the measured single-core FMA peak;
//!   prints a markdown table and writes it (and JSON) under `bench-out/`.
//! - `peers`: the CPU comparisons with faiss-cpu, pynndescent and hnswlib, installed by the task
//!   into a virtual environment under `target/peers-venv`.
//!
//! The full harness of the benchmark issue (datasets x algorithms x backends, plots, the report)
//! is not written yet: `--suite quick|full` says so instead of pretending.

use std::path::PathBuf;
use std::process::Command;

use anyhow::{Context, Result, bail};
use serde_json::{Value, json};

use crate::util::{cargo, root, run as sh};

/// Runs the task.
pub fn run(args: &[String]) -> Result<()> {
    let mut suite = "kernels".to_string();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--suite" => suite = it.next().context("--suite needs a value")?.clone(),
            "-h" | "--help" => {
                println!(
                    "usage: cargo xtask bench [--suite kernels|peers]\n\n  kernels  distance kernels vs the measured FMA peak (criterion)\n  peers    exact k-NN vs faiss, NN-Descent vs pynndescent, RNN-Descent vs hnswlib/faiss HNSW"
                );
                return Ok(());
            }
            other => bail!("unknown option `{other}` (see --help)"),
        }
    }
    match suite.as_str() {
        "kernels" => kernels(),
        "peers" => peers(),
        "quick" | "full" => bail!(
            "suite `{suite}` (datasets x algorithms x backends with plots and a report) is not available yet; \
             it arrives with the benchmark harness. Available now: --suite kernels, --suite peers"
        ),
        other => bail!("unknown suite `{other}` (kernels, peers)"),
    }
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

fn kernels() -> Result<()> {
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
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .map(|l| l.split(':').nth(1).unwrap_or("").trim().to_string())
        })
        .unwrap_or_else(|| "unknown CPU".into());
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
    Ok(())
}

/// The peers' virtual environment, created and filled on first use.
fn peers_python() -> Result<PathBuf> {
    let venv = root().join("target/peers-venv");
    let py = venv.join("bin/python");
    if !py.exists() {
        sh(Command::new("python3").args(["-m", "venv"]).arg(&venv))?;
    }
    sh(Command::new(&py).args([
        "-m",
        "pip",
        "install",
        "--quiet",
        "numpy",
        "faiss-cpu",
        "hnswlib",
        "pynndescent",
    ]))?;
    Ok(py)
}

fn peers() -> Result<()> {
    let py = peers_python()?;
    for script in [
        "exact_vs_faiss.py",
        "nndescent_vs_pynndescent.py",
        "rnndescent_vs_hnsw.py",
    ] {
        let path = root().join("benches/peers").join(script);
        if path.exists() {
            sh(Command::new(&py).arg(&path).current_dir(root()))?;
        }
    }
    Ok(())
}
