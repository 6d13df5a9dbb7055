//! `cargo xtask device-pack [--workspace] [--no-cli]`: gathers stripped release test binaries,
//! example/bench binaries and the CLI, with a run script, into `device-pack/` (ignored by git,
//! under the 64 MiB a device run may carry).
//!
//! - test binaries: the weft-gpu tests (`--workspace`: every workspace test binary);
//! - examples of weft-gpu (the exact-kNN benchmark) and, unless `--no-cli`, the `weft` binary
//!   of weft-cli when it builds;
//! - `run.sh`: runs every test binary with `WEFT_REQUIRE_GPU=1` (once with the build-time
//!   cubins, once with `WEFT_KERNELS=nvrtc`), and with `--sanitize` also under
//!   `compute-sanitizer --tool memcheck` and `--tool racecheck`; logs go to `$OUT` (or
//!   `device-pack/logs`).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{Context, Result, bail};

use crate::util::{cargo, root};

const LIMIT: u64 = 64 << 20;

/// Runs the task.
pub fn run(args: &[String]) -> Result<()> {
    let mut workspace = false;
    let mut cli = true;
    for a in args {
        match a.as_str() {
            "--workspace" => workspace = true,
            "--no-cli" => cli = false,
            other => bail!("device-pack: unknown option `{other}` (use --workspace, --no-cli)"),
        }
    }
    let root = root();
    let pack = root.join("device-pack");
    if pack.exists() {
        std::fs::remove_dir_all(&pack).with_context(|| format!("remove {}", pack.display()))?;
    }
    for d in ["tests", "bin"] {
        std::fs::create_dir_all(pack.join(d))?;
    }

    let mut test_args = vec!["test", "--release", "--no-run", "--message-format=json"];
    if workspace {
        test_args.push("--workspace");
    } else {
        test_args.extend(["-p", "weft-gpu"]);
    }
    let tests = executables(&test_args)?;
    for (name, exe) in &tests {
        copy_stripped(exe, &pack.join("tests").join(name))?;
    }
    let mut others = 0usize;
    let examples = executables(&[
        "build",
        "--release",
        "-p",
        "weft-gpu",
        "--examples",
        "--message-format=json",
    ])?;
    for (name, exe) in &examples {
        copy_stripped(exe, &pack.join("bin").join(name))?;
        others += 1;
    }
    if cli {
        match executables(&[
            "build",
            "--release",
            "-p",
            "weft-cli",
            "--bin",
            "weft",
            "--message-format=json",
        ]) {
            Ok(bins) => {
                for (name, exe) in &bins {
                    copy_stripped(exe, &pack.join("bin").join(name))?;
                    others += 1;
                }
            }
            Err(e) => eprintln!("device-pack: weft-cli does not build yet, left out: {e:#}"),
        }
    }
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
        bail!(
            "device-pack is {total} bytes, over the 64 MiB a device run carries; drop --workspace"
        );
    }
    Ok(())
}

/// Runs cargo with `args` (JSON messages) and returns (name, path) of the executables built.
fn executables(args: &[&str]) -> Result<Vec<(String, PathBuf)>> {
    let mut cmd = cargo();
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
# device-pack/run.sh [--sanitize] [--bench] — run on the GPU machine from the repository root
# (or anywhere). Logs go to $OUT (the device tool's output folder) or device-pack/logs.
set -u
HERE="$(cd "$(dirname "$0")" && pwd)"
LOGS="${OUT:-$HERE/logs}"
mkdir -p "$LOGS"
SANITIZE=0; BENCH=0
for a in "$@"; do
  case "$a" in
    --sanitize) SANITIZE=1 ;;
    --bench) BENCH=1 ;;
    *) echo "unknown option $a"; exit 2 ;;
  esac
done
export WEFT_REQUIRE_GPU=1
export WEFT_GPU_LOG=1
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
for t in "$HERE"/tests/*; do
  n="$(basename "$t")"
  start=$(date +%s.%N)
  "$t" --test-threads=4 > "$LOGS/$n.log" 2>&1; rc=$?
  record "$n (cubin/auto): rc=$rc $(grep -E '^test result' "$LOGS/$n.log" | tr '\n' ' ') $(echo "$(date +%s.%N) - $start" | bc 2>/dev/null)s"
  [ $rc -ne 0 ] && status=1
  WEFT_KERNELS=nvrtc "$t" --test-threads=4 > "$LOGS/$n.nvrtc.log" 2>&1; rc=$?
  record "$n (WEFT_KERNELS=nvrtc): rc=$rc $(grep -E '^test result' "$LOGS/$n.nvrtc.log" | tr '\n' ' ')"
  [ $rc -ne 0 ] && status=1
done
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
echo "overall status: $status" | tee -a "$SUMMARY"
exit $status
"#;
