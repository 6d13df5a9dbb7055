//! `cargo xtask device-pack [--workspace | --crates a,b] [--no-cli] [--no-bench] [--no-python]
//! [--bench-only] [--examples crate:example,...] [--out DIR]`:
//! gathers stripped release test binaries, example/bench binaries and the CLI, with a run
//! script, into `device-pack/` (or `DIR`, relative to the workspace; ignored by git: use a name
//! `device-pack*`), under the 64 MiB a device run may carry. `--bench-only` packs only the
//! benchmark harness (no tests, examples or CLI).
//!
//! - test binaries: the tests of weft-gpu, of the example crate with its own kernel module
//!   (`examples/custom-kernel`) and of every library crate under `crates/` that declares a
//!   `cuda` feature (the facade among them), and of weft-cli unless `--no-cli`, with those
//!   features on (`--crates a,b`: the tests of those
//!   crates only, with their `cuda` features where they have one; `--workspace`: every
//!   workspace test binary);
//! - the exact k-NN micro-benchmark (`benches/examples/exact_bench.rs`) and, unless `--no-cli`, the `weft` binary
//!   of weft-cli when it builds;
//! - unless `--no-bench`: the harness runner `weft-bench` (weft-benches), a TrueType font for
//!   its plots (`fonts/`, from this machine), the commit (`COMMIT`) and the GPU peer script
//!   (`peers/cuvs_peer.py` with the helpers of `peers/ann_peers.py`);
//! - unless `--no-python`: the Python package as an abi3 wheel (maturin, release, the same
//!   kernels) with its pytest suite, in `python/`;
//! - kernels: every binary embeds cubins for sm_80 and sm_90, built by nvcc as `cargo xtask
//!   kernels` finds it (`$NVCC`, `target/cuda-toolchain`, PATH; installed from PyPI when
//!   missing) with `WEFT_REQUIRE_CUBINS=1`, so a module nvcc cannot build fails the pack;
//!   `WEFT_NVCC=off` makes an NVRTC pack instead. The pack's `KERNELS` file says which
//!   (`cubin` or `nvrtc`);
//! - `run.sh`: runs every test binary with `WEFT_REQUIRE_GPU=1` (the CLI's with
//!   `WEFT_CLI_BIN` set to the packed `weft`; the Python suite once, from the installed wheel)
//!   (once with the build-time
//!   cubins, `WEFT_KERNELS=cubin` in a cubin pack, once with `WEFT_KERNELS=nvrtc`), and with `--sanitize` also under
//!   `compute-sanitizer --tool memcheck` and `--tool racecheck`; logs go to `$OUT` (or
//!   `device-pack/logs`). `run.sh --bench-suite quick|full` runs the benchmark harness instead
//!   (synthetic presets, the GPU back ends; `--tests` runs the tests as well): JSON lines,
//!   report and plots in `$OUT/bench`; with `--peers` also cuVS NN-descent and CAGRA on the same
//!   files (`bench/peers.jsonl`; cuVS installed by `cargo xtask cuvs-wheels`, see
//!   docs/benchmarks.md "cuVS on the device"). `cargo xtask bench --suite quick --from-device
//!   DIR` turns the fetched files into the docs section.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{Context, Result, bail};

use crate::util::{cargo, root};

const LIMIT: u64 = 64 << 20;

/// Runs the task.
pub fn run(args: &[String]) -> Result<()> {
    let mut workspace = false;
    let mut cli = true;
    let mut bench = true;
    let mut bench_only = false;
    let mut python = true;
    let mut out = None;
    let mut only: Option<Vec<String>> = None;
    let mut extra_examples: Vec<(String, String)> = Vec::new();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--workspace" => workspace = true,
            "--no-cli" => cli = false,
            "--no-bench" => bench = false,
            "--bench-only" => bench_only = true,
            "--no-python" => python = false,
            "--out" => out = Some(it.next().context("--out needs a folder name")?.clone()),
            "--crates" => {
                let list = it.next().context("--crates needs a comma-separated list")?;
                only = Some(list.split(',').map(str::to_owned).collect());
            }
            "--examples" => {
                let list = it
                    .next()
                    .context("--examples needs a comma-separated list of crate:example")?;
                extra_examples = parse_examples(list)?;
            }
            other => bail!(
                "device-pack: unknown option `{other}` (use --workspace, --crates a,b, --no-cli, --no-bench, --no-python, --bench-only, --examples crate:example,..., --out DIR)"
            ),
        }
    }
    let root = root();
    let pack = root.join(out.as_deref().unwrap_or("device-pack"));
    if bench_only {
        cli = false;
        bench = true;
        python = false;
    }
    if pack.exists() {
        std::fs::remove_dir_all(&pack).with_context(|| format!("remove {}", pack.display()))?;
    }
    for d in ["tests", "bin"] {
        std::fs::create_dir_all(pack.join(d))?;
    }
    let kernels = PackKernels::resolve(&root)?;
    std::fs::write(pack.join("KERNELS"), kernels.name())?;

    let mut test_args: Vec<String> = ["test", "--release", "--no-run", "--message-format=json"]
        .map(String::from)
        .to_vec();
    if workspace {
        test_args.push("--workspace".into());
    } else {
        // The crates with GPU tests: the runtime and the GPU back ends of the algorithms.
        let crates = match only {
            Some(list) => list,
            None => gpu_crates(&root, cli)?,
        };
        let mut features = Vec::new();
        for name in &crates {
            test_args.extend(["-p".into(), name.clone()]);
            if has_cuda_feature(&crate_dir(&root, name))? {
                features.push(format!("{name}/cuda"));
            }
        }
        if !features.is_empty() {
            test_args.extend(["--features".into(), features.join(",")]);
        }
    }
    let test_args: Vec<&str> = test_args.iter().map(String::as_str).collect();
    let tests = if bench_only {
        Vec::new()
    } else {
        executables(&test_args, &kernels)?
    };
    for (name, exe) in &tests {
        copy_stripped(exe, &pack.join("tests").join(name))?;
    }
    let mut others = 0usize;
    // The exact k-NN micro-benchmark (weft-benches' exact_bench, weft-exact's GPU search). The
    // other GPU benchmark programs in benches/examples (grnnd_bench, cagra_search_bench,
    // ggnn_gpu_search_bench, ..., about 20 MiB together) would push a default pack with cubins
    // over the 64 MiB limit: they come with `--examples weft-benches:NAME,...` (below), beside a
    // smaller set of tests.
    let examples = if bench_only {
        Vec::new()
    } else {
        executables(
            &[
                "build",
                "--release",
                "-p",
                "weft-benches",
                "--features",
                "weft-benches/cuda",
                "--example",
                "exact_bench",
                "--message-format=json",
            ],
            &kernels,
        )?
    };
    for (name, exe) in &examples {
        copy_stripped(exe, &pack.join("bin").join(name))?;
        others += 1;
    }
    for (krate, example) in &extra_examples {
        let mut build: Vec<String> = ["build", "--release", "-p", krate.as_str()]
            .map(String::from)
            .to_vec();
        if has_cuda_feature(&crate_dir(&root, krate))? {
            build.extend(["--features".into(), format!("{krate}/cuda")]);
        }
        build.extend([
            "--example".into(),
            example.clone(),
            "--message-format=json".into(),
        ]);
        let build: Vec<&str> = build.iter().map(String::as_str).collect();
        let bins = executables(&build, &kernels)
            .with_context(|| format!("build example {example} of {krate}"))?;
        for (name, exe) in &bins {
            copy_stripped(exe, &pack.join("bin").join(name))?;
            others += 1;
        }
    }
    if cli {
        match executables(
            &[
                "build",
                "--release",
                "-p",
                "weft-cli",
                "--bin",
                "weft",
                "--message-format=json",
            ],
            &kernels,
        ) {
            Ok(bins) => {
                for (name, exe) in &bins {
                    copy_stripped(exe, &pack.join("bin").join(name))?;
                    others += 1;
                }
            }
            Err(e) => eprintln!("device-pack: weft-cli does not build yet, left out: {e:#}"),
        }
    }
    if bench {
        match executables(
            &[
                "build",
                "--release",
                "-p",
                "weft-benches",
                "--bin",
                "weft-bench",
                "--message-format=json",
            ],
            &kernels,
        ) {
            Ok(bins) => {
                for (name, exe) in &bins {
                    copy_stripped(exe, &pack.join("bin").join(name))?;
                    others += 1;
                }
                pack_bench_extras(&pack)?;
            }
            Err(e) if bench_only => return Err(e.context("weft-bench does not build")),
            Err(e) => eprintln!("device-pack: weft-bench does not build, left out: {e:#}"),
        }
    }
    if python {
        pack_python(&pack, &kernels)?;
    }
    write_pack_command(&pack, args)?;
    std::fs::write(pack.join("run.sh"), RUN_SH)?;
    set_executable(&pack.join("run.sh"))?;
    let total = dir_size(&pack)?;
    eprintln!(
        "device-pack: {} test binaries, {} other binaries, {:.1} MiB in {}",
        tests.len(),
        others,
        total as f64 / (1 << 20) as f64,
        pack.display()
    );
    if total > LIMIT {
        // The facade's test binaries embed every module's cubins (about 11 MiB each, gzipped):
        // a default pack is over the limit. It is still whole; it travels in parts.
        eprintln!(
            "device-pack: {total} bytes, over the 64 MiB one device run carries: carry it in \
             parts (e.g. copy part of tests/ to another device-pack-* folder, unpack each part \
             under /root in back-to-back runs, and run.sh there), or pack less (--crates a,b, \
             --no-python, --no-bench)"
        );
    }
    Ok(())
}

/// The Python package as an abi3 wheel built by maturin (release, the same kernels as the
/// binaries) and its pytest suite, into `python/`: run.sh installs the wheel into a folder of
/// its own (no network there; numpy and pytest are on the GPU machine) and runs the suite with
/// `WEFT_REQUIRE_GPU=1`, so that the GPU tests cannot pass by skipping.
fn pack_python(pack: &Path, kernels: &PackKernels) -> Result<()> {
    let wheels = pack.join("python");
    std::fs::create_dir_all(wheels.join("tests"))?;
    // The wheel `cargo xtask test` builds, with this pack's kernels.
    crate::test::build_wheel(&crate::test::test_python()?, &wheels, |cmd| {
        kernels.apply(cmd)
    })?;
    let tests = root().join("crates/weft-py/tests");
    for entry in std::fs::read_dir(&tests).with_context(|| format!("read {}", tests.display()))? {
        let path = entry?.path();
        if path.extension().is_some_and(|e| e == "py") {
            let name = path.file_name().context("test file name")?;
            std::fs::copy(&path, wheels.join("tests").join(name))
                .with_context(|| format!("copy {}", path.display()))?;
        }
    }
    Ok(())
}

/// Parses `--examples`: a comma-separated list of `crate:example`.
fn parse_examples(list: &str) -> Result<Vec<(String, String)>> {
    list.split(',')
        .map(|item| match item.split_once(':') {
            Some((krate, example)) if !krate.is_empty() && !example.is_empty() => {
                Ok((krate.to_owned(), example.to_owned()))
            }
            _ => bail!(
                "--examples: `{item}` is not crate:example (e.g. weft-benches:cagra_search_bench)"
            ),
        })
        .collect()
}

/// The folder of workspace crate `name`: `crates/<name>`, the example crate's or the benches'.
fn crate_dir(root: &Path, name: &str) -> PathBuf {
    match name {
        "weft-example-kernel" => root.join("examples/custom-kernel"),
        "weft-benches" => root.join("benches"),
        _ => root.join("crates").join(name),
    }
}

/// weft-gpu, the example crate with its own kernel module, every library crate under `crates/`
/// with a `cuda` feature (the facade `weft` among them: its tests branch on the GPU) and, with
/// `cli`, weft-cli (its tests run the packed `weft` binary through `WEFT_CLI_BIN`, and branch on
/// the GPU too).
fn gpu_crates(root: &Path, cli: bool) -> Result<Vec<String>> {
    let mut crates = vec!["weft-gpu".to_owned(), "weft-example-kernel".to_owned()];
    if cli {
        crates.push("weft-cli".to_owned());
    }
    let dir = root.join("crates");
    let mut entries: Vec<_> = std::fs::read_dir(&dir)
        .with_context(|| format!("read {}", dir.display()))?
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .collect();
    entries.sort();
    for path in entries {
        let Some(name) = path.file_name().and_then(|n| n.to_str()).map(str::to_owned) else {
            continue;
        };
        if matches!(name.as_str(), "weft-cli" | "weft-gpu") {
            continue;
        }
        if has_cuda_feature(&path)? {
            crates.push(name);
        }
    }
    Ok(crates)
}

/// Whether the crate at `dir` declares a `cuda` feature in its Cargo.toml.
fn has_cuda_feature(dir: &Path) -> Result<bool> {
    let manifest = dir.join("Cargo.toml");
    if !manifest.exists() {
        bail!("device-pack: no crate at {}", dir.display());
    }
    let text = std::fs::read_to_string(&manifest)
        .with_context(|| format!("read {}", manifest.display()))?;
    let mut in_features = false;
    for line in text.lines() {
        let line = line.trim();
        if line.starts_with('[') {
            in_features = line == "[features]";
        } else if in_features && line.split('=').next().map(str::trim) == Some("cuda") {
            return Ok(true);
        }
    }
    Ok(false)
}

/// Font files the harness plots can use (as benches/src/plots.rs looks for them).
const FONTS: &[&str] = &[
    "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/TTF/DejaVuSans.ttf",
    "/usr/share/fonts/truetype/liberation/LiberationSans-Regular.ttf",
    "/usr/share/fonts/truetype/noto/NotoSans-Regular.ttf",
    "/usr/share/fonts/truetype/freefont/FreeSans.ttf",
];

/// The scripts of the GPU peer (`run.sh --peers`), from benches/peers/.
const PEER_SCRIPTS: &[&str] = &["cuvs_peer.py", "ann_peers.py"];

/// The font for the plots (the device may have none), the commit for the records and the GPU
/// peer's scripts.
fn pack_bench_extras(pack: &Path) -> Result<()> {
    std::fs::create_dir_all(pack.join("peers"))?;
    for script in PEER_SCRIPTS {
        let src = root().join("benches/peers").join(script);
        std::fs::copy(&src, pack.join("peers").join(script))
            .with_context(|| format!("copy {}", src.display()))?;
    }
    let font = std::env::var_os("WEFT_BENCH_FONT")
        .map(PathBuf::from)
        .into_iter()
        .chain(FONTS.iter().map(PathBuf::from))
        .find(|p| p.exists());
    match font {
        Some(f) => {
            std::fs::create_dir_all(pack.join("fonts"))?;
            let name = f.file_name().context("font file name")?;
            std::fs::copy(&f, pack.join("fonts").join(name))?;
        }
        None => {
            eprintln!("device-pack: no TrueType font found; the device report will have no plots")
        }
    }
    let sha = Command::new("git")
        .args(["rev-parse", "HEAD"])
        .current_dir(root())
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_else(|| "unknown".into());
    let dirty = Command::new("git")
        .args(["status", "--porcelain", "--untracked-files=no"])
        .current_dir(root())
        .output()
        .map(|o| !o.stdout.is_empty())
        .unwrap_or(false);
    std::fs::write(
        pack.join("COMMIT"),
        if dirty { format!("{sha}-dirty") } else { sha },
    )?;
    Ok(())
}

/// Records how the pack was made (`PACK_CMD`), so run.sh can name the whole command in reports.
fn write_pack_command(pack: &Path, args: &[String]) -> Result<()> {
    let mut cmd = String::from("cargo xtask device-pack");
    for a in args {
        cmd.push(' ');
        cmd.push_str(a);
    }
    std::fs::write(pack.join("PACK_CMD"), cmd)?;
    Ok(())
}

/// How the pack's binaries get their kernels.
enum PackKernels {
    /// Cubins built by this nvcc (`NVCC`, with `WEFT_REQUIRE_CUBINS=1`: a module nvcc cannot
    /// build fails the pack instead of leaving it to NVRTC on the device).
    Cubins(PathBuf),
    /// No cubins: NVRTC compiles on the device (`WEFT_NVCC=off`, asked for).
    Nvrtc,
}

impl PackKernels {
    /// Cubins unless `WEFT_NVCC` is `off` or `0`; nvcc as `cargo xtask kernels` finds it
    /// (`$NVCC`, the toolchain in `target/cuda-toolchain`, `nvcc` on PATH), installing the
    /// PyPI toolchain when there is none. A pack built without nvcc once compiled every kernel
    /// module with NVRTC on the device's first use (35-49 s for gnnd, docs/benchmarks.md) while
    /// its report claimed embedded cubins.
    fn resolve(root: &Path) -> Result<PackKernels> {
        if std::env::var("WEFT_NVCC").is_ok_and(|v| v == "off" || v == "0") {
            eprintln!(
                "device-pack: WEFT_NVCC={}: no cubins, NVRTC compiles the kernels on the device",
                std::env::var("WEFT_NVCC").unwrap_or_default()
            );
            return Ok(PackKernels::Nvrtc);
        }
        if let Some(nvcc) = std::env::var_os("NVCC")
            .map(PathBuf::from)
            .filter(|p| p.is_file())
        {
            eprintln!("device-pack: cubins by {}", nvcc.display());
            return Ok(PackKernels::Cubins(nvcc));
        }
        let (nvcc, _) = crate::kernels::toolchain(root).context(
            "device-pack needs nvcc for the cubins (or WEFT_NVCC=off for an NVRTC pack)",
        )?;
        eprintln!("device-pack: cubins by {}", nvcc.display());
        Ok(PackKernels::Cubins(nvcc))
    }

    /// What run.sh reads from the pack's `KERNELS` file.
    fn name(&self) -> &'static str {
        match self {
            PackKernels::Cubins(_) => "cubin",
            PackKernels::Nvrtc => "nvrtc",
        }
    }

    /// The environment of the pack's cargo calls.
    fn apply(&self, cmd: &mut Command) {
        match self {
            PackKernels::Cubins(nvcc) => {
                cmd.env("NVCC", nvcc).env("WEFT_REQUIRE_CUBINS", "1");
            }
            PackKernels::Nvrtc => {
                cmd.env("WEFT_NVCC", "off")
                    .env_remove("WEFT_REQUIRE_CUBINS");
            }
        }
    }
}

/// Runs cargo with `args` (JSON messages) and returns (name, path) of the executables built.
fn executables(args: &[&str], kernels: &PackKernels) -> Result<Vec<(String, PathBuf)>> {
    let mut cmd = cargo();
    kernels.apply(&mut cmd);
    cmd.args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    eprintln!("$ {cmd:?}");
    let out = cmd.output().context("run cargo")?;
    if !out.status.success() {
        bail!("{cmd:?} failed with {}", out.status);
    }
    let mut v = Vec::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let Ok(msg) = serde_json::from_str::<serde_json::Value>(line) else {
            continue;
        };
        if msg["reason"] != "compiler-artifact" {
            continue;
        }
        let Some(exe) = msg["executable"].as_str() else {
            continue;
        };
        // `cargo test --no-run` also builds examples and binaries: keep test harnesses only.
        if args.contains(&"test") && msg["profile"]["test"] != true {
            continue;
        }
        let exe = PathBuf::from(exe);
        let kind = msg["target"]["kind"][0].as_str().unwrap_or("");
        let target = msg["target"]["name"].as_str().unwrap_or("bin");
        let pkg = msg["package_id"]
            .as_str()
            .and_then(|p| p.rsplit('/').next())
            .and_then(|p| p.split(['#', '@']).next())
            .unwrap_or("pkg")
            .to_string();
        let name = match kind {
            "lib" => format!("{pkg}-lib"),
            "bin" | "example" => target.to_string(),
            _ => format!("{pkg}-{target}"),
        };
        v.push((name, exe));
    }
    v.sort();
    v.dedup_by(|a, b| a.0 == b.0);
    Ok(v)
}

/// Copies `src` to `dst` without debug info (`strip --strip-debug` keeps symbols for sanitizer
/// backtraces); a plain copy where strip is missing.
fn copy_stripped(src: &Path, dst: &Path) -> Result<()> {
    let stripped = Command::new("strip")
        .arg("--strip-debug")
        .arg("-o")
        .arg(dst)
        .arg(src)
        .status()
        .map(|s| s.success())
        .unwrap_or(false);
    if !stripped {
        std::fs::copy(src, dst).with_context(|| format!("copy {}", src.display()))?;
    }
    // Every binary embeds all kernel modules (cubins for two architectures and PTX), which
    // compress about fivefold: gzip them, and run.sh unpacks them on the device.
    let zipped = Command::new("gzip")
        .args(["-6", "-n", "-f"])
        .arg(dst)
        .status()
        .map(|s| s.success())
        .unwrap_or(false);
    if !zipped {
        eprintln!(
            "device-pack: gzip failed or is missing; {} stays uncompressed",
            dst.display()
        );
    }
    Ok(())
}

fn set_executable(p: &Path) -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let mut perm = std::fs::metadata(p)?.permissions();
    perm.set_mode(0o755);
    std::fs::set_permissions(p, perm)?;
    Ok(())
}

fn dir_size(p: &Path) -> Result<u64> {
    let mut total = 0;
    for e in std::fs::read_dir(p)? {
        let e = e?;
        let m = e.metadata()?;
        total += if m.is_dir() {
            dir_size(&e.path())?
        } else {
            m.len()
        };
    }
    Ok(total)
}

const RUN_SH: &str = r#"#!/usr/bin/env bash
# device-pack/run.sh [--sanitize] [--bench] [--bench-suite quick|full [--tests] [--peers]] — run
# on the GPU machine from the repository root (or anywhere). Logs go to $OUT (the device tool's
# output folder) or device-pack/logs. --bench-suite runs the benchmark harness (bin/weft-bench) on
# the synthetic presets with the GPU back ends (BENCH_BACKEND=gpu,cpu for both) and writes JSON
# lines, report and plots to $OUT/bench (BENCH_ARGS: extra `weft-bench run` options, e.g.
# "--batch1 2000 --runs 3"); the tests then run only with --tests. --peers adds the GPU peer,
# cuVS NN-descent and CAGRA (peers/cuvs_peer.py, PEER_ARGS: its extra options), on the same
# prepared files, after weft: bench/peers.jsonl, in the same report; cuVS comes from
# $CUVS_SITE (default /root/cuvs-site, installed by `cargo xtask cuvs-wheels`' calls).
# RUN_NVRTC=0 skips the second pass of the tests with the kernels compiled by NVRTC.
set -u
HERE="$(cd "$(dirname "$0")" && pwd)"
# The binaries travel gzipped (cargo xtask device-pack): unpack them once.
for z in "$HERE"/tests/*.gz "$HERE"/bin/*.gz; do
  [ -f "$z" ] || continue
  gunzip -f "$z" && chmod +x "${z%.gz}" || { echo "cannot unpack $z"; exit 2; }
done
LOGS="${OUT:-$HERE/logs}"
mkdir -p "$LOGS"
SANITIZE=0; BENCH=0; BENCH_SUITE=""; TESTS=1; WANT_TESTS=0; PEERS=0
while [ $# -gt 0 ]; do
  case "$1" in
    --sanitize) SANITIZE=1 ;;
    --bench) BENCH=1 ;;
    --bench-suite) BENCH_SUITE="${2:-}"; shift ;;
    --tests) WANT_TESTS=1 ;;
    --peers) PEERS=1 ;;
    *) echo "unknown option $1"; exit 2 ;;
  esac
  shift
done
if [ -n "$BENCH_SUITE" ] && [ $WANT_TESTS -eq 0 ]; then TESTS=0; fi
export WEFT_REQUIRE_GPU=1
export WEFT_GPU_LOG=1
# The CLI tests run the packed `weft` binary.
[ -x "$HERE/bin/weft" ] && export WEFT_CLI_BIN="$HERE/bin/weft"
export WEFT_KERNEL_CACHE="$(mktemp -d)"
# NVRTC from the toolkit when the loader's path lacks it.
for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib; do
  [ -d "$d" ] && export LD_LIBRARY_PATH="${LD_LIBRARY_PATH:+$LD_LIBRARY_PATH:}$d"
done
SUMMARY="$LOGS/summary.txt"
: > "$SUMMARY"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm --format=csv >> "$SUMMARY" 2>&1
status=0
record() { echo "$1" | tee -a "$SUMMARY"; }
# A pack with cubins (KERNELS = cubin) runs its first pass and the benchmarks with
# WEFT_KERNELS=cubin: a kernel module without a cubin for this GPU is then an error, never a
# silent NVRTC compilation on first use. PACK_KERNELS=auto overrides.
PACK_KERNELS="${PACK_KERNELS:-$(cat "$HERE/KERNELS" 2>/dev/null || echo auto)}"
[ "$PACK_KERNELS" = nvrtc ] && PACK_KERNELS=auto
record "kernels: WEFT_KERNELS=$PACK_KERNELS ($(cat "$HERE/KERNELS" 2>/dev/null || echo unknown) pack), empty kernel cache $WEFT_KERNEL_CACHE"
for t in "$HERE"/tests/*; do
  [ $TESTS -eq 1 ] || break
  n="$(basename "$t")"
  start=$(date +%s.%N)
  WEFT_KERNELS=$PACK_KERNELS "$t" --test-threads=4 > "$LOGS/$n.log" 2>&1; rc=$?
  record "$n (WEFT_KERNELS=$PACK_KERNELS): rc=$rc $(grep -E '^test result' "$LOGS/$n.log" | tr '\n' ' ') $(echo "$(date +%s.%N) - $start" | bc 2>/dev/null)s"
  [ $rc -ne 0 ] && status=1
  [ "${RUN_NVRTC:-1}" = 0 ] && continue
  WEFT_KERNELS=nvrtc "$t" --test-threads=4 > "$LOGS/$n.nvrtc.log" 2>&1; rc=$?
  record "$n (WEFT_KERNELS=nvrtc): rc=$rc $(grep -E '^test result' "$LOGS/$n.nvrtc.log" | tr '\n' ' ')"
  [ $rc -ne 0 ] && status=1
done
# The Python package: its wheel installed into a folder of its own, its suite run on the GPU.
if [ $TESTS -eq 1 ] && ls "$HERE"/python/*.whl >/dev/null 2>&1; then
  PYSITE="$(mktemp -d)"
  python3 -m pip install -q --no-index --no-deps --no-compile --target "$PYSITE" "$HERE"/python/*.whl \
    > "$LOGS/python.log" 2>&1; rc=$?
  if [ $rc -eq 0 ]; then
    (cd "$HERE/python/tests" && WEFT_KERNELS=$PACK_KERNELS PYTHONPATH="$PYSITE" PYTHONUNBUFFERED=1 \
      python3 -m pytest . -q -rs -p no:cacheprovider ${PYTEST_ARGS:-}) >> "$LOGS/python.log" 2>&1; rc=$?
  fi
  record "python (WEFT_KERNELS=$PACK_KERNELS): rc=$rc $(grep -E '(passed|failed|error)' "$LOGS/python.log" | tail -1)"
  [ $rc -ne 0 ] && status=1
fi
if [ $BENCH -eq 1 ] && [ -x "$HERE/bin/exact_bench" ]; then
  "$HERE/bin/exact_bench" > "$LOGS/exact_bench.log" 2>&1; rc=$?
  record "exact_bench: rc=$rc"; tail -n 20 "$LOGS/exact_bench.log" | tee -a "$SUMMARY"
  [ $rc -ne 0 ] && status=1
fi
if [ $SANITIZE -eq 1 ]; then
  export WEFT_GPU_CASES="${WEFT_GPU_CASES:-2}" WEFT_GPU_SMALL=1
  for tool in memcheck racecheck; do
    for t in "$HERE"/tests/*; do
      n="$(basename "$t")"
      filter=""
      # racecheck is slow: the kernel-level tests only (every kernel and barrier path).
      [ $tool = racecheck ] && filter="${RACECHECK_FILTER:-exact_bytes exact_select_flushes_midway warp_ rng_ device_matrix}"
      timeout "${SANITIZE_TIMEOUT:-240}" compute-sanitizer --tool $tool --error-exitcode 99 "$t" --test-threads=1 $filter > "$LOGS/$n.$tool.log" 2>&1; rc=$?
      # A binary that never calls CUDA (CPU-only unit tests) is nothing to check.
      if [ $rc -ne 0 ] && grep -q "terminated before first instrumented API call" "$LOGS/$n.$tool.log" \
         && grep -q "^test result: ok" "$LOGS/$n.$tool.log"; then rc=0; echo "(no CUDA calls)" >> "$LOGS/$n.$tool.log"; fi
      record "$n ($tool): rc=$rc $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$LOGS/$n.$tool.log" | tail -1) $(grep -E '^test result' "$LOGS/$n.$tool.log" | tr '\n' ' ')"
      [ $rc -ne 0 ] && status=1
    done
  done
fi
if [ -n "$BENCH_SUITE" ]; then
  B="$LOGS/bench"; mkdir -p "$B"
  DATA="${BENCH_DATA_DIR:-$(mktemp -d)}"
  for f in "$HERE"/fonts/*.ttf; do [ -f "$f" ] && export WEFT_BENCH_FONT="$f"; done
  COMMIT="$(cat "$HERE/COMMIT" 2>/dev/null || echo unknown)"
  case "$BENCH_SUITE" in
    quick) SETS="sift:100000 deep:100000 glove:100000 clustered:100000" ;;
    full) SETS="sift:1000000 deep:1000000 gist:1000000 glove:1000000 clustered:1000000" ;;
    *) echo "unknown bench suite $BENCH_SUITE (quick, full)"; exit 2 ;;
  esac
  bstart=$(date +%s)
  DIRS=""
  for s in ${BENCH_SETS:-$SETS}; do
    p="${s%%:*}"; n="${s##*:}"
    if [ $((n % 1000000)) -eq 0 ]; then h="$((n / 1000000))m"; elif [ $((n % 1000)) -eq 0 ]; then h="$((n / 1000))k"; else h="$n"; fi
    # The benchmark-shaped presets are named <preset>-like-<n>; clustered imitates no real set.
    if [ "$p" = clustered ]; then name="$p-$h"; else name="$p-like-$h"; fi
    "$HERE/bin/weft-bench" prepare --out "$DATA/$name" --name "$name" --preset "$p" --n "$n" --nq 10000 >> "$B/log.txt" 2>&1 \
      || record "bench prepare $name failed"
    DIRS="$DIRS --data $DATA/$name"
  done
  rm -f "$B/weft.jsonl"
  WEFT_KERNELS=$PACK_KERNELS "$HERE/bin/weft-bench" run --suite "$BENCH_SUITE" --backend "${BENCH_BACKEND:-gpu}" --commit "$COMMIT" \
    --out "$B/weft.jsonl" $DIRS ${BENCH_ARGS:-} >> "$B/log.txt" 2>&1; rc=$?
  rm -f "$B/peers.jsonl"
  INPUTS="--in $B/weft.jsonl"
  if [ $PEERS -eq 1 ]; then
    SITE="${CUVS_SITE:-/root/cuvs-site}"
    [ -d "$SITE" ] || record "no cuVS in $SITE (cargo xtask cuvs-wheels prints the calls that install it)"
    PYTHONPATH="$SITE${PYTHONPATH:+:$PYTHONPATH}" python3 "$HERE/peers/cuvs_peer.py" --suite "$BENCH_SUITE" \
      --commit "$COMMIT" --out "$B/peers.jsonl" $DIRS ${PEER_ARGS:-} >> "$B/log.txt" 2>&1; prc=$?
    [ $prc -ne 0 ] && { record "cuvs peer: rc=$prc (see bench/log.txt)"; rc=1; }
    [ -s "$B/peers.jsonl" ] && INPUTS="$INPUTS --in $B/peers.jsonl"
  fi
  echo $(( $(date +%s) - bstart )) > "$B/wall_s.txt"
  CMD="$(cat "$HERE/PACK_CMD" 2>/dev/null || echo cargo xtask device-pack), then on the GPU machine:"
  [ -n "${BENCH_SETS:-}" ] && CMD="$CMD BENCH_SETS=\"$BENCH_SETS\""
  [ -n "${BENCH_BACKEND:-}" ] && CMD="$CMD BENCH_BACKEND=$BENCH_BACKEND"
  [ -n "${BENCH_ARGS:-}" ] && CMD="$CMD BENCH_ARGS=\"$BENCH_ARGS\""
  [ -n "${PEER_ARGS:-}" ] && CMD="$CMD PEER_ARGS=\"$PEER_ARGS\""
  CMD="$CMD bash $(basename "$HERE")/run.sh --bench-suite $BENCH_SUITE"
  [ $PEERS -eq 1 ] && CMD="$CMD --peers"
  echo "$CMD" > "$B/command.txt"
  "$HERE/bin/weft-bench" report $INPUTS --out "$B" --wall-s "$(cat "$B/wall_s.txt")" \
    --command "$CMD" >> "$B/log.txt" 2>&1 || rc=1
  # The device tool brings back a limited number of files: the plots travel as one tar.
  [ -d "$B/plots" ] && tar -cf "$B/plots.tar" -C "$B" plots && rm -rf "$B/plots"
  record "bench $BENCH_SUITE: rc=$rc, $(cat "$B/wall_s.txt") s, $(wc -l < "$B/weft.jsonl" 2>/dev/null || echo 0) records, $(cat "$B/peers.jsonl" 2>/dev/null | wc -l) peer records"
  tail -n 40 "$B/log.txt"
  [ $rc -ne 0 ] && status=1
fi
echo "overall status: $status" | tee -a "$SUMMARY"
exit $status
"#;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_sh_parses_and_reports_the_gpu_peer_beside_weft() {
        let check = Command::new("bash")
            .args(["-n", "-c", RUN_SH])
            .output()
            .expect("bash");
        assert!(
            check.status.success(),
            "{}",
            String::from_utf8_lossy(&check.stderr)
        );
        assert!(RUN_SH.contains("--peers) PEERS=1"));
        assert!(RUN_SH.contains("peers/cuvs_peer.py"));
        assert!(RUN_SH.contains(r#"INPUTS="$INPUTS --in $B/peers.jsonl""#));
        assert!(RUN_SH.contains("report $INPUTS"));
        // The scripts run.sh calls are packed.
        for s in PEER_SCRIPTS {
            assert!(root().join("benches/peers").join(s).exists(), "{s}");
        }
    }

    #[test]
    fn examples_option_takes_crate_example_pairs() {
        assert_eq!(
            parse_examples("weft-benches:cagra_search_bench,weft-benches:grnnd_bench").unwrap(),
            vec![
                ("weft-benches".to_owned(), "cagra_search_bench".to_owned()),
                ("weft-benches".to_owned(), "grnnd_bench".to_owned()),
            ]
        );
        for bad in ["cagra_search_bench", "weft-search:", ":x", ""] {
            assert!(parse_examples(bad).is_err(), "{bad}");
        }
    }
}
