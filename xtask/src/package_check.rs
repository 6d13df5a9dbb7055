//! `cargo xtask package-check [--allow-dirty] [--verify]`: the publishable crates package, and
//! the toolchain meets the stated MSRV (run by `.ci/run`; about half a minute, no GPU or nvcc).
//!
//! 1. **Metadata**: every publishable package (one without `publish = false`) has a
//!    description, the license, the repository [`REPOSITORY`], a readme, 1 to 5 keywords and a
//!    category, and carries `LICENSE-MIT` and `LICENSE-APACHE` in its folder, identical to the
//!    workspace's (a package holds only its own folder).
//! 2. **Dependencies**: a publishable package may depend with a version only on publishable
//!    workspace packages, and by a versioned dev-dependency only on lower layers (`tidy`'s
//!    [`LAYERS`](crate::tidy)); anything else must be a path-only dev-dependency, which `cargo
//!    package` drops (weft-testkit is never published; weft-search's dev-dependencies on the
//!    algorithm crates would otherwise form a cycle with theirs on it).
//! 3. **Kernels**: the weft-kernels package (the workspace's `kernels/`) ships every kernel
//!    source and header (`cargo package --list`) and every header a kernel includes; a crate
//!    whose build script binds weft's modules (`build_weft_kernels(.., &["gnnd", ..])`) ships
//!    its `build.rs`, names only modules that package ships, and build-depends on it with a
//!    version (its build script reads the sources from weft-kernels' own folder, in a registry
//!    its unpacked package); a crate with a `kernels/` folder of its own ships all of it.
//! 4. **Packaging**: `cargo package --workspace --no-verify`, the unpublished packages
//!    excluded, succeeds (`--no-verify`: no build, which would need minutes). `--verify` builds
//!    every package from its own unpacked `.crate` instead, as `cargo publish` does: the facade's
//!    default `cuda` feature then runs every kernel crate's build script on its packaged sources,
//!    with the sources and headers from the packaged weft-kernels (slow: for a release, not for
//!    CI).
//! 5. **MSRV**: `rustc --version` is at least the workspace's `rust-version`.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};
use serde_json::Value;

use crate::tidy::layer;
use crate::util::{cargo, root, run as sh};

/// The repository every publishable package names (the project's intended home).
pub const REPOSITORY: &str = "https://github.com/weft-ann/weft";

/// The license files each publishable package carries, copies of the workspace's.
const LICENSE_FILES: [&str; 2] = ["LICENSE-MIT", "LICENSE-APACHE"];

/// Runs the task.
pub fn run(args: &[String]) -> Result<()> {
    let (mut allow_dirty, mut verify) = (false, false);
    for a in args {
        match a.as_str() {
            "--allow-dirty" => allow_dirty = true,
            "--verify" => verify = true,
            other => {
                bail!("package-check: unknown option `{other}` (--allow-dirty, --verify)")
            }
        }
    }
    let root = root();
    let meta = metadata(&root)?;
    let packages = meta["packages"]
        .as_array()
        .context("cargo metadata has no packages")?;
    let publishable: Vec<&Value> = packages.iter().filter(|p| is_publishable(p)).collect();
    let unpublished: Vec<&str> = packages
        .iter()
        .filter(|p| !is_publishable(p))
        .filter_map(|p| p["name"].as_str())
        .collect();
    let mut problems = Vec::new();
    // What the weft-kernels package ships, listed once for every crate that binds its modules.
    let kernel_files = if packages.iter().any(|p| name(p) == KERNELS_PACKAGE) {
        package_list(KERNELS_PACKAGE, allow_dirty)?
    } else {
        Vec::new()
    };
    for pkg in &publishable {
        problems.extend(metadata_problems(pkg));
        problems.extend(license_problems(pkg, &root)?);
        problems.extend(dependency_problems(pkg, packages));
        problems.extend(kernel_problems(pkg, &kernel_files, allow_dirty)?);
    }
    problems.extend(msrv_problems(packages)?);
    if !problems.is_empty() {
        for p in &problems {
            eprintln!("package-check: {p}");
        }
        bail!("{} packaging problem(s)", problems.len());
    }
    let mut package = cargo();
    package.args(["package", "--workspace"]);
    if !verify {
        package.arg("--no-verify");
    }
    if allow_dirty {
        package.arg("--allow-dirty");
    }
    for name in &unpublished {
        package.args(["--exclude", name]);
    }
    sh(&mut package)?;
    println!(
        "package-check: {} publishable packages package with their metadata, licenses and \
         kernels; {} unpublished: {}; the toolchain meets the MSRV",
        publishable.len(),
        unpublished.len(),
        unpublished.join(", ")
    );
    Ok(())
}

/// `cargo metadata --no-deps` of the workspace.
fn metadata(root: &Path) -> Result<Value> {
    let out = cargo()
        .args(["metadata", "--format-version", "1", "--no-deps"])
        .current_dir(root)
        .output()
        .context("run cargo metadata")?;
    if !out.status.success() {
        bail!(
            "cargo metadata failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    serde_json::from_slice(&out.stdout).context("parse cargo metadata")
}

/// Whether the package may be published (`publish` unset; `publish = false` is `[]`).
fn is_publishable(pkg: &Value) -> bool {
    !matches!(pkg["publish"].as_array(), Some(registries) if registries.is_empty())
}

/// The package's name.
fn name(pkg: &Value) -> &str {
    pkg["name"].as_str().unwrap_or("?")
}

/// The package's folder.
fn dir(pkg: &Value) -> PathBuf {
    Path::new(pkg["manifest_path"].as_str().unwrap_or_default())
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_default()
}

/// What the package's manifest lacks for crates.io.
fn metadata_problems(pkg: &Value) -> Vec<String> {
    let n = name(pkg);
    let mut problems = Vec::new();
    for field in ["description", "license", "readme"] {
        if pkg[field].as_str().is_none_or(str::is_empty) {
            problems.push(format!("`{n}` has no `{field}`"));
        }
    }
    if pkg["repository"].as_str() != Some(REPOSITORY) {
        problems.push(format!(
            "`{n}`'s repository is {}, not {REPOSITORY}",
            pkg["repository"]
        ));
    }
    let keywords = pkg["keywords"].as_array().map_or(0, Vec::len);
    if !(1..=5).contains(&keywords) {
        problems.push(format!(
            "`{n}` has {keywords} keywords (crates.io takes 1 to 5)"
        ));
    }
    if pkg["categories"].as_array().is_none_or(Vec::is_empty) {
        problems.push(format!("`{n}` has no categories"));
    }
    problems
}

/// License files missing from the package's folder, or differing from the workspace's.
fn license_problems(pkg: &Value, root: &Path) -> Result<Vec<String>> {
    let mut problems = Vec::new();
    for file in LICENSE_FILES {
        let want = std::fs::read(root.join(file)).with_context(|| format!("read {file}"))?;
        match std::fs::read(dir(pkg).join(file)) {
            Ok(got) if got == want => {}
            Ok(_) => problems.push(format!(
                "`{}`'s {file} differs from the workspace's (copy it again)",
                name(pkg)
            )),
            Err(_) => problems.push(format!(
                "`{}` has no {file} in its folder (copy the workspace's: a package holds only \
                 its own folder)",
                name(pkg)
            )),
        }
    }
    Ok(problems)
}

/// Dependencies on workspace packages that would stop `cargo package` or `cargo publish`.
fn dependency_problems(pkg: &Value, packages: &[Value]) -> Vec<String> {
    let n = name(pkg);
    let mut problems = Vec::new();
    for dep in pkg["dependencies"].as_array().into_iter().flatten() {
        let dep_name = dep["name"].as_str().unwrap_or_default();
        let Some(target) = packages.iter().find(|p| name(p) == dep_name) else {
            continue; // not a workspace package
        };
        let kind = dep["kind"].as_str().unwrap_or("normal");
        let versioned = dep["req"].as_str().is_some_and(|r| r != "*");
        if !versioned {
            if kind != "dev" {
                problems.push(format!(
                    "`{n}`'s {kind} dependency `{dep_name}` has no version: a published \
                     package needs one"
                ));
            }
            continue; // a path-only dev-dependency: `cargo package` drops it
        }
        if !is_publishable(target) {
            problems.push(format!(
                "`{n}` depends on the unpublished `{dep_name}` with a version: make it a \
                 path-only dev-dependency"
            ));
        } else if kind == "dev" && layer(dep_name) >= layer(n) {
            problems.push(format!(
                "`{n}`'s versioned dev-dependency `{dep_name}` is not of a lower layer (a cycle \
                 for `cargo package`): make it path-only"
            ));
        }
    }
    problems
}

/// The `weft/...` headers a kernel source includes.
fn weft_includes(source: &str) -> Vec<&str> {
    source
        .lines()
        .filter_map(|l| l.trim_start().strip_prefix("#include \"weft/"))
        .filter_map(|rest| rest.split('"').next())
        .collect()
}

/// Every file under `path`, relative to `base`, with `/` separators, sorted.
fn files_under(base: &Path, path: &Path) -> Result<Vec<String>> {
    let mut out = Vec::new();
    if path.is_file() {
        let rel = path.strip_prefix(base).unwrap_or(path);
        out.push(rel.to_string_lossy().replace('\\', "/"));
    } else if path.is_dir() {
        for e in std::fs::read_dir(path).with_context(|| format!("read {}", path.display()))? {
            out.extend(files_under(base, &e?.path())?);
        }
    }
    out.sort();
    Ok(out)
}

/// `cargo package --list -p <name>`: the files the package holds.
fn package_list(name: &str, allow_dirty: bool) -> Result<Vec<String>> {
    let mut cmd = cargo();
    cmd.args(["package", "--list", "-p", name]);
    if allow_dirty {
        cmd.arg("--allow-dirty");
    }
    let out = cmd.output().context("run cargo package --list")?;
    if !out.status.success() {
        bail!(
            "cargo package --list -p {name} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_owned)
        .collect())
}

/// What a package with CUDA kernels would lack to build from its own package; `kernel_files`
/// is what the weft-kernels package ships.
fn kernel_problems(pkg: &Value, kernel_files: &[String], allow_dirty: bool) -> Result<Vec<String>> {
    let n = name(pkg);
    let pkg_dir = dir(pkg);
    let mut problems = Vec::new();
    if n == KERNELS_PACKAGE {
        problems.extend(kernels_package_problems(&pkg_dir, kernel_files)?);
    }
    let build_rs = std::fs::read_to_string(pkg_dir.join("build.rs")).unwrap_or_default();
    let named = named_weft_modules(&build_rs);
    let own = pkg_dir.join("kernels");
    let own_kernels = n != KERNELS_PACKAGE && own.is_dir();
    if named.is_empty() && !own_kernels {
        return Ok(problems);
    }
    let listed = package_list(n, allow_dirty)?;
    // A crate whose build script binds weft's modules: each module it names is a folder of the
    // weft-kernels package, which it depends on at build time with a version.
    if !named.is_empty() {
        if !listed.iter().any(|f| f == "build.rs") {
            problems.push(format!("`{n}`'s package lacks build.rs"));
        }
        for m in &named {
            let prefix = format!("{m}/");
            if !kernel_files
                .iter()
                .any(|f| f.starts_with(&prefix) && f.ends_with(".cu"))
            {
                problems.push(format!(
                    "`{n}`'s build script binds the kernel module `{m}`, which the \
                     {KERNELS_PACKAGE} package does not ship"
                ));
            }
        }
        let builds_with_kernels = pkg["dependencies"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|d| d["name"] == KERNELS_PACKAGE && d["kind"] == "build" && d["req"] != "*");
        if !builds_with_kernels {
            problems.push(format!(
                "`{n}`'s build script binds weft kernel modules, but `{n}` has no versioned \
                 build-dependency on {KERNELS_PACKAGE}"
            ));
        }
    }
    // A crate with kernels of its own (`kernels/` in its folder, as a downstream crate keeps
    // them) ships every file of that folder and its build script.
    if own_kernels {
        let mut want = files_under(&pkg_dir, &own)?;
        want.push("build.rs".into());
        for f in want {
            if !listed.contains(&f) {
                problems.push(format!("`{n}`'s package lacks {f}"));
            }
        }
    }
    Ok(problems)
}

/// The package of weft's kernel modules (the workspace's `kernels/`).
const KERNELS_PACKAGE: &str = "weft-kernels";

/// What the weft-kernels package lacks: every kernel source and header of its folder, and
/// every header a kernel includes (`#include "weft/..."` is `include/weft/...`).
fn kernels_package_problems(pkg_dir: &Path, listed: &[String]) -> Result<Vec<String>> {
    let mut problems = Vec::new();
    let sources: Vec<String> = files_under(pkg_dir, pkg_dir)?
        .into_iter()
        .filter(|f| f.ends_with(".cu") || f.ends_with(".cuh"))
        .filter(|f| !f.starts_with("target/"))
        .collect();
    if !sources.iter().any(|f| f.ends_with(".cu")) {
        problems.push(format!("{KERNELS_PACKAGE} has no kernel sources"));
    }
    for f in &sources {
        if !listed.contains(f) {
            problems.push(format!("the {KERNELS_PACKAGE} package lacks {f}"));
        }
        let text = std::fs::read_to_string(pkg_dir.join(f))?;
        for inc in weft_includes(&text) {
            let header = format!("include/weft/{inc}");
            if !listed.contains(&header) {
                problems.push(format!(
                    "{f} includes weft/{inc}, which the {KERNELS_PACKAGE} package does not ship"
                ));
            }
        }
    }
    Ok(problems)
}

/// The module names a build script passes to `build_weft_kernels(runtime, &[...])`.
fn named_weft_modules(build_rs: &str) -> Vec<String> {
    let mut names = Vec::new();
    for (start, _) in build_rs.match_indices("build_weft_kernels(") {
        let after = &build_rs[start..];
        let Some(list) = after
            .split_once('[')
            .and_then(|(_, rest)| rest.split_once(']'))
            .map(|(list, _)| list)
        else {
            continue;
        };
        names.extend(
            list.split(',')
                .map(|item| item.trim().trim_matches('"'))
                .filter(|item| !item.is_empty())
                .map(str::to_owned),
        );
    }
    names
}

/// `(major, minor, patch)` of a version such as `1.95` or `1.95.0` (missing parts are 0).
fn parse_version(v: &str) -> Option<(u32, u32, u32)> {
    let mut parts = v.split('.').map(|p| p.parse::<u32>());
    let major = parts.next()?.ok()?;
    let minor = parts.next().unwrap_or(Ok(0)).ok()?;
    let patch = parts.next().unwrap_or(Ok(0)).ok()?;
    Some((major, minor, patch))
}

/// Whether `rustc --version` output (`rustc 1.95.0 (hash date)`) is at least `rust_version`.
fn meets_msrv(rustc_version: &str, rust_version: &str) -> Result<bool> {
    let have = rustc_version
        .split_whitespace()
        .nth(1)
        .and_then(|v| parse_version(v.split('-').next().unwrap_or(v)))
        .with_context(|| format!("cannot read the version of `{rustc_version}`"))?;
    let need = parse_version(rust_version)
        .with_context(|| format!("cannot read the rust-version `{rust_version}`"))?;
    Ok(have >= need)
}

/// Packages whose `rust-version` the running rustc does not meet.
fn msrv_problems(packages: &[Value]) -> Result<Vec<String>> {
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    let out = Command::new(&rustc)
        .arg("--version")
        .output()
        .with_context(|| format!("run {rustc} --version"))?;
    let version = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    let mut problems = Vec::new();
    for pkg in packages {
        let Some(msrv) = pkg["rust_version"].as_str() else {
            problems.push(format!("`{}` states no rust-version", name(pkg)));
            continue;
        };
        if !meets_msrv(&version, msrv)? {
            problems.push(format!(
                "`{}` needs rust {msrv}, the toolchain is {version}",
                name(pkg)
            ));
        }
    }
    Ok(problems)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn build_scripts_name_their_modules() {
        let script = r#"fn main() {
    if std::env::var_os("CARGO_FEATURE_CUDA").is_some() {
        weft_kernels::build_weft_kernels(
            "weft_gpu",
            &["cagra_search", "ggnn_search", "search_rerank"],
        );
    }
}"#;
        assert_eq!(
            named_weft_modules(script),
            ["cagra_search", "ggnn_search", "search_rerank"]
        );
        assert_eq!(
            named_weft_modules(r#"weft_kernels::build_weft_kernels("crate", &["exact"]);"#),
            ["exact"]
        );
        assert!(named_weft_modules("weft_kernels::build_crate_kernels(\"weft_gpu\");").is_empty());
    }

    #[test]
    fn msrv_comparison() {
        let rustc = "rustc 1.95.0 (f2d3ce0bd 2026-03-21)";
        assert!(meets_msrv(rustc, "1.95").unwrap());
        assert!(meets_msrv(rustc, "1.94.1").unwrap());
        assert!(!meets_msrv(rustc, "1.96").unwrap());
        assert!(!meets_msrv(rustc, "1.95.1").unwrap());
        assert!(meets_msrv("rustc 1.96.0-nightly (abc 2026-04-01)", "1.95").unwrap());
        assert!(meets_msrv("nonsense", "1.95").is_err());
    }

    #[test]
    fn includes_of_a_kernel() {
        let src = "#include \"weft/types.cuh\"\n  #include \"weft/topk.cuh\" // x\n#include <cuda_fp16.h>\n";
        assert_eq!(weft_includes(src), ["types.cuh", "topk.cuh"]);
    }

    #[test]
    fn metadata_and_dependency_rules() {
        let good = json!({
            "name": "weft-cagra", "description": "d", "license": "MIT OR Apache-2.0",
            "readme": "../../README.md", "repository": REPOSITORY,
            "keywords": ["ann"], "categories": ["algorithms"], "publish": null,
            "dependencies": [
                {"name": "weft-core", "kind": null, "req": "=0.1.0"},
                {"name": "weft-search", "kind": "dev", "req": "*"},
                {"name": "weft-testkit", "kind": "dev", "req": "*"},
                {"name": "serde", "kind": null, "req": "^1"},
            ],
        });
        assert!(metadata_problems(&good).is_empty());
        let packages = [
            good.clone(),
            json!({"name": "weft-core", "publish": null}),
            json!({"name": "weft-search", "publish": null}),
            json!({"name": "weft-testkit", "publish": []}),
        ];
        assert!(is_publishable(&packages[1]) && !is_publishable(&packages[3]));
        assert!(dependency_problems(&good, &packages).is_empty());

        let mut bad = good.clone();
        bad["repository"] = json!("https://example.invalid/weft");
        bad["keywords"] = json!(["a", "b", "c", "d", "e", "f"]);
        bad["categories"] = json!([]);
        bad["dependencies"] = json!([
            {"name": "weft-search", "kind": "dev", "req": "=0.1.0"},
            {"name": "weft-testkit", "kind": "dev", "req": "=0.1.0"},
            {"name": "weft-core", "kind": null, "req": "*"},
        ]);
        assert_eq!(metadata_problems(&bad).len(), 3);
        let found = dependency_problems(&bad, &packages);
        assert_eq!(found.len(), 3, "{found:?}");
        assert!(found[0].contains("lower layer"));
        assert!(found[1].contains("unpublished"));
        assert!(found[2].contains("no version"));
    }
}
