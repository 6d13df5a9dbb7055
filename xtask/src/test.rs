//! `cargo xtask test`.

use std::path::PathBuf;

use anyhow::Result;

use crate::bench::PEER_PINS;
use crate::util::{cargo, pinned_venv, run as sh};

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

/// `target/test-venv` with the peers' numpy pin.
fn test_python() -> Result<PathBuf> {
    let pins: Vec<&str> = PEER_PINS
        .iter()
        .copied()
        .filter(|p| p.starts_with("numpy=="))
        .collect();
    pinned_venv("test-venv", &pins)
}
