//! `cargo xtask test`.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result};

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
/// libpython, so `cargo test` builds no test executable for it (`test = false`); instead it is
/// installed with pip into `target/test-venv` (release build, the workspace's Cargo.lock) and
/// its pytest suite runs there. `--no-python` skips this part.
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
fn test_python() -> Result<PathBuf> {
    let mut pins: Vec<&str> = PEER_PINS
        .iter()
        .copied()
        .filter(|p| p.starts_with("numpy=="))
        .collect();
    pins.extend_from_slice(PY_TEST_PINS);
    pinned_venv("test-venv", &pins)
}

/// Installs crates/weft-py into the virtual environment of `python` with pip (maturin from the
/// environment, no download) and runs its pytest suite, skipped tests listed with their reason.
fn python_package_tests(python: &Path) -> Result<()> {
    let bin = python
        .parent()
        .context("the virtual environment's python has no folder")?;
    // maturin's PEP 517 hooks run `maturin` from PATH: the environment's own.
    let path = std::env::join_paths(std::iter::once(bin.to_path_buf()).chain(
        std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default()),
    ))?;
    let package = root().join("crates/weft-py");
    sh(Command::new(python)
        .current_dir(root())
        .env("PATH", &path)
        .args([
            "-m",
            "pip",
            "install",
            "--quiet",
            "--no-build-isolation",
            "--no-deps",
            "--no-cache-dir",
            "--force-reinstall",
        ])
        .arg(&package))
    .context("pip could not build and install crates/weft-py")?;
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
