//! `cargo xtask cuvs-wheels [--python 3.12] [--part-mib 50]`: brings cuVS to the GPU machine,
//! which has no network, for the harness's GPU peer (`run.sh --bench-suite quick --peers`).
//!
//! Downloads the pinned cuVS wheels ([`WHEELS`], about 300 MiB, for the device's Python) into
//! `target/cuvs-wheels/py<version>/`, packs them in one tar and splits it into equal parts of at
//! most `--part-mib` MiB, one folder each: `device-pack-wheels-01/`, `-02/`, ... (ignored by
//! git), each with its part, `MANIFEST` (parts, bytes, sha256 of the whole tar) and
//! `cuvs-install.sh`. A device call carries one folder (a call carries at most 64 MiB with the
//! working tree) and runs `bash device-pack-wheels-NN/cuvs-install.sh`, which keeps the part in
//! `/root/cuvs-parts/<sha256>/`; back-to-back calls (the machine stays warm between them) bring
//! the rest, and the call that completes the set joins the parts, checks the sha256 and
//! installs the wheels with `pip install --no-index --no-deps --target /root/cuvs-site`.
//! `cuvs-install.sh --smoke` then builds and searches a tiny NN-descent and CAGRA index. The
//! task prints the calls, in order.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};

use crate::util::{root, run as sh};

/// The wheels cuVS needs beyond what the device's Python holds (numpy, cupy, cuda-bindings,
/// cuda-pathfinder and the CUDA 13 libraries are there), pinned.
pub const WHEELS: &[&str] = &[
    "cuvs-cu13==26.10.0",
    "libcuvs-cu13==26.10.0",
    "libraft-cu13==26.10.0",
    "librmm-cu13==26.10.0",
    "rmm-cu13==26.10.0",
    "pylibraft-cu13==26.10.0",
    "libkvikio-cu13==26.10.0",
    "rapids-logger==0.3.0",
    "nvidia-nvjitlink==13.3.33",
];

/// The platform tags pip may match for the device (x86-64, glibc 2.28 or newer).
const PLATFORMS: &[&str] = &[
    "manylinux_2_28_x86_64",
    "manylinux_2_27_x86_64",
    "manylinux_2_24_x86_64",
    "manylinux_2_17_x86_64",
    "manylinux2014_x86_64",
];

/// The device's Python (KINDS.md: python3 is 3.12 there).
const DEVICE_PYTHON: &str = "3.12";

/// Default part size: what one call carries (64 MiB) less the working tree and a margin.
const DEFAULT_PART_MIB: u64 = 50;

/// The name of the part folders (`device-pack-wheels-01`, ...), ignored by `/device-pack-*/`.
const PART_DIR_PREFIX: &str = "device-pack-wheels-";

/// Options of one invocation.
#[derive(Debug, PartialEq)]
struct Opts {
    python: String,
    part_bytes: u64,
}

fn parse(args: &[String]) -> Result<Opts> {
    let mut o = Opts {
        python: DEVICE_PYTHON.into(),
        part_bytes: DEFAULT_PART_MIB << 20,
    };
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--python" => o.python = it.next().context("--python needs X.Y")?.clone(),
            "--part-mib" => {
                let mib: u64 = it
                    .next()
                    .context("--part-mib needs a number")?
                    .parse()
                    .context("--part-mib")?;
                if !(1..=60).contains(&mib) {
                    bail!("--part-mib must be 1 to 60 (a device call carries 64 MiB in all)");
                }
                o.part_bytes = mib << 20;
            }
            other => {
                bail!("cuvs-wheels: unknown option `{other}` (use --python X.Y, --part-mib N)")
            }
        }
    }
    let ok = o.python.split('.').count() == 2
        && o.python
            .split('.')
            .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()));
    if !ok {
        bail!("--python takes a version X.Y, not `{}`", o.python);
    }
    Ok(o)
}

/// The `pip download` arguments for `python` (X.Y) into `dest`.
fn pip_download_args(python: &str, dest: &Path) -> Vec<String> {
    let mut a: Vec<String> = [
        "-m",
        "pip",
        "download",
        "--no-deps",
        "--only-binary=:all:",
        "--implementation",
        "cp",
        "--python-version",
        python,
    ]
    .map(String::from)
    .to_vec();
    for p in PLATFORMS {
        a.extend(["--platform".into(), (*p).into()]);
    }
    a.extend(["-d".into(), dest.display().to_string()]);
    a.extend(WHEELS.iter().map(|w| (*w).to_string()));
    a
}

/// Splits `total` bytes into the fewest parts of at most `limit` bytes, of equal size (the last
/// one shorter): (offset, length) of each.
fn split_plan(total: u64, limit: u64) -> Vec<(u64, u64)> {
    assert!(limit > 0, "part limit must be positive");
    if total == 0 {
        return Vec::new();
    }
    let parts = total.div_ceil(limit);
    let size = total.div_ceil(parts);
    (0..parts)
        .map(|i| {
            let off = i * size;
            (off, size.min(total - off))
        })
        .collect()
}

/// The folder of part `index` (0-based): `device-pack-wheels-01`, ...
fn part_dir(index: usize) -> String {
    format!("{PART_DIR_PREFIX}{:02}", index + 1)
}

/// The `MANIFEST` every part folder holds (shell variables, sourced by cuvs-install.sh).
fn manifest(parts: usize, bytes: u64, sha256: &str) -> String {
    format!("parts={parts}\nbytes={bytes}\nsha256={sha256}\n")
}

/// The device calls, in order: (carry, command) of each.
fn calls(parts: usize) -> Vec<(String, String)> {
    (0..parts)
        .map(|i| {
            let dir = part_dir(i);
            let smoke = if i + 1 == parts { " --smoke" } else { "" };
            (dir.clone(), format!("bash {dir}/cuvs-install.sh{smoke}"))
        })
        .collect()
}

/// Runs the task.
pub fn run(args: &[String]) -> Result<()> {
    let o = parse(args)?;
    let root = root();
    let dl = root
        .join("target/cuvs-wheels")
        .join(format!("py{}", o.python));
    std::fs::create_dir_all(&dl)?;
    sh(Command::new("python3").args(pip_download_args(&o.python, &dl)))
        .context("pip download of the cuVS wheels failed")?;
    let mut wheels: Vec<PathBuf> = std::fs::read_dir(&dl)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "whl"))
        .collect();
    wheels.sort();
    if wheels.len() != WHEELS.len() {
        bail!(
            "{} holds {} wheels, expected {} (one per pin): remove stale ones",
            dl.display(),
            wheels.len(),
            WHEELS.len()
        );
    }
    let tar = dl.join("cuvs-wheels.tar");
    let mut cmd = Command::new("tar");
    cmd.arg("-cf").arg(&tar).arg("-C").arg(&dl);
    for w in &wheels {
        cmd.arg(w.file_name().context("wheel name")?);
    }
    sh(&mut cmd)?;
    let bytes = std::fs::read(&tar).with_context(|| format!("read {}", tar.display()))?;
    let sha = sha256_of(&tar)?;
    for e in std::fs::read_dir(&root)?.flatten() {
        if e.file_name().to_string_lossy().starts_with(PART_DIR_PREFIX) {
            std::fs::remove_dir_all(e.path())?;
        }
    }
    let plan = split_plan(bytes.len() as u64, o.part_bytes);
    for (i, &(off, len)) in plan.iter().enumerate() {
        let dir = root.join(part_dir(i));
        std::fs::create_dir_all(&dir)?;
        let (a, b) = (off as usize, (off + len) as usize);
        std::fs::write(
            dir.join(format!("cuvs-wheels.tar.{:02}", i + 1)),
            &bytes[a..b],
        )?;
        std::fs::write(
            dir.join("MANIFEST"),
            manifest(plan.len(), bytes.len() as u64, &sha),
        )?;
        std::fs::write(dir.join("cuvs-install.sh"), INSTALL_SH)?;
    }
    eprintln!(
        "cuvs-wheels: {} wheels, {:.1} MiB, in {} parts of at most {:.1} MiB (sha256 {sha})",
        wheels.len(),
        bytes.len() as f64 / (1u64 << 20) as f64,
        plan.len(),
        o.part_bytes as f64 / (1u64 << 20) as f64
    );
    println!("Device calls, back to back (each within ~25 s of the last, so /root is kept):");
    for (n, (carry, command)) in calls(plan.len()).iter().enumerate() {
        println!("  {}. run carry=[\"{carry}\"] command=\"{command}\"", n + 1);
    }
    println!(
        "Then: PYTHONPATH=/root/cuvs-site, and `bash device-pack/run.sh --bench-suite quick --peers`."
    );
    Ok(())
}

/// The sha256 of a file, by `sha256sum`.
fn sha256_of(path: &Path) -> Result<String> {
    let out = Command::new("sha256sum")
        .arg(path)
        .output()
        .context("run sha256sum")?;
    if !out.status.success() {
        bail!("sha256sum {} failed", path.display());
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let sum = text.split_whitespace().next().unwrap_or("");
    if sum.len() != 64 {
        bail!("sha256sum printed `{text}`");
    }
    Ok(sum.to_string())
}

/// Run on the GPU machine from the folder of one part (see the module docs).
const INSTALL_SH: &str = r#"#!/usr/bin/env bash
# cuvs-install.sh [--smoke]: on the GPU machine (cargo xtask cuvs-wheels). Keeps this folder's
# part of the cuVS wheels tar in $CUVS_PARTS/<sha256> (default /root/cuvs-parts); once every
# part is there, joins them, checks the sha256 and installs the wheels into $CUVS_SITE (default
# /root/cuvs-site; use it with PYTHONPATH). --smoke then builds and searches a tiny NN-descent
# and CAGRA index (exit 3 while parts are missing). The tar is joined and unpacked in $CUVS_WORK
# (default /root).
set -eu
HERE="$(cd "$(dirname "$0")" && pwd)"
. "$HERE/MANIFEST"
PARTS="${CUVS_PARTS:-/root/cuvs-parts}/$sha256"
SITE="${CUVS_SITE:-/root/cuvs-site}"
WORK="${CUVS_WORK:-/root}"
SMOKE=0; [ "${1:-}" = --smoke ] && SMOKE=1
mkdir -p "$PARTS"
cp "$HERE"/cuvs-wheels.tar.* "$PARTS"/
if [ -f "$SITE/.installed-$sha256" ]; then
  echo "cuvs-install: installed already in $SITE"
else
  have=$(ls "$PARTS" | wc -l)
  if [ "$have" -lt "$parts" ]; then
    echo "cuvs-install: $have of $parts parts kept in $PARTS ($(du -sh "$PARTS" | cut -f1))"
    [ $SMOKE -eq 1 ] && exit 3
    exit 0
  fi
  TAR="$WORK/cuvs-wheels.tar"
  cat "$PARTS"/cuvs-wheels.tar.* > "$TAR"
  [ "$(stat -c %s "$TAR")" = "$bytes" ] || { echo "cuvs-install: joined tar has the wrong size"; rm -f "$TAR"; exit 2; }
  echo "$sha256  $TAR" | sha256sum -c --quiet - 2>/dev/null || { echo "cuvs-install: sha256 mismatch"; rm -f "$TAR"; exit 2; }
  W="$WORK/cuvs-wheels"; rm -rf "$W"; mkdir -p "$W"; tar -xf "$TAR" -C "$W"; rm -f "$TAR"
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target "$SITE" "$W"/*.whl
  # The wheels' libraries find the CUDA libraries and NCCL through RPATHs relative to the
  # install folder; link in those of the device's Python where the wheels brought none.
  SP="$(python3 -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
  for d in cu13/lib nccl/lib; do
    mkdir -p "$SITE/nvidia/$d"
    for f in "$SP/nvidia/$d"/*; do
      [ -e "$f" ] && [ ! -e "$SITE/nvidia/$d/$(basename "$f")" ] && ln -s "$f" "$SITE/nvidia/$d/"
    done
  done
  touch "$SITE/.installed-$sha256"
  echo "cuvs-install: installed $(ls "$W" | wc -l) wheels into $SITE"
fi
if [ $SMOKE -eq 1 ]; then
  PYTHONPATH="$SITE${PYTHONPATH:+:$PYTHONPATH}" python3 - <<'EOF'
import time
import cupy as cp
import cuvs
from cuvs.neighbors import cagra, nn_descent

print("cuvs", cuvs.__version__, "device", cp.cuda.runtime.getDeviceProperties(0)["name"])
x = cp.random.default_rng(1).standard_normal((20000, 64), dtype=cp.float32)
q = x[:1000] + 0.01
t = time.perf_counter()
g = nn_descent.build(nn_descent.IndexParams(graph_degree=64), x).graph
print(f"nn_descent graph {g.shape} in {time.perf_counter() - t:.2f} s")
t = time.perf_counter()
index = cagra.build(cagra.IndexParams(graph_degree=64, intermediate_graph_degree=128,
                                      build_algo="nn_descent"), x)
print(f"cagra build in {time.perf_counter() - t:.2f} s")
_, ids = cagra.search(cagra.SearchParams(itopk_size=64), index, q, 10)
ids = cp.asarray(ids)
d = (q * q).sum(1)[:, None] - 2 * q @ x.T + (x * x).sum(1)[None, :]
truth = cp.argsort(d, axis=1)[:, :10]
hits = (truth[:, :, None] == ids[:, None, :]).any(2).sum()
print(f"cagra recall@10 {float(hits) / truth.size:.4f}")
EOF
fi
"#;

#[cfg(test)]
mod tests {
    use super::*;

    fn args(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| (*s).to_string()).collect()
    }

    #[test]
    fn options_default_to_the_device_python_and_50_mib_parts() {
        let o = parse(&[]).unwrap();
        assert_eq!(o.python, "3.12");
        assert_eq!(o.part_bytes, 50 << 20);
        let o = parse(&args(&["--python", "3.11", "--part-mib", "40"])).unwrap();
        assert_eq!((o.python.as_str(), o.part_bytes), ("3.11", 40 << 20));
    }

    #[test]
    fn bad_options_are_refused() {
        for bad in [
            &["--part-mib", "0"][..],
            &["--part-mib", "61"],
            &["--part-mib", "x"],
            &["--python", "3"],
            &["--python", "3.x"],
            &["--python"],
            &["--frobnicate"],
        ] {
            assert!(parse(&args(bad)).is_err(), "{bad:?} accepted");
        }
    }

    #[test]
    fn the_split_covers_the_tar_in_the_fewest_equal_parts_under_the_limit() {
        for (total, limit) in [
            (314_000_000u64, 50u64 << 20),
            (1, 10),
            (10, 10),
            (11, 10),
            (100, 7),
            (52_428_800 * 6, 52_428_800),
        ] {
            let plan = split_plan(total, limit);
            assert_eq!(
                plan.len() as u64,
                total.div_ceil(limit),
                "{total} / {limit}"
            );
            let mut next = 0;
            for &(off, len) in &plan {
                assert_eq!(off, next, "parts are contiguous");
                assert!(len > 0 && len <= limit);
                next = off + len;
            }
            assert_eq!(next, total, "parts cover the tar");
            let first = plan[0].1;
            assert!(
                plan.iter()
                    .all(|p| p.1 <= first && first - p.1 < plan.len() as u64)
            );
        }
        assert!(split_plan(0, 10).is_empty());
        assert_eq!(split_plan(314_000_000, 50 << 20).len(), 6);
    }

    #[test]
    fn calls_carry_one_part_each_and_the_last_runs_the_smoke_test() {
        let c = calls(3);
        assert_eq!(c.len(), 3);
        assert_eq!(c[0].0, "device-pack-wheels-01");
        assert_eq!(c[0].1, "bash device-pack-wheels-01/cuvs-install.sh");
        assert_eq!(c[2].1, "bash device-pack-wheels-03/cuvs-install.sh --smoke");
        // The part folders are ignored by git, so they never travel unless carried.
        let ignore = std::fs::read_to_string(root().join(".gitignore")).unwrap();
        assert!(ignore.lines().any(|l| l == "/device-pack-*/"));
    }

    #[test]
    fn manifest_is_what_the_install_script_sources() {
        let m = manifest(6, 314, "ab12");
        assert_eq!(m, "parts=6\nbytes=314\nsha256=ab12\n");
        for var in ["$parts", "$bytes", "$sha256"] {
            assert!(INSTALL_SH.contains(var), "install script ignores {var}");
        }
    }

    /// A part folder of a two-part set under `dir`: (folder, joined bytes).
    fn fake_part(dir: &Path, index: usize, sha: &str) -> PathBuf {
        let part = dir.join(part_dir(index));
        std::fs::create_dir_all(&part).unwrap();
        std::fs::write(
            part.join(format!("cuvs-wheels.tar.{:02}", index + 1)),
            b"abc",
        )
        .unwrap();
        std::fs::write(part.join("MANIFEST"), manifest(2, 6, sha)).unwrap();
        std::fs::write(part.join("cuvs-install.sh"), INSTALL_SH).unwrap();
        part
    }

    fn install(dir: &Path, part: &Path, smoke: bool) -> std::process::Output {
        let mut cmd = Command::new("bash");
        cmd.arg(part.join("cuvs-install.sh"))
            .env("CUVS_PARTS", dir.join("parts"))
            .env("CUVS_SITE", dir.join("site"))
            .env("CUVS_WORK", dir);
        if smoke {
            cmd.arg("--smoke");
        }
        cmd.output().expect("bash")
    }

    #[test]
    fn the_install_script_keeps_parts_until_the_set_is_complete_and_checks_it() {
        let dir = std::env::temp_dir().join(format!("cuvs-install-test-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let sha = "0".repeat(64);
        let first = fake_part(&dir, 0, &sha);
        let out = install(&dir, &first, false);
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success() && text.contains("1 of 2 parts kept"),
            "{text}"
        );
        assert_eq!(
            install(&dir, &first, true).status.code(),
            Some(3),
            "smoke waits"
        );
        assert!(
            dir.join("parts")
                .join(&sha)
                .join("cuvs-wheels.tar.01")
                .exists()
        );
        // The second part completes the set: joined (6 bytes), but the sha256 is wrong.
        let second = fake_part(&dir, 1, &sha);
        let out = install(&dir, &second, false);
        let text = String::from_utf8_lossy(&out.stdout);
        assert_eq!(out.status.code(), Some(2), "{text}");
        assert!(text.contains("sha256 mismatch"), "{text}");
        assert!(!dir.join("site").join(format!(".installed-{sha}")).exists());
        assert!(
            !dir.join("cuvs-wheels.tar").exists(),
            "a bad tar is removed"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn pip_downloads_every_pin_for_the_device_python() {
        let a = pip_download_args("3.12", Path::new("/tmp/w"));
        let s = a.join(" ");
        assert!(s.contains("--python-version 3.12"));
        assert!(s.contains("--no-deps") && s.contains("--only-binary=:all:"));
        assert!(s.contains("-d /tmp/w"));
        for w in WHEELS {
            assert!(a.contains(&(*w).to_string()), "{w} missing");
        }
    }
}
