//! `cargo xtask tidy`: the workspace's structural rules, checked from `cargo metadata` and the
//! sources (run by `.ci/run`):
//!
//! 1. **Only weft-gpu names cudarc**: no other package depends on it, and no Rust file outside
//!    `crates/weft-gpu/` mentions it.
//! 2. **Dependencies point one way**: every package has a layer ([`LAYERS`]); a normal or build
//!    dependency on a workspace package must go to a lower layer, or to the same layer when
//!    [`SAME_LAYER`] lists the pair. Dev-dependencies may point anywhere (tests of a lower layer
//!    may use a higher one, as the algorithm crates' tests use weft-search), but no cycle may run
//!    through normal dependencies, which the layers rule out.
//! 3. **No unused dependencies**: every dependency of a package is named in its sources (the
//!    files a dependency kind serves: `src/` for normal ones, `build.rs` for build ones, `src/`,
//!    `tests/`, `examples/` and `benches/` for dev ones), as `name::` or `use name` or
//!    `extern crate name` (with `-` as `_`), unless [`USED_WITHOUT_NAMING`] lists it with the
//!    reason.
//!
//! A new workspace package must be given a layer here; the task fails on one it does not know.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};
use serde_json::Value;

use crate::util::root;

/// Each workspace package's layer: a package may depend (normally or at build time) only on
/// packages of lower layers.
const LAYERS: &[(&str, u32)] = &[
    ("weft-kernel-build", 0),
    ("weft-core", 1),
    ("weft-io", 2),
    ("weft-graph", 2),
    ("weft-gpu", 3),
    ("weft-testkit", 3),
    ("weft-nndescent", 4),
    ("weft-rnndescent", 4),
    ("weft-cagra", 4),
    ("weft-ggnn", 4),
    ("weft-example-kernel", 4),
    ("weft-grnnd", 5),
    ("weft-search", 6),
    ("weft", 7),
    ("weft-cli", 8),
    ("weft-py", 8),
    ("weft-benches", 9),
    ("xtask", 9),
];

/// Same-layer dependencies that are allowed: (dependent, dependency).
const SAME_LAYER: &[(&str, &str)] = &[];

/// Dependencies a package uses without naming them in Rust: (package, dependency, why).
const USED_WITHOUT_NAMING: &[(&str, &str, &str)] = &[];

/// Runs the task.
pub fn run(args: &[String]) -> Result<()> {
    if let Some(a) = args.first() {
        bail!("tidy: unknown option `{a}` (it takes none)");
    }
    let root = root();
    let out = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
        .args([
            "metadata",
            "--format-version",
            "1",
            "--no-deps",
            "--offline",
        ])
        .current_dir(&root)
        .output()
        .context("run cargo metadata")?;
    if !out.status.success() {
        bail!(
            "cargo metadata failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let meta: Value = serde_json::from_slice(&out.stdout).context("parse cargo metadata")?;
    let packages = meta["packages"]
        .as_array()
        .context("cargo metadata has no packages")?;
    let mut problems = Vec::new();
    for pkg in packages {
        check_package(pkg, &root, &mut problems)?;
    }
    problems.extend(cudarc_mentions(&root)?);
    if !problems.is_empty() {
        for p in &problems {
            eprintln!("tidy: {p}");
        }
        bail!("{} tidy problem(s)", problems.len());
    }
    println!(
        "tidy: {} packages: only weft-gpu names cudarc, dependencies point one way, none unused",
        packages.len()
    );
    Ok(())
}

/// The layer of workspace package `name` ([`LAYERS`]).
pub fn layer(name: &str) -> Option<u32> {
    LAYERS.iter().find(|(n, _)| *n == name).map(|(_, l)| *l)
}

fn check_package(pkg: &Value, root: &Path, problems: &mut Vec<String>) -> Result<()> {
    let name = pkg["name"].as_str().context("package without a name")?;
    let manifest = PathBuf::from(pkg["manifest_path"].as_str().context("no manifest path")?);
    let dir = manifest.parent().context("manifest without a folder")?;
    let Some(own) = layer(name) else {
        problems.push(format!(
            "package `{name}` has no layer in xtask/src/tidy.rs (LAYERS)"
        ));
        return Ok(());
    };
    let deps = pkg["dependencies"].as_array().cloned().unwrap_or_default();
    for dep in &deps {
        let dep_name = dep["name"].as_str().unwrap_or_default();
        // The name the code uses: a rename, else the package name.
        let code_name = dep["rename"].as_str().unwrap_or(dep_name).replace('-', "_");
        let kind = dep["kind"].as_str().unwrap_or("normal");
        if dep_name == "cudarc" && name != "weft-gpu" {
            problems.push(format!(
                "`{name}` depends on cudarc; only weft-gpu may name it"
            ));
        }
        if kind != "dev"
            && let Some(dep_layer) = layer(dep_name)
        {
            let same_ok = SAME_LAYER.contains(&(name, dep_name));
            if dep_layer > own || (dep_layer == own && !same_ok) {
                problems.push(format!(
                    "`{name}` (layer {own}) depends on `{dep_name}` (layer {dep_layer}): \
                     dependencies must point to lower layers"
                ));
            }
        }
        if USED_WITHOUT_NAMING
            .iter()
            .any(|(p, d, _)| *p == name && *d == dep_name)
        {
            continue;
        }
        let places: &[&str] = match kind {
            "build" => &["build.rs"],
            "dev" => &["src", "tests", "examples", "benches"],
            _ => &["src"],
        };
        if !names_crate(dir, places, &code_name)? {
            let shown = dir.strip_prefix(root).unwrap_or(dir).display().to_string();
            problems.push(format!(
                "`{name}` ({shown}) never names its {kind} dependency `{dep_name}` \
                 (as `{code_name}::`, `use {code_name}` or `extern crate {code_name}`)"
            ));
        }
    }
    Ok(())
}

/// Whether a Rust file under `dir`'s `places` names crate `code_name`.
fn names_crate(dir: &Path, places: &[&str], code_name: &str) -> Result<bool> {
    let needles = [
        format!("{code_name}::"),
        format!("use {code_name}"),
        format!("extern crate {code_name}"),
    ];
    let mut found = false;
    for place in places {
        visit_rust(&dir.join(place), &mut |text| {
            if !found {
                found = text
                    .lines()
                    .map(strip_line_comment)
                    .any(|l| needles.iter().any(|n| contains_word_start(l, n)));
            }
        })?;
        if found {
            return Ok(true);
        }
    }
    Ok(false)
}

/// The line without a `//` comment (not inside a string; good enough for naming checks).
fn strip_line_comment(line: &str) -> &str {
    match line.find("//") {
        Some(i) if !line[..i].contains('"') => &line[..i],
        _ => line,
    }
}

/// Whether `needle` occurs in `hay` at the start of an identifier (not as the end of a longer
/// one: `my_serde::` does not name `serde`).
fn contains_word_start(hay: &str, needle: &str) -> bool {
    hay.match_indices(needle).any(|(i, _)| {
        hay[..i]
            .chars()
            .next_back()
            .is_none_or(|c| !(c.is_alphanumeric() || c == '_'))
    })
}

/// Calls `f` with the text of every `.rs` file at or under `path`.
fn visit_rust(path: &Path, f: &mut dyn FnMut(&str)) -> Result<()> {
    if path.is_file() {
        if path.extension().is_some_and(|e| e == "rs") {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("read {}", path.display()))?;
            f(&text);
        }
        return Ok(());
    }
    let Ok(dir) = std::fs::read_dir(path) else {
        return Ok(());
    };
    let mut entries: Vec<PathBuf> = dir.flatten().map(|e| e.path()).collect();
    entries.sort();
    for p in entries {
        visit_rust(&p, f)?;
    }
    Ok(())
}

/// Rust files outside `crates/weft-gpu/` that name cudarc (code, not comments).
fn cudarc_mentions(root: &Path) -> Result<Vec<String>> {
    let mut found = Vec::new();
    for top in ["crates", "benches", "xtask", "fuzz"] {
        let base = root.join(top);
        let Ok(dir) = std::fs::read_dir(&base) else {
            continue;
        };
        let mut paths: Vec<PathBuf> = dir.flatten().map(|e| e.path()).collect();
        paths.sort();
        for p in paths {
            if p.ends_with("weft-gpu") || p.ends_with("target") {
                continue;
            }
            if names_crate(&p, &["."], "cudarc")? {
                found.push(format!(
                    "{} names cudarc; only crates/weft-gpu may",
                    p.strip_prefix(root).unwrap_or(&p).display()
                ));
            }
        }
    }
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn word_starts_and_comments() {
        assert!(contains_word_start("use serde::Deserialize;", "serde::"));
        assert!(!contains_word_start("my_serde::x()", "serde::"));
        assert!(contains_word_start("(serde::x)", "serde::"));
        assert_eq!(strip_line_comment("a // cudarc"), "a ");
        assert_eq!(strip_line_comment("\"http://x\""), "\"http://x\"");
    }

    #[test]
    fn every_layer_is_unique_and_known() {
        for (i, (a, _)) in LAYERS.iter().enumerate() {
            assert!(LAYERS[i + 1..].iter().all(|(b, _)| a != b), "{a} twice");
        }
        assert_eq!(layer("weft-gpu"), Some(3));
        assert_eq!(layer("nope"), None);
    }
}
