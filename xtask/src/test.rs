//! `cargo xtask test`.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};

use crate::bench::PEER_PINS;
use crate::util::{cargo, pinned_venv, root, run as sh};

/// What the Python package's tests need besides the peers' numpy: the build backend (pinned,
/// instead of the newest one pip's build isolation would fetch) and pytest.
const PY_TEST_PINS: &[&str] = &["maturin==1.9.6", "pytest==8.4.2"];

/// Runs the workspace tests; with `--lint` also `cargo fmt --check` and clippy with -D warnings.
/// The tests that run the peers' Python scripts (`benches`: the cuVS peer's self-check) get a
/// Python with numpy through `WEFT_PEERS_PYTHON`: the one given, else `target/test-venv`,
/// created here with the peers' numpy pin.
///
/// Then the Python package (crates/weft-py): it is an extension module, which links no
/// libpython, so `cargo test` builds no test executable for it (`test = false`); instead its
/// abi3 wheel is built once with `maturin build --release` into `target/wheels` (the
/// workspace's Cargo.lock), installed with pip into `target/test-venv`, and its pytest suite
/// runs there. `--no-python` skips this part.
pub fn run(args: &[String]) -> Result<()> {
    let lint = args.iter().any(|a| a == "--lint");
    let python_tests = !args.iter().any(|a| a == "--no-python");
    if lint {
        sh(cargo().args(["fmt", "--all", "--check"]))?;
        sh(cargo().args([
            "clippy",
            "--workspace",
            "--all-targets",
            "--",
            "-D",
            "warnings",
        ]))?;
    }
    let venv_python = test_python()?;
    let python = match std::env::var_os("WEFT_PEERS_PYTHON") {
        Some(p) => PathBuf::from(p),
        None => venv_python.clone(),
    };
    sh(cargo()
        .args(["test", "--workspace"])
        .env("WEFT_PEERS_PYTHON", python))?;
    if python_tests {
        python_package_tests(&venv_python)?;
    }
    Ok(())
}

/// `target/test-venv` with the peers' numpy pin and [`PY_TEST_PINS`].
pub(crate) fn test_python() -> Result<PathBuf> {
    let mut pins: Vec<&str> = PEER_PINS
        .iter()
        .copied()
        .filter(|p| p.starts_with("numpy=="))
        .collect();
    pins.extend_from_slice(PY_TEST_PINS);
    pinned_venv("test-venv", &pins)
}

/// The distribution name of crates/weft-py on PyPI (`weft` there is another project); the
/// package still imports as `weft`. Wheels are named after it, with `-` as `_`.
const DISTRIBUTION: &str = "weft-ann";

/// The tag every wheel of crates/weft-py carries: one abi3 wheel for CPython 3.9 and newer
/// (pyo3's `abi3-py39`).
const ABI3_TAG: &str = "-cp39-abi3-";

/// Builds the wheel of crates/weft-py once, with `maturin build --release` (the environment's
/// maturin, the workspace's Cargo.lock) into `target/wheels`, checks that it is an abi3 wheel
/// (`cp39-abi3`) of the `weft-ann` distribution, installs that wheel into the virtual
/// environment of `python` with pip, and runs the package's pytest suite there, skipped tests
/// listed with their reason. CI thus tests the very wheel a release would publish.
fn python_package_tests(python: &Path) -> Result<()> {
    let package = root().join("crates/weft-py");
    let wheel = build_wheel(python, &root().join("target/wheels"), |_| {})?;
    sh(Command::new(python)
        .current_dir(root())
        .args([
            "-m",
            "pip",
            "install",
            "--quiet",
            "--no-deps",
            "--no-cache-dir",
            "--force-reinstall",
        ])
        .arg(&wheel))
    .context("pip could not install the wheel of crates/weft-py")?;
    sh(Command::new(python).current_dir(&package).args([
        "-m",
        "pytest",
        "tests",
        "-q",
        "-rs",
        "-p",
        "no:cacheprovider",
    ]))
}

/// Builds the abi3 wheel of crates/weft-py with the maturin of `python`'s virtual environment
/// (`maturin build --release`, the command adjusted by `configure`, e.g. the kernels' compiler)
/// into `out`, after removing the distribution's earlier wheels there, and returns its path,
/// checked by [`check_wheel_name`]. `cargo xtask test` and `cargo xtask device-pack` build
/// their wheels here.
pub(crate) fn build_wheel(
    python: &Path,
    out: &Path,
    configure: impl FnOnce(&mut Command),
) -> Result<PathBuf> {
    let bin = python
        .parent()
        .context("the virtual environment's python has no folder")?;
    let prefix = format!("{}-", DISTRIBUTION.replace('-', "_"));
    // Earlier builds' wheels: removed, so that the one left is this build's.
    if let Ok(entries) = std::fs::read_dir(out) {
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if name.starts_with(&prefix) && name.ends_with(".whl") {
                std::fs::remove_file(entry.path())
                    .with_context(|| format!("cannot remove the old wheel {name}"))?;
            }
        }
    }
    let mut cmd = Command::new(bin.join("maturin"));
    cmd.current_dir(root().join("crates/weft-py"))
        .args(["build", "--release", "--out"])
        .arg(out);
    configure(&mut cmd);
    sh(&mut cmd).context("maturin could not build the wheel of crates/weft-py")?;
    let built: Vec<PathBuf> = std::fs::read_dir(out)
        .with_context(|| format!("maturin wrote no {}", out.display()))?
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with(&prefix) && n.ends_with(".whl"))
        })
        .collect();
    let [wheel] = built.as_slice() else {
        bail!(
            "expected one {prefix}*.whl in {} after maturin build, found {built:?}",
            out.display()
        );
    };
    check_wheel_name(wheel)?;
    Ok(wheel.clone())
}

/// Fails unless `wheel` is named as an abi3 wheel of [`DISTRIBUTION`] for CPython 3.9 and newer:
/// `weft_ann-<version>-cp39-abi3-<platform>.whl`.
fn check_wheel_name(wheel: &Path) -> Result<()> {
    let name = wheel
        .file_name()
        .and_then(|n| n.to_str())
        .context("the wheel's name is not UTF-8")?;
    let prefix = format!("{}-", DISTRIBUTION.replace('-', "_"));
    if !name.starts_with(&prefix) || !name.contains(ABI3_TAG) || !name.ends_with(".whl") {
        bail!(
            "{name} is not an abi3 wheel of {DISTRIBUTION} (expected {prefix}<version>{ABI3_TAG}<platform>.whl)"
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_abi3_wheels_of_the_distribution_pass() {
        let ok = Path::new("target/wheels/weft_ann-0.1.0-cp39-abi3-manylinux_2_34_x86_64.whl");
        check_wheel_name(ok).unwrap();
        for bad in [
            "weft-0.1.0-cp39-abi3-manylinux_2_34_x86_64.whl",
            "weft_ann-0.1.0-cp311-cp311-manylinux_2_34_x86_64.whl",
            "weft_ann-0.1.0.tar.gz",
        ] {
            assert!(check_wheel_name(Path::new(bad)).is_err(), "{bad}");
        }
    }
}
