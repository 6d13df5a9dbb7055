//! `cargo xtask device-pack` (being written).

use anyhow::{Result, bail};

/// Runs the task.
pub fn run(_args: &[String]) -> Result<()> {
    bail!("cargo xtask device-pack is not available yet")
}
