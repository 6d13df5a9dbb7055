//! Helpers shared by the tasks.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};

/// The workspace root (the parent of xtask/).
pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("xtask sits in the workspace")
        .to_path_buf()
}

/// Runs `cmd`, echoing it, and fails if it fails.
pub fn run(cmd: &mut Command) -> Result<()> {
    eprintln!("$ {cmd:?}");
    let status = cmd
        .status()
        .with_context(|| format!("cannot start {cmd:?}"))?;
    if !status.success() {
        bail!("{cmd:?} failed with {status}");
    }
    Ok(())
}

/// `cargo` as the caller invoked it.
pub fn cargo() -> Command {
    let mut c = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    c.current_dir(root());
    c
}

/// The Python of the virtual environment `target/<name>` with `pins` installed, created and
/// filled on first use (and refilled when the pins change; a stamp file records them).
pub fn pinned_venv(name: &str, pins: &[&str]) -> Result<PathBuf> {
    let venv = root().join("target").join(name);
    let py = venv.join("bin/python");
    if !py.exists() {
        run(Command::new("python3").args(["-m", "venv"]).arg(&venv))
            .context("python3 -m venv failed (install python3-venv)")?;
    }
    let stamp = venv.join("weft-pins.txt");
    let want = pins.join("\n");
    if std::fs::read_to_string(&stamp).ok().as_deref() != Some(want.as_str()) {
        run(Command::new(&py)
            .args(["-m", "pip", "install", "--quiet"])
            .args(pins))
        .with_context(|| format!("pip could not install {}", pins.join(" ")))?;
        std::fs::write(&stamp, &want)?;
    }
    Ok(py)
}
