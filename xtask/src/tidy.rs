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
//! 4. **The README's crate table matches the workspace**: every package in `crates/` or
//!    `kernels/` is named in the first column of the table under README.md's "## The crates",
//!    and every name there is such a package.
//! 5. **Cited paths resolve**: every path that a tracked document, source or script cites under
//!    one of the top-level folders ([`CITED_ROOTS`]) exists, relative to the repository, the
//!    citing file's folder or its package's folder; paths with placeholders (`<`, `*`, `{`, `$`,
//!    an all-caps segment such as `TARGET`) and generated outputs ([`GENERATED`]) are skipped.
//!
//! 6. **No circle between files**: within a package, no chain of imports between its source
//!    files leads back to where it started ([`crate::file_circles`]).
//! 7. **No long parameter lists**: no package's `src/` allows clippy's `too_many_arguments`;
//!    parameters that belong together travel as a struct (kernels take theirs by value, see
//!    docs/kernels.md). Tests, examples and benchmark programs are not held to it, nor are the
//!    Python functions of weft-py: pyo3 maps each keyword argument of a Python signature to
//!    one Rust parameter, so an allow right after a `#[pyo3(signature = ...)]` is accepted.
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
    // The kernel sources and their build-time library: no dependencies.
    ("weft-kernels", 0),
    ("weft-core", 1),
    // Vector files, graph storage and the GPU runtime, side by side.
    ("weft-io", 2),
    ("weft-graph", 2),
    ("weft-gpu", 2),
    // Exact k-NN on the CPU and the GPU (ground truth, recall), under every builder and search.
    ("weft-exact", 3),
    // The builders, side by side (GRNND shares its parameters with RNN-Descent: SAME_LAYER),
    // and the test kit their tests share.
    ("weft-nndescent", 4),
    ("weft-rnndescent", 4),
    ("weft-grnnd", 4),
    ("weft-cagra", 4),
    ("weft-ggnn", 4),
    ("weft-example-kernel", 4),
    ("weft-testkit", 4),
    // Search above them, then the facade, then what users run.
    ("weft-search", 5),
    ("weft", 6),
    ("weft-cli", 7),
    ("weft-py", 7),
    ("weft-benches", 7),
    ("xtask", 7),
];

/// Same-layer dependencies that are allowed: (dependent, dependency).
const SAME_LAYER: &[(&str, &str)] = &[
    // GRNND is the GPU form of RNN-Descent and takes its parameter struct.
    ("weft-grnnd", "weft-rnndescent"),
];

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
    problems.extend(readme_crate_table(&root, packages)?);
    problems.extend(cited_paths(&root)?);
    for pkg in packages {
        let manifest = PathBuf::from(pkg["manifest_path"].as_str().unwrap_or_default());
        if let Some(dir) = manifest.parent() {
            problems.extend(crate::file_circles::package_circles(
                &root,
                &dir.join("src"),
            )?);
            problems.extend(long_parameter_lists(&root, &dir.join("src"))?);
        }
    }
    if !problems.is_empty() {
        for p in &problems {
            eprintln!("tidy: {p}");
        }
        bail!("{} tidy problem(s)", problems.len());
    }
    println!(
        "tidy: {} packages: only weft-gpu names cudarc, dependencies point one way, none unused; \
         the README's crate table matches the workspace; cited paths resolve; no circle between \
         files; no too_many_arguments allowed in src",
        packages.len()
    );
    Ok(())
}

/// The top-level folders whose paths rule 5 checks where a file cites them.
const CITED_ROOTS: [&str; 8] = [
    "crates/",
    "kernels/",
    "docs/",
    "xtask/",
    "benches/",
    "examples/",
    ".ci/",
    "fuzz/",
];

/// Generated outputs that documents may cite before they exist.
const GENERATED: [&str; 4] = ["target/", "fuzz/target/", "fuzz/corpus/", "fuzz/artifacts/"];

/// The extensions of the tracked files whose citations rule 5 checks.
const CITING_FILES: [&str; 8] = ["md", "rs", "cu", "cuh", "py", "toml", "sh", "pyi"];

/// Cited paths that do not resolve (rule 5), as `file: path`.
fn cited_paths(root: &Path) -> Result<Vec<String>> {
    let out = Command::new("git")
        .args(["ls-files", "-z"])
        .current_dir(root)
        .output()
        .context("run git ls-files")?;
    if !out.status.success() {
        bail!(
            "git ls-files failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let mut problems = Vec::new();
    for file in String::from_utf8_lossy(&out.stdout).split('\0') {
        let path = root.join(file);
        let cites = Path::new(file)
            .extension()
            .is_some_and(|e| CITING_FILES.iter().any(|c| e == *c));
        if !cites || !path.is_file() {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        let folder = path.parent().unwrap_or(root).to_path_buf();
        let package = folder
            .ancestors()
            .take_while(|a| a.starts_with(root))
            .find(|a| a.join("Cargo.toml").is_file() || a.join("pyproject.toml").is_file())
            .unwrap_or(root)
            .to_path_buf();
        for cited in cited_path_candidates(&text) {
            let resolves = [root, folder.as_path(), package.as_path()]
                .iter()
                .any(|base| base.join(&cited).exists());
            if !resolves {
                problems.push(format!("{file} cites {cited}, which does not exist"));
            }
        }
    }
    problems.sort();
    problems.dedup();
    Ok(problems)
}

/// The paths under [`CITED_ROOTS`] that `text` cites: a root at a word start, then path
/// characters, trailing `.`/`-` and a `:line` suffix dropped; placeholders and generated
/// outputs left out.
fn cited_path_candidates(text: &str) -> Vec<String> {
    let is_path_char = |c: char| c.is_alphanumeric() || matches!(c, '_' | '.' | '/' | '-');
    let mut found = Vec::new();
    for prefix in CITED_ROOTS {
        for (at, _) in text.match_indices(prefix) {
            if text[..at].chars().next_back().is_some_and(is_path_char) {
                continue;
            }
            let rest = &text[at..];
            let end = rest.find(|c: char| !is_path_char(c)).unwrap_or(rest.len());
            let after = rest[end..].chars().next();
            let cited = rest[..end].trim_end_matches(['.', '-']);
            if matches!(after, Some('<' | '*' | '{' | '$'))
                || GENERATED.iter().any(|g| cited.starts_with(g))
                || cited.split('/').any(|seg| {
                    seg.len() >= 3 && seg.chars().all(|c| c.is_ascii_uppercase() || c == '_')
                })
            {
                continue;
            }
            found.push(cited.to_owned());
        }
    }
    found
}

/// What README.md's crate table lacks or names wrongly (rule 4).
fn readme_crate_table(root: &Path, packages: &[Value]) -> Result<Vec<String>> {
    let readme = std::fs::read_to_string(root.join("README.md")).context("read README.md")?;
    let listed = crate_table_names(&readme);
    let mut problems = Vec::new();
    if listed.is_empty() {
        problems.push("README.md has no crate table under \"## The crates\"".into());
    }
    let mut in_workspace = Vec::new();
    for pkg in packages {
        let name = pkg["name"].as_str().unwrap_or_default();
        let manifest = PathBuf::from(pkg["manifest_path"].as_str().unwrap_or_default());
        let Ok(rel) = manifest.strip_prefix(root) else {
            continue;
        };
        if rel.starts_with("crates") || rel.starts_with("kernels") {
            in_workspace.push(name.to_owned());
            if !listed.iter().any(|l| l == name) {
                problems.push(format!(
                    "README.md's crate table does not name the package `{name}`"
                ));
            }
        }
    }
    for l in &listed {
        if !in_workspace.contains(l) {
            problems.push(format!(
                "README.md's crate table names `{l}`, which is no package in crates/ or kernels/"
            ));
        }
    }
    Ok(problems)
}

/// The backticked names in the first column of the table under `## The crates`.
fn crate_table_names(readme: &str) -> Vec<String> {
    let Some(start) = readme.find("\n## The crates") else {
        return Vec::new();
    };
    let mut names = Vec::new();
    let mut in_table = false;
    for line in readme[start + 1..].lines().skip(1) {
        if line.starts_with("## ") {
            break;
        }
        if !line.starts_with('|') {
            if in_table {
                break;
            }
            continue;
        }
        in_table = true;
        let first = line.split('|').nth(1).unwrap_or_default();
        names.extend(first.split('`').skip(1).step_by(2).map(str::to_owned));
    }
    names
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
        visit_rust_files(&dir.join(place), &mut |_, text| {
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
/// The allows of clippy's `too_many_arguments` under `src` (rule 7), as `file:line`.
fn long_parameter_lists(root: &Path, src: &Path) -> Result<Vec<String>> {
    let mut found = Vec::new();
    visit_rust_files(src, &mut |path, text| {
        let lines: Vec<&str> = text.lines().collect();
        for (i, line) in lines.iter().enumerate() {
            let python_signature =
                i > 0 && lines[i - 1].trim_start().starts_with("#[pyo3(signature");
            if allows_too_many_arguments(line) && !python_signature {
                found.push(format!(
                    "{}:{} allows clippy::too_many_arguments; group the parameters in a struct",
                    path.strip_prefix(root).unwrap_or(path).display(),
                    i + 1
                ));
            }
        }
    })?;
    Ok(found)
}

/// Whether a line is an attribute that allows or expects `too_many_arguments`.
fn allows_too_many_arguments(line: &str) -> bool {
    let code = strip_line_comment(line).trim_start();
    ["#[allow(", "#![allow(", "#[expect(", "#![expect("]
        .iter()
        .any(|a| code.starts_with(a))
        && code.contains("too_many_arguments")
}

/// Calls `f` with the path and text of every `.rs` file at or under `path`, in sorted order.
fn visit_rust_files(path: &Path, f: &mut dyn FnMut(&Path, &str)) -> Result<()> {
    if path.is_file() {
        if path.extension().is_some_and(|e| e == "rs") {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("read {}", path.display()))?;
            f(path, &text);
        }
        return Ok(());
    }
    let Ok(dir) = std::fs::read_dir(path) else {
        return Ok(());
    };
    let mut entries: Vec<PathBuf> = dir.flatten().map(|e| e.path()).collect();
    entries.sort();
    for p in entries {
        visit_rust_files(&p, f)?;
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
    fn cited_paths_are_found_at_word_starts() {
        let text = "see `crates/weft-gpu/src/lib.rs:12`, docs/kernels.md. Not \
                    my-crates/x or ./crates/y; crates/weft/<name>.rs, fuzz/target/x, \
                    fuzz/corpus/TARGET/ and kernels/gnnd/ (the module)";
        assert_eq!(
            cited_path_candidates(text),
            [
                "crates/weft-gpu/src/lib.rs",
                "kernels/gnnd/",
                "docs/kernels.md"
            ]
        );
    }

    #[test]
    fn crate_table_names_are_the_first_column() {
        let readme = "# x\n\n## The crates\n\n| crate | what |\n|---|---|\n| `a` | uses `b` |\n\
                      | `c`, `d` | two |\n\nText naming `e`.\n\n## Next\n| `f` | x |\n";
        assert_eq!(crate_table_names(readme), ["a", "c", "d"]);
        assert!(crate_table_names("# no table\n").is_empty());
    }

    #[test]
    fn word_starts_and_comments() {
        assert!(contains_word_start("use serde::Deserialize;", "serde::"));
        assert!(!contains_word_start("my_serde::x()", "serde::"));
        assert!(contains_word_start("(serde::x)", "serde::"));
        assert_eq!(strip_line_comment("a // cudarc"), "a ");
        assert_eq!(strip_line_comment("\"http://x\""), "\"http://x\"");
    }

    #[test]
    fn too_many_arguments_allows_are_found_in_code_only() {
        assert!(allows_too_many_arguments(
            "    #[allow(clippy::too_many_arguments)]"
        ));
        assert!(allows_too_many_arguments(
            "#![allow(clippy::too_many_arguments, dead_code)]"
        ));
        assert!(allows_too_many_arguments(
            "#[expect(clippy::too_many_arguments)]"
        ));
        assert!(!allows_too_many_arguments(
            "// once #[allow(clippy::too_many_arguments)]"
        ));
        assert!(!allows_too_many_arguments("fn f(a: u32) {}"));
        assert!(!allows_too_many_arguments(
            "let s = \"#[allow(clippy::too_many_arguments)]\";"
        ));
    }

    #[test]
    fn every_layer_is_unique_and_known() {
        for (i, (a, _)) in LAYERS.iter().enumerate() {
            assert!(LAYERS[i + 1..].iter().all(|(b, _)| a != b), "{a} twice");
        }
        assert_eq!(layer("weft-gpu"), Some(2));
        assert_eq!(layer("weft-exact"), Some(3));
        assert_eq!(layer("weft-kernels"), Some(0));
        assert_eq!(layer("nope"), None);
    }
}
