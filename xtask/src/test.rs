//! `cargo xtask test`.

use std::path::PathBuf;
use std::process::Command;

use anyhow::{Context, Result};

use crate::bench::PEER_PINS;
use crate::util::{cargo, root, run as sh};

/// Runs the workspace tests; with `--lint` also `cargo fmt --check` and clippy with -D warnings.
/// The tests that run the peers' Python scripts (`benches`: the cuVS peer's self-check) get a
/// Python with numpy through `WEFT_PEERS_PYTHON`: the one given, else `target/test-venv`,
/// created here with the peers' numpy pin.
pub fn run(args: &[String]) -> Result<()> {
    let lint = args.iter().any(|a| a == "--lint");
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
    let python = match std::env::var_os("WEFT_PEERS_PYTHON") {
        Some(p) => PathBuf::from(p),
        None => test_python()?,
    };
    sh(cargo()
        .args(["test", "--workspace"])
        .env("WEFT_PEERS_PYTHON", python))?;
    Ok(())
}

/// `target/test-venv` with the peers' numpy pin, created and filled on first use (and refilled
/// when the pin changes).
fn test_python() -> Result<PathBuf> {
    let venv = root().join("target/test-venv");
    let py = venv.join("bin/python");
    let pins: Vec<&str> = PEER_PINS
        .iter()
        .copied()
        .filter(|p| p.starts_with("numpy=="))
        .collect();
    if !py.exists() {
        sh(Command::new("python3").args(["-m", "venv"]).arg(&venv))
            .context("python3 -m venv failed (install python3-venv)")?;
    }
    let stamp = venv.join("weft-pins.txt");
    let want = pins.join("\n");
    if std::fs::read_to_string(&stamp).ok().as_deref() != Some(want.as_str()) {
        sh(Command::new(&py)
            .args(["-m", "pip", "install", "--quiet"])
            .args(&pins))
        .context("pip could not install numpy for the tests")?;
        std::fs::write(&stamp, &want)?;
    }
    Ok(py)
}
