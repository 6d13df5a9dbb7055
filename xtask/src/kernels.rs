//! `cargo xtask kernels` (being written).

use anyhow::{Result, bail};

/// Runs the task.
pub fn run(_args: &[String]) -> Result<()> {
    bail!("cargo xtask kernels is not available yet")
}
