//! `cargo xtask bench` (being written).

use anyhow::{Result, bail};

/// Runs the task.
pub fn run(_args: &[String]) -> Result<()> {
    bail!("cargo xtask bench is not available yet")
}
